//! The repository's own checks, in a test binary apart from the product's tests
//! (`tests/cli/`): the documents against the code and each other ([`architecture`],
//! [`docs`]), no cycle of references between a crate's source files ([`module_cycles`]), references
//! only down nena-transport's layers ([`layers`]),
//! and the Debian package installed on a clean root ([`package_deb`], root, minutes).
//! `make test` runs them with the rest (`cargo test --workspace`); alone:
//! `cargo test --release -p nena --test meta`, one module with `... --test meta MODULE::`.

// The CLI tests' harness (the built `nena`, labs, scratch directories), shared rather than
// copied; package_deb uses a few of its helpers (the harness allows the rest to go unused).
#[path = "../cli/harness.rs"]
mod harness;
// The README's quickstart recipes as the tests read them: package_deb runs the server's.
#[path = "../cli/recipes.rs"]
mod recipes;

mod architecture;
mod docs;
mod layers;
mod module_cycles;
mod package_deb;
