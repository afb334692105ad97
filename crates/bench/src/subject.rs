//! What the codec benchmark times: a `Subject` processes one message both ways
//! (encrypt+decrypt or scramble+descramble), and checks itself before it is timed.
//! Also the `memcpy` ceiling: two plain copies of the message.

use anyhow::{ensure, Result};
use std::hint::black_box;

/// Something that processes a message forward and back.
pub trait Subject {
    /// The name in the report.
    fn name(&self) -> &str;
    /// One message both ways. `data` holds the message; in-place subjects transform it
    /// and restore it, the others read it and write their own buffers.
    fn round_trip(&mut self, data: &mut [u8]) -> Result<()>;
    /// Check that the subject does what it claims on `len`-byte messages (round trip
    /// gives back the message, the forward output differs from it, ...). Called before
    /// timing; an error must stop the benchmark.
    fn verify(&mut self, len: usize) -> Result<()>;
}

/// The ceiling: copy the message into a second buffer and back (two copies, as a
/// forward and a backward pass that do no work on the bytes).
pub struct MemcpySubject {
    mid: Vec<u8>,
}

impl MemcpySubject {
    pub fn new(max_len: usize) -> Self {
        MemcpySubject {
            mid: vec![0; max_len],
        }
    }

    /// The result of the last forward copy.
    pub fn forward_copy(&self, len: usize) -> &[u8] {
        &self.mid[..len]
    }
}

impl Subject for MemcpySubject {
    fn name(&self) -> &str {
        "memcpy"
    }

    fn round_trip(&mut self, data: &mut [u8]) -> Result<()> {
        let n = data.len();
        ensure!(
            n <= self.mid.len(),
            "message of {n} bytes larger than the buffers"
        );
        self.mid[..n].copy_from_slice(black_box(&*data));
        black_box(&mut self.mid);
        data.copy_from_slice(black_box(&self.mid[..n]));
        Ok(())
    }

    fn verify(&mut self, len: usize) -> Result<()> {
        let msg = crate::bytes::test_bytes(3, len);
        let mut buf = msg.clone();
        self.mid[..len].fill(0);
        self.round_trip(&mut buf)?;
        ensure!(
            self.forward_copy(len) == &msg[..],
            "memcpy: the copy differs from the message"
        );
        ensure!(buf == msg, "memcpy: the copy back differs from the message");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memcpy_copies() {
        let mut m = MemcpySubject::new(2000);
        m.verify(1280).unwrap();
        let mut big = vec![1u8; 3000];
        assert!(m.round_trip(&mut big).is_err());
    }
}
