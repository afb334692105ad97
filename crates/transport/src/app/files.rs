//! File transfer over a session: both ends of PUT (`nena send`) and GET (`nena get`).
//!
//! The data is followed by a 32-byte trailer: the session's application MAC
//! ([`nena_proto::appmac`], keyed per session and direction in aead, stream, kato and
//! kato-mpc) over the op, the name, the size and the bytes; in plain mode, which has no key,
//! a SHA-256 of the same (integrity against accidents, no authenticity). The data receiver
//! always writes into a hidden temporary file next to the destination and moves it into place
//! only after the trailer matched, so a partial or forged file never looks complete; on any
//! error the temporary file is removed. Without `overwrite` the final
//! step is a hard link, which fails atomically if the name exists (no race between check and
//! rename); with it, a rename.
//!
//! Before answering "ok" to a PUT the server checks the announced size against
//! `--max-file-size` and the free space of DIR (`statvfs`, minus what concurrent uploads were
//! promised; see [`crate::ops::access`]), so a client cannot make it accept more than fits.

use crate::app::names::{check_name, FileName};
use crate::app::verdict::{self, Transfer};
use crate::error::{Doing, During, Error, Result, Transfer as Failed};
use crate::ops::access::{ErrorReply, SpaceLedger};
use crate::stream::copy::{copy_in_bulk, copy_out};
use crate::stream::{SecureReader, SecureWriter};
use crate::wire::{AccessToken, Reply, Request, Status, TRAILER_LEN};
use nena_proto::appmac::AppMac;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Size of the data buffer of one transfer direction.
pub const BUF_LEN: usize = 256 * 1024;

/// Called with the number of new payload bytes as they go (for progress bars).
pub type Progress<'a> = &'a (dyn Fn(u64) + Sync);

/// A hidden temporary file that is removed on drop unless [`TempFile::commit`] succeeded.
pub struct TempFile {
    path: PathBuf,
    armed: bool,
}

impl TempFile {
    /// Create a new, unique, hidden file in `dir`.
    pub async fn create(dir: &Path) -> Result<(TempFile, tokio::fs::File)> {
        for _ in 0..16 {
            let mut r = [0u8; 8];
            getrandom::fill(&mut r)?;
            let hex: String = r.iter().map(|b| format!("{b:02x}")).collect();
            let path = dir.join(format!(".nena-{hex}.part"));
            match tokio::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .await
            {
                Ok(f) => return Ok((TempFile { path, armed: true }, f)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e).during(Doing::CreatingFile {
                        dir: dir.to_path_buf(),
                    })
                }
            }
        }
        Err(Failed::NoTempName {
            dir: dir.to_path_buf(),
        }
        .into())
    }

    /// Move the finished file to `dest`. Without `overwrite`, fails with
    /// [`std::io::ErrorKind::AlreadyExists`] if `dest` exists.
    pub async fn commit(mut self, dest: &Path, overwrite: bool) -> std::io::Result<()> {
        if overwrite {
            tokio::fs::rename(&self.path, dest).await?;
        } else {
            tokio::fs::hard_link(&self.path, dest).await?;
            let _ = tokio::fs::remove_file(&self.path).await;
        }
        self.armed = false;
        Ok(())
    }
}

/// Remove the partial files (`.nena-*.part`, [`TempFile`]) in `dir` not modified for
/// `older_than`: left by a server that was killed (a live upload writes to its file all the
/// time). Returns how many were removed.
pub fn remove_stale_parts(dir: &Path, older_than: std::time::Duration) -> std::io::Result<usize> {
    let now = std::time::SystemTime::now();
    let mut removed = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with(".nena-") && name.ends_with(".part")) {
            continue;
        }
        let meta = entry.metadata()?;
        let age = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .unwrap_or_default();
        if meta.is_file() && age > older_than {
            std::fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if self.armed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// What a server that stops tells a client whose upload it aborts (with
/// [`Status::ShuttingDown`]).
pub const SHUTTING_DOWN: &str = "the upload was discarded; send it again later";

/// Op byte of a transfer in its trailer's input.
const OP_PUT: u8 = 1;
const OP_GET: u8 = 2;

/// Why a trailer did not match, for both ends' messages: keyed or not.
fn mismatch(keyed: bool) -> &'static str {
    crate::error::cause::mismatch(keyed)
}

