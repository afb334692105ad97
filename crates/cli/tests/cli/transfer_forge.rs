//! The smart attacker on the untrusted path (issue 19, item 4): `nena_bpf::attack::forge`, a TC
//! program on the router's untrusted interface, XORs a chosen change into an upload *and*
//! the matching change into its trailer. It knows the file (so the SHA-256 of the original and
//! of its forgery), and it is told where the file lies in the client's session stream (the
//! data sequence number of its first byte, read here from the server's MPTCP socket), which a
//! real attacker would work out from the protocol's layout. Against `stream` (a keystream) the
//! change is XORed as it is; against `kato` each changed byte is spread over the 65 output
//! bytes it influences (`forge::kato_pattern`), no key needed.
//!
//! Only bytes that cross the untrusted link can be changed: an attempt in which part of the
//! pattern went by the trusted link does not count (the program reports which pattern bytes it
//! altered) and is repeated with a new name.
//!
//! Today's build refuses the forgery: that is checked over the in-memory network,
//! crates/transport/tests/net_file_forge.rs::a_forged_file_and_trailer_are_refused. What
//! stays here is the demonstration on the old format, run by hand against an old build.

use crate::harness::*;
use nena_bpf::attack::forge::{self, ForgeRecord};
use nena_lab::Host;
use std::collections::HashSet;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::process::{Output, Stdio};
use std::time::Duration;

const PORT: u16 = 7000;
/// The forger turns the file's last bytes into these.
const FORGED_TAIL: &[u8; 8] = b"FORGED!!";
/// Bytes of the hello and of the client's confirm in each mode, as the client offers one mode
/// alone (docs/PROTOCOL.md): a hello with a crypto offer is 9 + 1 + 2 + 66, with kato's keys
/// 9 + 1 + 2 + 16; the confirm (crypto modes only) 41.
fn handshake_len(mode: &str) -> u64 {
    match mode {
        "stream" | "aead" => 78 + 41,
        "kato" => 28,
        _ => panic!("no layout for {mode}"),
    }
}

/// Offset of the file's first byte in the client's session stream: the handshake, then the
/// PUT request (magic 4 | op 1 | name_len 2 | name | size 8).
fn data_offset(mode: &str, name: &str) -> u64 {
    handshake_len(mode) + 4 + 1 + 2 + name.len() as u64 + 8
}

/// The inodes of the sockets process `pid` holds, with their fd numbers.
fn sockets(pid: u32) -> Vec<(i32, u64)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let fd: i32 = e.file_name().to_str()?.parse().ok()?;
        let link = std::fs::read_link(e.path()).ok()?;
        let ino = link
            .to_str()?
            .strip_prefix("socket:[")?
            .strip_suffix(']')?
            .parse()
            .ok()?;
        Some((fd, ino))
    })
    .collect()
}

/// The data sequence number of the first byte the client sent on a new MPTCP connection of
/// process `pid` (a socket not in `known`): `rcv_nxt - bytes_received` of the server's
/// socket, read through a copy of its descriptor (pidfd_getfd) and taken when two reads agree.
fn c2s_base(pid: u32, known: &HashSet<u64>) -> Option<u64> {
    // SAFETY: plain syscalls; every returned descriptor is owned right away.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) };
    if pidfd < 0 {
        return None;
    }
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
    use std::os::fd::AsRawFd;
    for (fd, ino) in sockets(pid) {
        if known.contains(&ino) {
            continue;
        }
        let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
        if got < 0 {
            continue;
        }
        let sock = unsafe { OwnedFd::from_raw_fd(got as i32) };
        let base = || {
            let i = nena_mptcp::info(sock.as_fd()).ok()?;
            let b = i.bytes_received.filter(|&b| b > 0)?;
            Some(i.rcv_nxt.wrapping_sub(b))
        };
        if let (Some(a), Some(b)) = (base(), base()) {
            if a == b {
                return Some(a);
            }
        }
    }
    None
}

