//! Stack residue of the handshake's secrets wiped (libsodium's `sodium_stackzero`).
//!
//! The key pair of ML-KEM (from the seed), its decapsulation and encapsulation, and X25519
//! run in libraries that pass keys and seeds by value: copies are left in stack frames that
//! are gone once they return, and no `Zeroizing` reaches them. The next code to use that
//! stack finds them there, and where it moves a value with uninitialised bytes to the heap
//! (a future handed to `tokio::spawn`, say) they go with it and outlive the connection.
//! crates/transport/tests/wipe_copies.rs found a copy of the client's ML-KEM seed in a
//! spawned task's memory that way. Each handshake step that handles such secrets ends by
//! overwriting the stack below it. The step's own frame counts too: with tokio's `io-std`
//! in the build, the same test found 16 bytes of the client's entropy in tokio's runtime
//! handle, moved to the heap from stack that `ClientHandshake::new`'s frame had held (the
//! handshake as built, its kato keys and `r_c` inline); `new` now does its work in a frame
//! below its own and wipes that too (found by scanning the handle's block when it was
//! allocated, clean, and when it was freed, not; gone with the stack wiped first).

use zeroize::Zeroize;

/// How much stack below the caller is overwritten: more than the deepest of those calls
/// uses (ML-KEM-768's key generation, its largest, needs less than 16 KiB).
const WIPED: usize = 64 * 1024;

/// Overwrites [`WIPED`] bytes of the stack below the caller's frame, where the frames of
/// the calls it made lay. Not inlined, so that its array lies below the caller.
#[inline(never)]
pub(crate) fn wipe() {
    let mut area = [0u8; WIPED];
    area.zeroize();
    core::hint::black_box(&area);
}
