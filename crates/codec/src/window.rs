//! The scrambling window's size and the direction of a transformation: what the three
//! implementations and the crate's API share (a leaf).

/// Size of the scrambling window in bytes.
pub const WINDOW: usize = 64;

/// Direction of the transformation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    Scramble,
    Descramble,
}