/// What [`recv_data`] returns: whether the trailer matched, the SHA-256 of the received bytes
/// (for the report) and the trailer as received (for the verdict, [`crate::app::verdict`]).
struct Received {
    matched: bool,
    digest: [u8; 32],
    trailer: [u8; TRAILER_LEN],
}

/// Receive `size` bytes and the trailer (`mac`'s tag) into `file`.
async fn recv_data<R: AsyncRead + Unpin>(
    r: &mut SecureReader<R>,
    file: &mut tokio::fs::File,
    size: u64,
    progress: Option<Progress<'_>>,
    mut mac: AppMac,
) -> Result<Received> {
    let mut hasher = Sha256::new();
    let got = copy_out(r, file, size, |chunk| {
        hasher.update(chunk);
        mac.update(chunk);
        if let Some(p) = progress {
            p(chunk.len() as u64);
        }
    })
    .await
    .during(Doing::ReceivingFileData)?;
    if got < size {
        return Err(Failed::Truncated { got, size }.into());
    }
    let mut trailer = [0u8; TRAILER_LEN];
    r.read_exact(&mut trailer)
        .await
        .during(Doing::ReceivingTrailer)?;
    file.flush().await?;
    file.sync_all().await.during(Doing::SyncingFile)?;
    let digest: [u8; 32] = hasher.finalize().into();
    Ok(Received {
        matched: mac.verify(&trailer),
        digest,
        trailer,
    })
}

/// Send `size` bytes of `file` and the trailer (`mac`'s tag). Returns the SHA-256 of the
/// bytes (for the report) and the trailer (for the verdict).
async fn send_data<W: AsyncWrite + Unpin>(
    w: &mut SecureWriter<W>,
    file: &mut tokio::fs::File,
    size: u64,
    progress: Option<Progress<'_>>,
    mut mac: AppMac,
) -> Result<([u8; 32], [u8; TRAILER_LEN])> {
    let mut hasher = Sha256::new();
    // A `tokio::fs::File` read goes to the blocking pool and is pending until it is back,
    // and a pending source made the writer send what it held (right for a socket that has
    // nothing more yet, wrong for a file): `aead`, which asks for one 16 KiB record at a
    // time, sent every record in a socket write of its own after a pool round trip, and the
    // kernel's scheduler kept them all on the first subflow. Now the file is read 256 KiB at
    // a time, and while a read is pending the writer sends only when it holds half its
    // buffer or more.
    let mut file = tokio::io::BufReader::with_capacity(crate::stream::BULK_BUF, file);
    let sent = copy_in_bulk(&mut file, w, size, |chunk| {
        hasher.update(chunk);
        mac.update(chunk);
        if let Some(p) = progress {
            p(chunk.len() as u64);
        }
    })
    .await
    .during(Doing::SendingFileData)?;
    if sent < size {
        return Err(Failed::Shrank { sent, size }.into());
    }
    let digest: [u8; 32] = hasher.finalize().into();
    let trailer = mac.finish();
    w.write_all(&trailer).await.during(Doing::SendingTrailer)?;
    w.flush().await.during(Doing::SendingTrailer)?;
    Ok((digest, trailer))
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Result of a finished, verified transfer.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FileOutcome {
    pub name: String,
    pub bytes: u64,
    pub sha256: String,
}

/// What `nena send` stores `path` as: `name`, else the file's own name, checked here once
/// (as the server checks it: [`check_name`]) before any connection; `path` must be a
/// regular file. Each refusal is one line, bad input.
pub fn send_name(path: &Path, name: Option<&str>) -> Result<FileName> {
    let name = match name {
        Some(n) => n.to_owned(),
        None => path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| Failed::NoFileName {
                path: path.to_path_buf(),
            })?,
    };
    let checked = FileName::new(&name).map_err(|why| Failed::BadName {
        name: name.clone(),
        why,
    })?;
    let path = path.to_path_buf();
    match std::fs::metadata(&path) {
        Ok(m) if m.is_file() => Ok(checked),
        Ok(_) => Err(Failed::NotRegular { path }.into()),
        Err(e) => Err(Failed::Unreadable {
            path,
            why: e.to_string(),
        }
        .into()),
    }
}

