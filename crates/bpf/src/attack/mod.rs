//! The lab's active attackers (`bpf/attack/`), for the tests and demos that show what each
//! mode does against an attacker on an untrusted path:
//!
//! - [`tamper`]: `nena lab tamper`: one byte of one segment altered, checksum fixed (a blind
//!   attacker).
//! - [`forge`]: `nena lab forge`: a chosen pattern XORed at a data sequence number (an
//!   attacker who knows what to change).

pub mod forge;
pub mod tamper;