/// One upload under attack: the forger, told the file's position once the connection exists,
/// turns the last 8 bytes into [`FORGED_TAIL`] and the SHA-256 trailer into the forgery's
/// (the plaintext difference `old ^ new` over data tail and trailer, spread for kato).
fn attack(
    lab: &nena_lab::Lab,
    server_pid: u32,
    file: &std::path::Path,
    mode: &str,
    name: &str,
) -> (Output, ForgeRecord) {
    let orig = std::fs::read(file).unwrap();
    let mut forged = orig.clone();
    let n = forged.len();
    forged[n - 8..].copy_from_slice(FORGED_TAIL);
    let mut delta: Vec<u8> = orig[n - 8..]
        .iter()
        .zip(FORGED_TAIL)
        .map(|(a, b)| a ^ b)
        .collect();
    let (s_old, s_new) = (
        nena_proto::keys::sha256(&[&orig]),
        nena_proto::keys::sha256(&[&forged]),
    );
    delta.extend(s_old.iter().zip(&s_new).map(|(a, b)| a ^ b));
    let changed = delta.len();
    let mut pattern = if mode == "kato" {
        forge::kato_pattern(&delta)
    } else {
        delta
    };
    // The client's stream ends with the trailer: kato's spill past it would fall on bytes
    // that are never sent.
    pattern.truncate(changed);
    let at = data_offset(mode, name) + n as u64 - 8;

    lab.run_in(Host::Router, || forge::attach("untrusted", true, PORT))
        .unwrap()
        .unwrap();
    let known: HashSet<u64> = sockets(server_pid).into_iter().map(|(_, i)| i).collect();
    let to = server(lab, PORT);
    let file_s = file.display().to_string();
    let mut args = vec![
        "send", &file_s, "--name", name, "--to", &to, "--mode", mode, "--json",
    ];
    args.extend_from_slice(&PATHS);
    let mut child = lab
        .command(Host::Client, NENA, &args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The connection's first data sequence number, as soon as the server has the hello.
    // (Every millisecond: the forge must be armed before the file's tail passes.)
    let base = nena_testkit::wait_for_every(
        &format!("{mode}: the server's connection"),
        Duration::from_secs(10),
        Duration::from_millis(1),
        || {
            let b = c2s_base(server_pid, &known);
            assert!(
                b.is_some() || child.try_wait().unwrap().is_none(),
                "{mode}: the client ended before the server's connection was seen"
            );
            b
        },
    );
    lab.run_in(Host::Router, || {
        forge::arm("untrusted", true, base.wrapping_add(at), &pattern)
    })
    .unwrap()
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let rec = lab
        .run_in(Host::Router, || forge::remove("untrusted", true))
        .unwrap()
        .unwrap()
        .expect("the forge program was attached");
    (out, rec)
}

/// Attacks uploads in `mode` until one attempt had every pattern byte cross the untrusted
/// link (at most 8 attempts); returns that attempt's client output and the stored name.
fn complete_attack(
    lab: &nena_lab::Lab,
    srv: &TempDir,
    server_pid: u32,
    file: &std::path::Path,
    mode: &str,
) -> (Output, String) {
    for attempt in 0..8 {
        let name = format!("f-{mode}-{attempt}");
        let (out, rec) = attack(lab, server_pid, file, mode, &name);
        eprintln!(
            "{mode} attempt {attempt}: {rec:?}; client {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        assert!(rec.armed && rec.mapped > 0, "{mode}: {rec:?}");
        if rec.complete() {
            return (out, name);
        }
        // Part of the pattern went by the trusted link: not this attacker's bytes.
        let _ = std::fs::remove_file(srv.join(&name));
    }
    panic!("{mode}: in 8 attempts the forged bytes never all crossed the untrusted link");
}

/// The forger's lab: wire-sized segments, the untrusted link ten times faster than the
/// trusted one (so that the scheduler puts most data, and mostly the file's end, there).
fn forge_lab() -> nena_lab::LabGuard {
    lab_with(|c| {
        c.offload = false;
        c.trusted_rate = Some(nena_lab::Rate::mbit(5));
        c.untrusted_rate = Some(nena_lab::Rate::mbit(50));
    })
}

/// The uploads the forger attacked completely, per mode: (mode, client output, name).
/// One attacked upload: its mode, the client's output, and what the server stored under the
/// name (empty: nothing).
type Outcome = (String, Output, Vec<u8>);

fn forge_uploads(modes: &[&str]) -> (Vec<u8>, Vec<Outcome>) {
    let lab = forge_lab();
    let srv = TempDir::new("forge-srv");
    let cli = TempDir::new("forge-cli");
    let s = serve(&lab, PORT, srv.path(), &["--mode", "stream,kato,aead"]);
    let file = cli.join("f.bin");
    let orig = random(4 << 20, 19);
    std::fs::write(&file, &orig).unwrap();
    let mut out = Vec::new();
    for &mode in modes {
        let (o, name) = complete_attack(&lab, &srv, s.pid(), &file, mode);
        let stored = std::fs::read(srv.join(&name)).unwrap_or_default();
        // No temporary file is left behind either way.
        let left: Vec<_> = std::fs::read_dir(srv.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".part"))
            .collect();
        assert!(left.is_empty(), "{mode}: temporary files left: {left:?}");
        out.push((mode.to_string(), o, stored));
    }
    let mut forged = orig.clone();
    let n = forged.len();
    forged[n - 8..].copy_from_slice(FORGED_TAIL);
    (forged, out)
}

/// The demonstration on the old format (an unkeyed SHA-256 trailer): run against a build of
/// the commit before the keyed trailer, it asserts that the forgery IS stored under the
/// client's name. Not run by default (today's build refuses it); how it was run and what it
/// printed: docs/THREAT-MODEL.md, "Altered files".
#[test]
#[ignore]
fn old_format_stores_the_forgery() {
    let (forged, outcomes) = forge_uploads(&["stream", "kato"]);
    for (mode, out, stored) in outcomes {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{mode}: {err}");
        assert!(
            stored == forged,
            "{mode}: the stored file is not the forgery"
        );
        eprintln!("{mode}: the forgery was stored under the client's name");
    }
}