/// What `nena get` asks for and where it writes it: `name`, checked here once (as the
/// server checks it: [`check_name`]) before any connection; into `out` (a directory: the
/// file `name` in it), else `./NAME`.
pub fn get_dest(name: &str, out: Option<&Path>) -> Result<(FileName, PathBuf)> {
    let checked = FileName::new(name).map_err(|why| Failed::BadName {
        name: name.to_owned(),
        why,
    })?;
    let dest = match out {
        Some(p) if p.is_dir() => p.join(name),
        Some(p) => p.to_path_buf(),
        None => PathBuf::from(name),
    };
    Ok((checked, dest))
}

/// Client side of PUT: send `path` as `name`. Ok only when the server verified and stored it.
pub async fn client_put<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    r: &mut SecureReader<R>,
    w: &mut SecureWriter<W>,
    path: &Path,
    name: &FileName,
    token: Option<&AccessToken>,
    progress: Option<Progress<'_>>,
    on_size: impl FnOnce(u64),
) -> Result<FileOutcome> {
    let name = name.as_str();
    let mut file = tokio::fs::File::open(path)
        .await
        .during(Doing::OpeningFile {
            path: path.to_path_buf(),
        })?;
    let meta = file.metadata().await?;
    if !meta.is_file() {
        return Err(Failed::NotRegular {
            path: path.to_path_buf(),
        }
        .into());
    }
    let size = meta.len();
    on_size(size);
    w.write_msg(
        Request::Put {
            name: name.to_owned(),
            size,
        }
        .encode_with(token),
    )
    .await
    .during(Doing::SendingRequest)?;
    let reply = r.read_reply().await.during(Doing::AwaitingServerAnswer)?;
    if !reply.is_ok() {
        return Err(refused(name, reply));
    }
    let mac = AppMac::file(w.app_mac_key(), OP_PUT, name, size);
    // While the data goes out, the server says nothing, unless it stops the upload (it is
    // shutting down, or the stream failed on its side): then its reply ends the upload at
    // once. Waiting for it only peeks (nothing is consumed), and `biased` lets a finished
    // send win: the verdict cannot come before the last byte has left.
    let sent = tokio::select! {
        biased;
        d = send_data(w, &mut file, size, progress, mac) => d,
        early = peek(r) => {
            if !early.during(Doing::AwaitingServerDuringUpload)? {
                return Err(Failed::ClosedDuringUpload { name: name.to_owned() }.into());
            }
            let reply = r.read_reply().await.during(Doing::ReadingServerAnswer)?;
            return Err(stopped_by_server(name, &reply));
        }
    };
    let (digest, trailer) = match sent {
        Ok(d) => d,
        Err(e) => {
            // The server may have said why before it closed.
            if let Ok(Ok(reply)) = tokio::time::timeout(WHY_FAILED, r.read_reply()).await {
                if !reply.is_ok() {
                    return Err(stopped_by_server(name, &reply));
                }
            }
            return Err(e);
        }
    };
    let about = Transfer::new(OP_PUT, name, size, &trailer);
    let fin = verdict::receive(r, &about)
        .await
        .during(Doing::AwaitingServerVerification)?;
    if !fin.is_ok() {
        return Err(Failed::NotStored {
            name: name.to_owned(),
            status: fin.status,
            msg: fin.msg,
        }
        .into());
    }
    Ok(FileOutcome {
        name: name.to_owned(),
        bytes: size,
        sha256: hex(&digest),
    })
}

