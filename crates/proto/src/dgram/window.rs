//! The two sliding windows of a datagram receiver: the anti-replay window over counters
//! (RFC 6479's ring of bitmap blocks, WireGuard's size: 8,192 bits, of which 8,128 are the
//! window and one 64-bit block is the slack that lets the window slide a whole block at a
//! time), and the same window over data sequence numbers, which keeps the first copy of a
//! datagram sent on several paths and drops the others.
//!
//! Both are checked before they are updated: a datagram moves a window only once it has
//! authenticated, so a forged counter can neither slide the window nor mark a number seen.

/// 64-bit blocks in the ring.
const BLOCKS: usize = 128;
const BLOCK_BITS: u64 = 64;
/// Numbers this far below the highest seen are still told apart: 8,128 (WireGuard's
/// `COUNTER_WINDOW_SIZE`). At 100,000 datagrams a second that is 81 ms of reordering between
/// paths; at a call's 50 a second, 162 s.
pub const WINDOW: u64 = (BLOCKS as u64 - 1) * BLOCK_BITS;

/// Why a number was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Seen before, within the window.
    Again,
    /// More than [`WINDOW`] below the highest number seen: cannot be told apart any more.
    TooOld,
}

/// An RFC 6479 anti-replay window over 64-bit numbers.
#[derive(Clone)]
pub struct ReplayWindow {
    /// One more than the highest number accepted (0: none yet).
    next: u64,
    ring: [u64; BLOCKS],
}

impl Default for ReplayWindow {
    fn default() -> Self {
        ReplayWindow {
            next: 0,
            ring: [0; BLOCKS],
        }
    }
}

impl ReplayWindow {
    /// Whether `n` would be accepted, without changing the window. `n` must be below
    /// `u64::MAX` (the caller refuses larger counters first).
    pub fn check(&self, n: u64) -> Result<(), Seen> {
        let n1 = n + 1;
        if n1.saturating_add(WINDOW) < self.next {
            return Err(Seen::TooOld);
        }
        if n1 > self.next {
            return Ok(());
        }
        let (block, bit) = Self::at(n1);
        if self.ring[block] & bit != 0 {
            Err(Seen::Again)
        } else {
            Ok(())
        }
    }

    /// Marks `n` seen (after [`ReplayWindow::check`] passed and the datagram authenticated),
    /// sliding the window when `n` is the highest so far. Returns the check's result.
    pub fn accept(&mut self, n: u64) -> Result<(), Seen> {
        self.check(n)?;
        let n1 = n + 1;
        if n1 > self.next {
            let cur = self.next / BLOCK_BITS;
            let new = n1 / BLOCK_BITS;
            // Clear the blocks the window slides over (at most the whole ring).
            let slide = (new - cur).min(BLOCKS as u64);
            for i in 1..=slide {
                self.ring[((cur + i) % BLOCKS as u64) as usize] = 0;
            }
            self.next = n1;
        }
        let (block, bit) = Self::at(n1);
        self.ring[block] |= bit;
        Ok(())
    }

    /// The highest number accepted, if any.
    pub fn highest(&self) -> Option<u64> {
        self.next.checked_sub(1)
    }

    fn at(n1: u64) -> (usize, u64) {
        (
            ((n1 / BLOCK_BITS) % BLOCKS as u64) as usize,
            1u64 << (n1 % BLOCK_BITS),
        )
    }
}

/// The duplicate window over data sequence numbers. The wire carries only their low 32
/// bits; they are widened to 64 against the highest seen (as QUIC decodes packet numbers,
/// RFC 9000 appendix A.3), after authentication, so no one but the peer chooses them.
#[derive(Clone, Default)]
pub struct SeqWindow {
    seen: ReplayWindow,
}

impl SeqWindow {
    /// The full sequence number whose low 32 bits are `seq32`: the one nearest the next
    /// expected.
    pub fn widen(&self, seq32: u32) -> u64 {
        self.widen_bits(u64::from(seq32), 32)
    }

    /// The full sequence number whose low `bits` bits (below 64) are `low`: the one nearest
    /// the next expected (RFC 9000 appendix A.3).
    pub fn widen_bits(&self, low: u64, bits: u32) -> u64 {
        let expected = self.seen.next;
        let win: u64 = 1 << bits;
        let half = win / 2;
        let candidate = (expected & !(win - 1)) | (low & (win - 1));
        if candidate.saturating_add(half) <= expected && candidate < u64::MAX - win {
            candidate + win
        } else if candidate > expected.saturating_add(half) && candidate >= win {
            candidate - win
        } else {
            candidate
        }
    }

