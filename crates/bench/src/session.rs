//! nena's own cryptographic modes as codec-benchmark subjects (`nena-stream`, `nena-aead`):
//! a real session pair made by nena-proto's handshake, then per message the client's
//! `Protector::seal` and the server's `Unprotector::open`, exactly the code a connection
//! runs (for `aead` the record layer: header, AEAD seal and tag, and their checks). The
//! message stays in the subject's own record buffer: sealed there and opened back there,
//! so nothing else is timed. Handshake and the server's reading of the client's key
//! confirmation happen once, before timing.

use crate::subject::Subject;
use anyhow::{bail, ensure, Context, Result};
use nena_proto::{ClientConfig, Mode, Opened, Protector, Suite, Unprotector};

/// The two rows.
pub const NENA_ROWS: [(&str, Mode); 2] = [("nena-stream", Mode::Stream), ("nena-aead", Mode::Aead)];

/// The suite the rows run: the one this CPU prefers, as a client picks it.
pub fn suite() -> Suite {
    Suite::preferred()
}

/// A client writer and a server reader of one session in `mode`.
fn pair(mode: Mode) -> Result<(Protector, Unprotector)> {
    let entropy: [u8; nena_proto::ENTROPY_LEN] =
        std::array::from_fn(|i| (i as u8).wrapping_mul(97).wrapping_add(13));
    let cfg = ClientConfig {
        suite: suite(),
        ..ClientConfig::offering(&[mode])
    };
    let x = nena_proto::exchange(
        &cfg,
        &[mode],
        entropy,
        [0x5e; nena_proto::SERVER_ENTROPY_LEN],
    )
    .context("the in-memory handshake")?;
    let (cs, ss, mut confirm) = (x.client, x.server, x.confirm);
    let (tx, _) = cs.split();
    let (_, mut rx) = ss.split();
    // The server reads the client's key confirmation first (not timed).
    if !confirm.is_empty() {
        match rx.open(&mut confirm) {
            Ok(Opened::Data { consumed, plain })
                if consumed == confirm.len() && plain.is_empty() => {}
            other => bail!("the key confirmation was not accepted: {other:?}"),
        }
    }
    Ok((tx, rx))
}

/// One of nena's modes as a subject.
pub struct NenaSubject {
    name: &'static str,
    mode: Mode,
    tx: Protector,
    rx: Unprotector,
    /// The message in its record buffer(s): payloads at `header_len` past each record start.
    buf: Vec<u8>,
    len: usize,
}

impl NenaSubject {
    /// A subject for messages of up to `max_len` bytes.
    pub fn new(name: &'static str, mode: Mode, max_len: usize) -> Result<NenaSubject> {
        let (tx, rx) = pair(mode)?;
        let per = tx.max_payload().unwrap_or(max_len).max(1);
        let records = max_len.div_ceil(per);
        let room = records * (tx.header_len() + tx.trailer_len()) + max_len;
        Ok(NenaSubject {
            name,
            mode,
            tx,
            rx,
            buf: vec![0; room],
            len: 0,
        })
    }

    /// Places `msg` in the record buffer, as the writer's fast path does.
    fn load(&mut self, msg: &[u8]) {
        let h = self.tx.header_len();
        let step = self.tx.max_payload().unwrap_or(usize::MAX);
        let mut at = 0;
        for chunk in msg.chunks(step.min(msg.len().max(1))) {
            self.buf[at + h..at + h + chunk.len()].copy_from_slice(chunk);
            at += h + chunk.len() + self.tx.trailer_len();
        }
        self.len = msg.len();
    }

    /// The message back out of the buffer (after a round trip).
    fn unload(&self) -> Vec<u8> {
        let h = self.tx.header_len();
        let step = self.tx.max_payload().unwrap_or(usize::MAX);
        let mut out = Vec::with_capacity(self.len);
        let mut at = 0;
        while out.len() < self.len {
            let n = (self.len - out.len()).min(step);
            out.extend_from_slice(&self.buf[at + h..at + h + n]);
            at += h + n + self.tx.trailer_len();
        }
        out
    }

    /// Seals every payload of the buffer in place; returns the wire bytes' length.
    fn seal(&mut self) -> usize {
        let step = self.tx.max_payload().unwrap_or(usize::MAX);
        let (mut at, mut left) = (0, self.len);
        while left > 0 {
            let n = left.min(step);
            at += self.tx.seal(&mut self.buf[at..], n);
            left -= n;
        }
        at
    }

    /// Opens the sealed bytes back in place (plaintext where the payloads were).
    fn open(&mut self, wire: usize) -> Result<()> {
        if self.rx.is_in_place() {
            self.rx.open_in_place(&mut self.buf[..wire]);
            return Ok(());
        }
        let mut at = 0;
        while at < wire {
            match self
                .rx
                .open(&mut self.buf[at..wire])
                .map_err(anyhow::Error::from)?
            {
                Opened::Data { consumed, .. } => at += consumed,
                other => bail!("{}: unexpected {other:?}", self.name),
            }
        }
        Ok(())
    }
}