/// The server's refusal of the request for `name`.
fn refused(name: &str, reply: Reply) -> Error {
    Failed::ServerRefused {
        name: name.to_owned(),
        status: reply.status,
        msg: reply.msg,
    }
    .into()
}

/// The error of an upload the server ended with `reply` before it was complete.
fn stopped_by_server(name: &str, reply: &Reply) -> Error {
    Failed::ServerStopped {
        name: name.to_owned(),
        status: reply.status,
        msg: reply.msg.clone(),
    }
    .into()
}

/// How long a client whose upload failed waits for the server's reason.
const WHY_FAILED: std::time::Duration = std::time::Duration::from_secs(1);

/// Completes when `r` has bytes to read (true) or its stream ended (false), consuming none.
async fn peek<R: AsyncRead + Unpin>(r: &mut SecureReader<R>) -> std::io::Result<bool> {
    use tokio::io::AsyncBufReadExt;
    r.fill_buf().await.map(|b| !b.is_empty())
}

/// Client side of GET: fetch `name` into `dest`. Ok only when the digest matched and the
/// file is in place.
#[allow(clippy::too_many_arguments)]
pub async fn client_get<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    r: &mut SecureReader<R>,
    w: &mut SecureWriter<W>,
    name: &FileName,
    dest: &Path,
    overwrite: bool,
    token: Option<&AccessToken>,
    progress: Option<Progress<'_>>,
    on_size: impl FnOnce(u64),
) -> Result<FileOutcome> {
    let name = name.as_str();
    if !overwrite && tokio::fs::symlink_metadata(dest).await.is_ok() {
        return Err(Failed::Exists {
            path: dest.to_path_buf(),
        }
        .into());
    }
    let dir = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    w.write_msg(
        Request::Get {
            name: name.to_owned(),
        }
        .encode_with(token),
    )
    .await
    .during(Doing::SendingRequest)?;
    let reply = r.read_reply().await.during(Doing::AwaitingServerAnswer)?;
    if !reply.is_ok() {
        return Err(refused(name, reply));
    }
    let size = reply.size;
    on_size(size);
    let (tmp, mut file) = TempFile::create(&dir).await?;
    let mac = AppMac::file(r.app_mac_key(), OP_GET, name, size);
    let keyed = mac.is_keyed();
    let got = recv_data(r, &mut file, size, progress, mac).await?;
    drop(file);
    let about = Transfer::new(OP_GET, name, size, &got.trailer);
    if !got.matched {
        let _ = verdict::send(w, &about, &Reply::err(Status::Corrupt, mismatch(keyed))).await;
        return Err(Failed::Mismatch {
            name: name.to_owned(),
            keyed,
        }
        .into());
    }
    let digest = got.digest;
    tmp.commit(dest, overwrite)
        .await
        .during(Doing::MovingFileTo {
            path: dest.to_path_buf(),
        })?;
    let _ = verdict::send(w, &about, &Reply::ok(size)).await;
    Ok(FileOutcome {
        name: name.to_owned(),
        bytes: size,
        sha256: hex(&digest),
    })
}

/// What the server does with files.
#[derive(Debug, Clone)]
pub struct FileServerConfig {
    /// The directory files are stored in and served from.
    pub dir: PathBuf,
    /// Replace existing files on PUT.
    pub overwrite: bool,
    /// Refuse a PUT announcing more than this many bytes.
    pub max_file_size: Option<u64>,
    /// Space promised to the uploads in progress (shared by all sessions).
    pub space: Arc<SpaceLedger>,
    /// Fires when the server stops after its grace period: an upload still receiving is
    /// told `server shutting down` and its partial file removed.
    pub stop: crate::ops::stop::StopSignal,
}

