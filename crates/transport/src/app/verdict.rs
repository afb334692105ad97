//! The data receiver's verdict on a file transfer (PUT: the server's, GET: the client's), tagged
//! with the receiver's direction's application MAC key and bound to the transfer (op, name,
//! size, the file's trailer) and to the reply itself (docs/PROTOCOL.md, "Application MAC",
//! application protocol 3). In stream and kato an attacker who knows the replies XORs "ok"
//! into a "data corrupt" verdict; without the key it cannot make the tag of the changed reply,
//! so a client never reports an upload the server discarded as stored.
//!
//! Only an "ok" verdict is checked: any other is a failure whether or not it was altered (an
//! attacker can always make a transfer fail), and a server that stops early sends its reason
//! untagged ([`crate::app::files::SHUTTING_DOWN`]). `plain` has no key: the tag is a SHA-256 there,
//! an integrity check against accidents only ([`AppMac`]).

use crate::error::{Doing, During, Result};
use crate::stream::{SecureReader, SecureWriter};
use crate::wire::{Reply, TRAILER_LEN};
use nena_proto::appmac::AppMac;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

/// Context of a verdict's tag.
pub const VERDICT_CONTEXT: &[u8] = b"nena app v3 verdict";

/// What a verdict is about: the transfer as its receiver saw it.
#[derive(Debug, Clone, Copy)]
pub struct Transfer<'a> {
    /// 1 PUT, 2 GET (as in the file's trailer).
    pub op: u8,
    pub name: &'a str,
    pub size: u64,
    /// The file's trailer (the data sender's MAC of the file).
    pub trailer: &'a [u8; TRAILER_LEN],
}

impl<'a> Transfer<'a> {
    pub fn new(op: u8, name: &'a str, size: u64, trailer: &'a [u8; TRAILER_LEN]) -> Self {
        Transfer {
            op,
            name,
            size,
            trailer,
        }
    }
}

/// The tag of `reply` as the verdict on `t`, with the verdict sender's key (None: plain).
pub fn tag(key: Option<&[u8; 32]>, t: &Transfer<'_>, reply: &Reply) -> [u8; TRAILER_LEN] {
    AppMac::new(
        key,
        VERDICT_CONTEXT,
        &[
            &[t.op],
            t.name.as_bytes(),
            &t.size.to_be_bytes(),
            t.trailer,
            &reply.encode(),
        ],
    )
    .finish()
}

/// The verdict on the wire: the reply, then its tag.
pub fn encode(key: Option<&[u8; 32]>, t: &Transfer<'_>, reply: &Reply) -> Vec<u8> {
    let mut out = reply.encode();
    out.extend_from_slice(&tag(key, t, reply));
    out
}

/// Sends `reply` as the verdict on `t`.
pub async fn send<W: AsyncWrite + Unpin>(
    w: &mut SecureWriter<W>,
    t: &Transfer<'_>,
    reply: &Reply,
) -> std::io::Result<()> {
    let msg = encode(w.app_mac_key(), t, reply);
    w.write_msg(msg).await
}

/// Reads the peer's verdict on `t`. An "ok" verdict is returned only if its tag matches; any
/// other is returned as it came (the caller fails on it).
pub async fn receive<R: AsyncRead + Unpin>(
    r: &mut SecureReader<R>,
    t: &Transfer<'_>,
) -> Result<Reply> {
    let reply = r.read_reply().await.during(Doing::ReadingVerdict)?;
    if !reply.is_ok() {
        return Ok(reply);
    }
    let mut got = [0u8; TRAILER_LEN];
    r.read_exact(&mut got)
        .await
        .during(Doing::ReadingVerdictTag)?;
    if !nena_proto::keys::tags_equal(&tag(r.app_mac_key(), t, &reply), &got) {
        return Err(crate::error::Transfer::VerdictAltered {
            name: t.name.to_owned(),
            keyed: r.app_mac_key().is_some(),
        }
        .into());
    }
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The construction, spelled out: HMAC-SHA256 over len-prefixed context and fields.
    #[test]
    fn verdict_tag_layout_and_binding() {
        let k = [9u8; 32];
        let trailer = [0x5au8; 32];
        let t = Transfer {
            op: 1,
            name: "f",
            size: 4,
            trailer: &trailer,
        };
        let ok = Reply::ok(4);
        let mut input = vec![VERDICT_CONTEXT.len() as u8];
        input.extend_from_slice(VERDICT_CONTEXT);
        input.extend_from_slice(&[0, 1, 1, 0, 1, b'f', 0, 8]);
        input.extend_from_slice(&4u64.to_be_bytes());
        input.extend_from_slice(&[0, 32]);
        input.extend_from_slice(&trailer);
        input.extend_from_slice(&[0, 11]);
        input.extend_from_slice(&ok.encode());
        assert_eq!(
            tag(Some(&k), &t, &ok),
            nena_proto::keys::hmac_sha256(&k, &input)
        );
        let base = tag(Some(&k), &t, &ok);
        let other_trailer = [0x5bu8; 32];
        for changed in [
            tag(Some(&[8u8; 32]), &t, &ok),
            tag(Some(&k), &Transfer { op: 2, ..t }, &ok),
            tag(Some(&k), &Transfer { name: "g", ..t }, &ok),
            tag(Some(&k), &Transfer { size: 5, ..t }, &ok),
            tag(
                Some(&k),
                &Transfer {
                    trailer: &other_trailer,
                    ..t
                },
                &ok,
            ),
            tag(Some(&k), &t, &Reply::ok(5)),
            tag(None, &t, &ok),
        ] {
            assert_ne!(changed, base);
        }
        let wire = encode(Some(&k), &t, &ok);
        assert_eq!(&wire[..11], &ok.encode()[..]);
        assert_eq!(&wire[11..], &base[..]);
    }
}
