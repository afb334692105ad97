//! One module per concern; each parses its own arguments and calls its library crate.
pub mod analyze;
pub mod bench;
pub mod codec;
pub mod lab;
pub mod policy;
pub mod transfer;