impl FileServerConfig {
    /// Files in `dir`, no overwriting, no size limit but the free space.
    pub fn new(dir: impl Into<PathBuf>) -> FileServerConfig {
        FileServerConfig {
            dir: dir.into(),
            overwrite: false,
            max_file_size: None,
            space: Arc::default(),
            stop: crate::ops::stop::StopSignal::never(),
        }
    }
}

/// Bytes an unprivileged writer may still store in the file system of `dir` (`statvfs`:
/// `f_bavail * f_frsize`).
pub fn free_space(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: statvfs writes one struct through the pointer; the path is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// Server side of PUT. Returns a one-line summary for the log.
pub async fn server_put<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    r: &mut SecureReader<R>,
    w: &mut SecureWriter<W>,
    cfg: &FileServerConfig,
    name: &str,
    size: u64,
) -> Result<String> {
    if let Err(e) = check_name(name) {
        w.write_msg(Reply::err(Status::BadName, e.to_string()).encode())
            .await?;
        return Err(
            ErrorReply::new(Status::BadName, format!("refused file name {name:?}: {e}")).into(),
        );
    }
    let dest = cfg.dir.join(name);
    if !cfg.overwrite && tokio::fs::symlink_metadata(&dest).await.is_ok() {
        w.write_msg(
            Reply::err(
                Status::Exists,
                format!("{name} exists and the server does not overwrite"),
            )
            .encode(),
        )
        .await?;
        return Err(ErrorReply::new(Status::Exists, format!("refused {name:?}: exists")).into());
    }
    // The size: within the limit, and it fits beside the uploads in progress. The
    // reservation lasts until this function returns.
    let dir = cfg.dir.clone();
    let free = match tokio::task::spawn_blocking(move || free_space(&dir)).await {
        Ok(Ok(f)) => f,
        Ok(Err(e)) => {
            w.write_msg(Reply::err(Status::ServerError, "cannot read the free space").encode())
                .await?;
            return Err(e).during(Doing::ReadingFreeSpace);
        }
        Err(e) => return Err(Error::from(e).during(Doing::CountingFreeSpace)),
    };
    let _reservation = match cfg.space.reserve(size, cfg.max_file_size, free) {
        Ok(r) => r,
        Err(reply) => {
            w.write_msg(reply.encode()).await?;
            let log = format!("refused {name:?}: {}: {}", reply.status, reply.msg);
            return Err(ErrorReply::new(reply.status, log).into());
        }
    };
    let (tmp, mut file) = match TempFile::create(&cfg.dir).await {
        Ok(t) => t,
        Err(e) => {
            w.write_msg(Reply::err(Status::ServerError, format!("{e:#}")).encode())
                .await?;
            return Err(e);
        }
    };
    w.write_msg(Reply::ok(0).encode()).await?;
    let mac = AppMac::file(r.app_mac_key(), OP_PUT, name, size);
    let keyed = mac.is_keyed();
    let received = tokio::select! {
        x = recv_data(r, &mut file, size, None, mac) => x,
        () = cfg.stop.stopped() => {
            let _ = w
                .write_msg(Reply::err(Status::ShuttingDown, SHUTTING_DOWN).encode())
                .await;
            let log = format!("{name:?}: server shutting down: {SHUTTING_DOWN}");
            return Err(ErrorReply::new(Status::ShuttingDown, log).into());
        }
    };
    let got = match received {
        Ok(x) => x,
        Err(e) => {
            // The protected stream failed (an integrity failure, a bad confirmation): the
            // way back still works, so tell the client what happened to its data.
            if let Error::Session(se) = e.kind() {
                let _ = w
                    .write_msg(Reply::err(Status::Corrupt, se.to_string()).encode())
                    .await;
            }
            return Err(e);
        }
    };
    drop(file);
    let about = Transfer::new(OP_PUT, name, size, &got.trailer);
    if !got.matched {
        let why = mismatch(keyed);
        let reply = Reply::err(Status::Corrupt, format!("{why}, file discarded"));
        verdict::send(w, &about, &reply).await?;
        return Err(ErrorReply::new(Status::Corrupt, format!("{name:?}: {why}, discarded")).into());
    }
    let check = if keyed { "MAC" } else { "SHA-256" };
    match tmp.commit(&dest, cfg.overwrite).await {
        Ok(()) => {
            verdict::send(w, &about, &Reply::ok(size)).await?;
            Ok(format!("stored {name} ({size} bytes, {check} verified)"))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let reply = Reply::err(Status::Exists, format!("{name} appeared meanwhile"));
            verdict::send(w, &about, &reply).await?;
            Err(Failed::CreatedMeanwhile {
                name: name.to_string(),
            }
            .into())
        }
        Err(e) => {
            verdict::send(w, &about, &Reply::err(Status::ServerError, e.to_string())).await?;
            Err(e).during(Doing::MovingFileIntoPlace)
        }
    }
}