impl Subject for NenaSubject {
    fn name(&self) -> &str {
        self.name
    }

    fn round_trip(&mut self, data: &mut [u8]) -> Result<()> {
        if self.len != data.len() {
            self.load(data);
        }
        let wire = self.seal();
        self.open(wire)
    }

    fn verify(&mut self, len: usize) -> Result<()> {
        let name = self.name;
        let mut fresh = NenaSubject::new(name, self.mode, len)?;
        let msg = crate::ciphers::test_bytes(0x5e55, len);
        fresh.load(&msg);
        let wire = fresh.seal();
        let expansion = match self.mode {
            Mode::Aead => {
                len.div_ceil(nena_proto::record::MAX_PAYLOAD)
                    * (nena_proto::record::HEADER_LEN + nena_proto::AEAD_TAG_LEN)
            }
            _ => 0,
        };
        ensure!(
            wire == len + expansion,
            "{name}: {wire} bytes on the wire for {len}"
        );
        let runs: std::collections::HashSet<&[u8]> = msg.windows(16).collect();
        ensure!(
            !fresh.buf[..wire].windows(16).any(|w| runs.contains(w)),
            "{name}: plaintext visible on the wire"
        );
        fresh.open(wire)?;
        ensure!(
            fresh.unload() == msg,
            "{name}: the round trip does not give back the message"
        );
        // The subject itself, on the same message, twice (state carried across messages).
        let mut data = msg.clone();
        self.len = 0;
        self.round_trip(&mut data)?;
        self.round_trip(&mut data)?;
        ensure!(
            self.unload() == msg,
            "{name}: the subject's round trip is wrong"
        );
        Ok(())
    }
}

/// The keystream of `stream` mode alone (nena-proto's [`nena_proto::Keystream`], AES-128),
/// with AES-128-CTR as nena runs it (`nena-ctr`: aws-lc-rs for runs of
/// [`nena_proto::AWS_LC_CTR_FROM`] bytes or more) and as it ran before (`nena-ctr-rustcrypto`:
/// RustCrypto alone), so one run compares them: the sender's keystream XORs the message
/// in place, the receiver's XORs it back.
pub const CTR_ROWS: [(&str, nena_proto::AesCtrImpl); 2] = [
    ("nena-ctr", nena_proto::AesCtrImpl::Fastest),
    ("nena-ctr-rustcrypto", nena_proto::AesCtrImpl::RustCrypto),
];

/// One of [`CTR_ROWS`] as a subject.
pub struct CtrSubject {
    name: &'static str,
    tx: nena_proto::Keystream,
    rx: nena_proto::Keystream,
}

impl CtrSubject {
    pub fn new(name: &'static str, aes: nena_proto::AesCtrImpl) -> CtrSubject {
        use nena_proto::keys::{Schedule, Secrets};
        let secret = Schedule::new(
            &Secrets {
                kem: &[0x4b; 32],
                dh: &[0x44; 32],
                r_c: &[0x52; 32],
            },
            b"bench hello",
            b"bench accept",
        )
        .traffic()
        .0;
        let epoch = nena_proto::Keystream::MAX_EPOCH_LOG2;
        let ks = || nena_proto::Keystream::with_aes_ctr(Suite::Aes128, secret.clone(), epoch, aes);
        CtrSubject {
            name,
            tx: ks(),
            rx: ks(),
        }
    }
}

impl Subject for CtrSubject {
    fn name(&self) -> &str {
        self.name
    }

    fn round_trip(&mut self, data: &mut [u8]) -> Result<()> {
        self.tx.apply(data);
        self.rx.apply(data);
        Ok(())
    }

    fn verify(&mut self, len: usize) -> Result<()> {
        let msg: Vec<u8> = (0..len).map(|i| (i * 13 % 251) as u8).collect();
        let mut buf = msg.clone();
        self.tx.apply(&mut buf);
        ensure!(
            len == 0 || buf != msg,
            "{}: the keystream changed nothing",
            self.name
        );
        self.rx.apply(&mut buf);
        ensure!(buf == msg, "{}: the message did not come back", self.name);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_rows_verify_and_round_trip() {
        for (name, mode) in NENA_ROWS {
            for len in [1, 1280, 16 * 1024, 16 * 1024 + 1, 1 << 20] {
                let mut s = NenaSubject::new(name, mode, len).unwrap();
                s.verify(len).unwrap();
            }
        }
    }

    #[test]
    fn an_altered_byte_fails_the_aead_row() {
        let mut s = NenaSubject::new("nena-aead", Mode::Aead, 1280).unwrap();
        s.load(&[7u8; 1280]);
        let wire = s.seal();
        s.buf[100] ^= 1;
        assert!(s.open(wire).is_err());
    }
}