    /// Whether `seq` is new, marking it seen if so.
    pub fn accept(&mut self, seq: u64) -> Result<(), Seen> {
        if seq == u64::MAX {
            return Err(Seen::TooOld);
        }
        self.seen.accept(seq)
    }

    /// Whether `seq` is new, without marking it.
    pub fn check(&self, seq: u64) -> Result<(), Seen> {
        if seq == u64::MAX {
            return Err(Seen::TooOld);
        }
        self.seen.check(seq)
    }

    /// The highest sequence number accepted, if any.
    pub fn highest(&self) -> Option<u64> {
        self.seen.highest()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_then_replays_refused() {
        let mut w = ReplayWindow::default();
        for n in 0..300 {
            assert_eq!(w.accept(n), Ok(()));
        }
        for n in 0..300 {
            assert_eq!(w.check(n), Err(Seen::Again), "{n}");
            assert_eq!(w.accept(n), Err(Seen::Again));
        }
        assert_eq!(w.highest(), Some(299));
    }

    /// Out of order within the window: each accepted once; beyond the window: too old.
    #[test]
    fn out_of_order_within_the_window_and_too_old_beyond() {
        let mut w = ReplayWindow::default();
        assert_eq!(w.accept(10_000), Ok(()));
        // The oldest number still inside (the window spans the highest and the WINDOW
        // numbers below it), and the first one outside.
        let oldest = 10_000 - WINDOW;
        assert_eq!(w.check(oldest), Ok(()));
        assert_eq!(w.check(oldest - 1), Err(Seen::TooOld));
        for n in [9_999, 5_000, oldest, 9_000, 10_001, 9_998] {
            assert_eq!(w.accept(n), Ok(()), "{n}");
            assert_eq!(w.accept(n), Err(Seen::Again), "{n} again");
        }
        // Unseen numbers in between are still fine.
        assert_eq!(w.check(7_777), Ok(()));
        // A jump far ahead clears the whole ring: the old numbers are now too old, and the
        // numbers just below the new top were never seen.
        assert_eq!(w.accept(1_000_000), Ok(()));
        assert_eq!(w.check(10_001), Err(Seen::TooOld));
        for n in 1_000_000 - 200..1_000_000 {
            assert_eq!(w.check(n), Ok(()), "{n}");
        }
    }

    /// Against a plain set: the window agrees with "seen before" for every number within
    /// the window, over a long pseudo-random sequence with reordering and repeats.
    #[test]
    fn agrees_with_a_set_inside_the_window() {
        let mut w = ReplayWindow::default();
        let mut seen = std::collections::BTreeSet::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut top = 0u64;
        for _ in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Mostly forward steps, sometimes back within or beyond the window.
            let n = match x % 10 {
                0..=5 => top + x % 40,
                6..=8 => top.saturating_sub(x % 9_000),
                _ => top.saturating_sub(x % 20_000),
            };
            top = top.max(n);
            let expect = if n + 1 + WINDOW < w.next {
                Err(Seen::TooOld)
            } else if seen.contains(&n) {
                Err(Seen::Again)
            } else {
                Ok(())
            };
            assert_eq!(w.accept(n), expect, "{n}");
            if expect.is_ok() {
                seen.insert(n);
            }
        }
    }

    #[test]
    fn sequence_numbers_widen_across_the_32_bit_wrap() {
        let mut s = SeqWindow::default();
        assert_eq!(s.widen(0), 0);
        assert_eq!(s.widen(5), 5);
        // Near the wrap: the low bits 0xffff_fff0 then 3 are 2^32 - 16 and 2^32 + 3.
        assert_eq!(s.accept(0xffff_fff0), Ok(()));
        assert_eq!(s.widen(3), (1 << 32) + 3);
        assert_eq!(s.accept((1 << 32) + 3), Ok(()));
        // A late datagram from before the wrap widens below it.
        assert_eq!(s.widen(0xffff_fff5), 0xffff_fff5);
        assert_eq!(s.widen(0xffff_fff0), 0xffff_fff0);
        assert_eq!(s.accept(s.widen(0xffff_fff0)), Err(Seen::Again));
        assert_eq!(s.accept(s.widen(0xffff_fff5)), Ok(()));
        assert_eq!(s.highest(), Some((1 << 32) + 3));
    }
}
