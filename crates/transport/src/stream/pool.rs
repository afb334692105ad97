//! Buffers of sessions that have nothing buffered go back to a small per-thread pool, and a
//! session takes one again when it has bytes to hold. An idle session then keeps no buffer:
//! its memory is its socket and its task, whatever the allocator does with freed memory
//! (glibc's `calloc` clears reused memory of the main arena, which made the zero-filled
//! 64 KiB buffers of idle proxy sessions resident). A busy session takes and gives its
//! buffer at every wait for its socket: from the pool that costs a push and a pop, and
//! nothing is cleared (a taken buffer's old bytes are never read: readers and writers only
//! look at what they wrote into it since).

use nena_codec::AlignedBuf;
use std::cell::RefCell;

/// Bytes of buffers one thread keeps for reuse (the rest are freed).
const KEEP_BYTES: usize = 4 << 20;

thread_local! {
    static POOL: RefCell<Vec<AlignedBuf>> = const { RefCell::new(Vec::new()) };
}

/// Makes `buf` a buffer of `len` bytes if it was given back (empty); else leaves it.
pub(super) fn hold(buf: &mut AlignedBuf, len: usize) {
    if buf.is_empty() {
        *buf = take(len);
    }
}

/// Gives `buf` back to the pool, leaving it empty.
pub(super) fn release(buf: &mut AlignedBuf) {
    give(std::mem::take(buf));
}

/// A buffer of `len` bytes: one the pool keeps, or a new one (zero-filled).
fn take(len: usize) -> AlignedBuf {
    POOL.with_borrow_mut(|pool| {
        pool.iter()
            .rposition(|b| b.len() == len)
            .map(|i| pool.swap_remove(i))
    })
    .unwrap_or_else(|| AlignedBuf::new(len))
}

/// Gives `buf` back: kept while the thread's pool holds less than [`KEEP_BYTES`].
fn give(buf: AlignedBuf) {
    if buf.is_empty() {
        return;
    }
    // During thread teardown the pool may be gone: the buffer is then simply freed.
    let _ = POOL.try_with(|pool| {
        if let Ok(mut pool) = pool.try_borrow_mut() {
            let held: usize = pool.iter().map(|b| b.len()).sum();
            if held + buf.len() <= KEEP_BYTES {
                pool.push(buf);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_by_size_and_the_pool_is_bounded() {
        let a = take(1000);
        let at = a.as_ptr();
        give(a);
        assert_eq!(take(2000).len(), 2000, "another size is a new buffer");
        let b = take(1000);
        assert_eq!(b.as_ptr(), at, "the given buffer came back");
        let mut c = AlignedBuf::default();
        hold(&mut c, 3000);
        assert_eq!(c.len(), 3000, "an empty buffer is filled");
        let at = c.as_ptr();
        hold(&mut c, 3000);
        assert_eq!(c.as_ptr(), at, "a held buffer is kept");
        release(&mut c);
        assert!(c.is_empty());
        give(AlignedBuf::default()); // nothing to keep
                                     // Past the bound, buffers are freed rather than kept.
        let n = KEEP_BYTES / 65536 + 4;
        let bufs: Vec<_> = (0..n).map(|_| take(65536)).collect();
        bufs.into_iter().for_each(give);
        let held = POOL.with_borrow(|p| p.iter().map(|b| b.len()).sum::<usize>());
        assert!(held <= KEEP_BYTES, "{held}");
        assert!(held >= KEEP_BYTES - 65536, "{held}");
    }
}