/// Server side of GET. Returns a one-line summary for the log.
pub async fn server_get<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    r: &mut SecureReader<R>,
    w: &mut SecureWriter<W>,
    cfg: &FileServerConfig,
    name: &str,
) -> Result<String> {
    if let Err(e) = check_name(name) {
        w.write_msg(Reply::err(Status::BadName, e.to_string()).encode())
            .await?;
        return Err(
            ErrorReply::new(Status::BadName, format!("refused file name {name:?}: {e}")).into(),
        );
    }
    let path = cfg.dir.join(name);
    let opened = async {
        let f = tokio::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .await?;
        let m = f.metadata().await?;
        if !m.is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "not a regular file",
            ));
        }
        Ok((f, m.len()))
    }
    .await;
    let (mut file, size) = match opened {
        Ok(x) => x,
        Err(e) => {
            let status = if e.kind() == std::io::ErrorKind::NotFound {
                Status::NotFound
            } else {
                Status::Refused
            };
            w.write_msg(Reply::err(status, format!("{name}: {e}")).encode())
                .await?;
            return Err(ErrorReply::new(status, format!("GET {name:?}: {e}")).into());
        }
    };
    w.write_msg(Reply::ok(size).encode()).await?;
    let mac = AppMac::file(w.app_mac_key(), OP_GET, name, size);
    let (_, trailer) = send_data(w, &mut file, size, None, mac).await?;
    let about = Transfer::new(OP_GET, name, size, &trailer);
    let fin = verdict::receive(r, &about)
        .await
        .during(Doing::AwaitingClientVerification)?;
    if !fin.is_ok() {
        return Err(Failed::ClientReports {
            name: name.to_string(),
            status: fin.status,
            msg: fin.msg,
        }
        .into());
    }
    Ok(format!(
        "served {name} ({size} bytes, verified by the client)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    #[test]
    fn stale_partial_files_go_and_fresh_ones_and_other_files_stay() {
        let dir = tempfile::tempdir().unwrap();
        let old = SystemTime::now() - Duration::from_secs(600);
        let make = |name: &str, modified: Option<SystemTime>| {
            let f = std::fs::File::create(dir.path().join(name)).unwrap();
            if let Some(t) = modified {
                f.set_modified(t).unwrap();
            }
        };
        make(".nena-00aa.part", Some(old)); // a killed server's: removed
        make(".nena-11bb.part", None); // an upload in progress: kept
        make("report.part", Some(old)); // not ours: kept
        make(".nena-22cc.tmp", Some(old)); // not ours: kept
        make("data.bin", Some(old));
        let n = remove_stale_parts(dir.path(), Duration::from_secs(120)).unwrap();
        assert_eq!(n, 1);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                ".nena-11bb.part",
                ".nena-22cc.tmp",
                "data.bin",
                "report.part"
            ]
        );
        assert!(remove_stale_parts(&dir.path().join("missing"), Duration::ZERO).is_err());
    }

    /// A sink that records the size of every write it is offered.
    struct Writes(Arc<std::sync::Mutex<Vec<usize>>>);

    impl AsyncWrite for Writes {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            self.0.lock().unwrap().push(buf.len());
            std::task::Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    /// A file goes to the socket in writes of the writer's buffer, not a record at a time:
    /// a file read that is pending (tokio's files read on the blocking pool) must not make
    /// `aead` send each 16 KiB record on its own (the kernel's scheduler then kept whole
    /// 2 MB uploads on the first subflow).
    #[tokio::test]
    async fn an_aead_file_goes_out_in_large_writes() {
        use crate::stream::handshake::{client_finish, entropy, secure_pair, server_handshake};
        use nena_proto::{ClientConfig, ClientHandshake, Mode, ServerConfig};
        let (c, s) = tokio::io::duplex(64 * 1024);
        let (mut cr, mut cw) = tokio::io::split(c);
        let (mut sr, mut sw) = tokio::io::split(s);
        let server = tokio::spawn(async move {
            let cfg =
                ServerConfig::accepting(&[Mode::Aead]).with_key(nena_proto::test_server_key());
            server_handshake(&cfg, &mut sr, &mut sw, Duration::from_secs(5))
                .await
                .map(|_| (sr, sw))
        });
        let mut hs =
            ClientHandshake::new(&ClientConfig::offering(&[Mode::Aead]), entropy().unwrap())
                .unwrap();
        cw.write_all(hs.first_flight()).await.unwrap();
        let (sess, left) = client_finish(&mut hs, &mut cr, &mut cw, Duration::from_secs(5))
            .await
            .unwrap();
        let _server_ends = server.await.unwrap().unwrap();
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (_r, mut w) = secure_pair(Some(sess), left, cr, Writes(log.clone()));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        let size = 2u64 << 20;
        std::fs::write(&path, vec![0x5a; size as usize]).unwrap();
        let mut file = tokio::fs::File::open(&path).await.unwrap();
        let mac = AppMac::file(w.app_mac_key(), OP_PUT, "f.bin", size);
        send_data(&mut w, &mut file, size, None, mac).await.unwrap();
        let check = |writes: &[usize]| {
            let total: usize = writes.iter().sum();
            assert!(total as u64 > size, "{total} bytes written for {size}");
            // 2 MiB in writes of 128-256 KiB (and the last, with the trailer). One write
            // per record would be 128 of them.
            let small = writes.iter().filter(|&&n| n < 64 * 1024).count();
            assert!(
                writes.len() <= 20 && small <= 1,
                "{} writes: {writes:?}",
                writes.len()
            );
        };
        check(&std::mem::take(&mut *log.lock().unwrap()));

        // The same with a source that is pending before every read, whatever the host's
        // load (a file's reads are pending or not depending on the blocking pool).
        struct Slow(Vec<u8>, usize, bool);
        impl AsyncRead for Slow {
            fn poll_read(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let me = &mut *self;
                me.2 = !me.2;
                if me.2 {
                    cx.waker().wake_by_ref();
                    return std::task::Poll::Pending;
                }
                let n = buf.remaining().min(me.0.len() - me.1);
                buf.put_slice(&me.0[me.1..me.1 + n]);
                me.1 += n;
                std::task::Poll::Ready(Ok(()))
            }
        }
        let mut src = Slow(vec![0x5a; size as usize], 0, false);
        let moved = crate::stream::copy::copy_in_bulk(&mut src, &mut w, size, |_| {})
            .await
            .unwrap();
        assert_eq!(moved, size);
        w.write_all(&[0u8; TRAILER_LEN]).await.unwrap();
        w.flush().await.unwrap();
        check(&log.lock().unwrap());
    }
}
