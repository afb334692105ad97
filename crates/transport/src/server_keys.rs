//! Server keys on disk (docs/PROTOCOL.md, "Server key"): the server's long-term Ed25519
//! key file (PKCS#8 in PEM, created with mode 0600 on first start), and the client's
//! `known_servers` file, which pins each server's public key on first contact (trust on
//! first use, as SSH's known_hosts) unless the user gives it (`--server-key`). The handshake
//! itself checks the key (nena-proto); this module says which key to expect and remembers
//! the first one. [`served_within`] tells a file server whether its key file lies in the
//! directory it would serve (it then refuses to start). And the access token file
//! (`--token-file`, [`load_token`]), a secret on disk as the key file is, which both a server
//! and its clients read (`crate::ops::access` re-exports it).

use anyhow::{anyhow, bail, Context, Result};
use nena_proto::{HandshakeError, KeyText, PublicKey, ServerKey, SERVER_KEY_LEN};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// nena's state directory: systemd's `$STATE_DIRECTORY` (a unit's `StateDirectory=`, the
/// first if several), else `$XDG_STATE_HOME/nena`, else `$HOME/.local/state/nena`.
pub fn state_dir() -> Result<PathBuf> {
    state_dir_from(|v| std::env::var_os(v))
}

/// [`state_dir`] with the environment given (so that it can be tested without touching
/// the process's own).
fn state_dir_from(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Result<PathBuf> {
    let non_empty = |v: &str| env(v).filter(|s| !s.is_empty());
    if let Some(d) = non_empty("STATE_DIRECTORY") {
        // systemd joins several StateDirectory= entries with ':'; the first is ours.
        let first = d
            .to_string_lossy()
            .split(':')
            .next()
            .unwrap_or_default()
            .to_string();
        return Ok(PathBuf::from(first));
    }
    if let Some(d) = non_empty("XDG_STATE_HOME") {
        return Ok(PathBuf::from(d).join("nena"));
    }
    if let Some(h) = non_empty("HOME") {
        return Ok(PathBuf::from(h).join(".local/state/nena"));
    }
    bail!("no state directory: neither XDG_STATE_HOME nor HOME is set (pass the file explicitly)")
}

/// The server's default key file: `server_key` in the state directory.
pub fn default_key_file() -> Result<PathBuf> {
    Ok(state_dir()?.join("server_key"))
}

/// The path of `p` with every symbolic link of its longest existing ancestor resolved and
/// `.` and `..` of the rest taken lexically (`p` itself need not exist).
fn resolved(p: &Path) -> Result<PathBuf> {
    use std::path::Component;
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()?.join(p)
    };
    let mut base = abs.as_path();
    let mut rest = Vec::new();
    let root = loop {
        match base.canonicalize() {
            Ok(c) => break c,
            Err(_) => match (base.parent(), base.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_os_string());
                    base = parent;
                }
                _ => break base.to_path_buf(),
            },
        }
    };
    let mut out = root;
    for name in rest.into_iter().rev() {
        for c in Path::new(&name).components() {
            match c {
                Component::ParentDir => {
                    out.pop();
                }
                Component::CurDir => {}
                c => out.push(c.as_os_str()),
            }
        }
    }
    Ok(out)
}

/// Whether `file` (a key file, existing or to be created) lies in `dir` or below it, links
/// resolved: a file server of `dir` would then serve it (and with `--overwrite` let a client
/// replace it).
pub fn served_within(dir: &Path, file: &Path) -> Result<bool> {
    let dir = dir
        .canonicalize()
        .with_context(|| format!("{}", dir.display()))?;
    Ok(resolved(file)?.starts_with(&dir))
}

/// The client's default known servers file: `known_servers` in the state directory.
pub fn default_known_servers() -> Result<PathBuf> {
    Ok(state_dir()?.join("known_servers"))
}

/// A public key as users write it: base64 (44 characters) or hex (64 digits).
pub fn parse_public_key(s: &str) -> Result<PublicKey, String> {
    let s = s.trim();
    let bytes = if s.len() == 2 * SERVER_KEY_LEN && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        data_encoding::HEXLOWER_PERMISSIVE.decode(s.as_bytes())
    } else {
        data_encoding::BASE64.decode(s.as_bytes())
    };
    bytes
        .ok()
        .and_then(|b| PublicKey::try_from(b.as_slice()).ok())
        .ok_or_else(|| {
            format!("`{s}` is not a nena server key (44 characters of base64 or 64 hex digits)")
        })
}

const PEM_BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
const PEM_END: &str = "-----END PRIVATE KEY-----";
/// The PKCS#8 v1 (RFC 8410) prefix of an Ed25519 private key, before its 32-byte seed.
const PKCS8_ED25519_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// Loads the server key from `path` (PEM or DER PKCS#8, as OpenSSL's `genpkey -algorithm
/// ed25519` writes it too), or creates one there (mode 0600, its directory 0700) if there is
/// no file. Refuses a key file that others may read. Returns the key and whether it was made.
pub fn load_or_create_key(path: &Path) -> Result<(ServerKey, bool)> {
    match std::fs::metadata(path) {
        Ok(_) => Ok((load_key(path)?, false)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match create_key(path) {
            Ok(k) => Ok((k, true)),
            // Another server of this host created it at the same moment.
            Err(e) if path.exists() => load_key(path).map(|k| (k, false)).context(e),
            Err(e) => Err(e),
        },
        Err(e) => Err(anyhow!(
            "cannot read the server key file {}: {e}",
            path.display()
        )),
    }
}

/// Loads an existing key file.
pub fn load_key(path: &Path) -> Result<ServerKey> {
    let shown = path.display();
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot read the server key file {shown}"))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!("the server key file {shown} may be read by others (mode {mode:03o}): chmod 600 {shown}");
    }
    let raw = zeroize::Zeroizing::new(
        std::fs::read(path).with_context(|| format!("cannot read the server key file {shown}"))?,
    );
    let der = match std::str::from_utf8(&raw) {
        Ok(text) if text.contains(PEM_BEGIN) => {
            let b64: String = text
                .lines()
                .map(str::trim)
                .skip_while(|l| *l != PEM_BEGIN)
                .skip(1)
                .take_while(|l| *l != PEM_END)
                .collect();
            zeroize::Zeroizing::new(
                data_encoding::BASE64
                    .decode(b64.as_bytes())
                    .map_err(|e| anyhow!("the server key file {shown} is not valid PEM: {e}"))?,
            )
        }
        _ => raw.clone(),
    };
    ServerKey::from_pkcs8(&der).map_err(|e| anyhow!("the server key file {shown}: {e}"))
}

/// Creates the directory of `path` (mode 0700) if it is missing.
fn private_parent(path: &Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    Ok(())
}

fn create_key(path: &Path) -> Result<ServerKey> {
    let shown = path.display();
    private_parent(path)?;
    let seed = zeroize::Zeroizing::new(crate::handshake::random::<32>()?);
    let mut der = zeroize::Zeroizing::new(PKCS8_ED25519_PREFIX.to_vec());
    der.extend_from_slice(&seed[..]);
    let key = ServerKey::from_pkcs8(&der).map_err(|e| anyhow!("{e}"))?;
    let pem = zeroize::Zeroizing::new(format!(
        "{PEM_BEGIN}\n{}\n{PEM_END}\n",
        data_encoding::BASE64.encode(&der)
    ));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create the server key file {shown}"))?;
    f.write_all(pem.as_bytes())
        .and_then(|()| f.sync_all())
        .with_context(|| format!("cannot write the server key file {shown}"))?;
    Ok(key)
}

/// The `known_servers` file: one line per server, `NAME ed25519 KEY` (NAME as the user
/// named the server, `HOST:PORT`; KEY in base64); `#` starts a comment. Sessions of one
/// process share one value, so that a first contact is pinned (and said) once.
#[derive(Debug)]
pub struct KnownServers {
    path: PathBuf,
    lock: Mutex<()>,
}

/// The key type written in `known_servers` (the only one).
const KEY_TYPE: &str = "ed25519";

impl KnownServers {
    pub fn new(path: PathBuf) -> KnownServers {
        KnownServers {
            path,
            lock: Mutex::new(()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every entry of the file (none if it does not exist). Lines that are not entries are
    /// refused with their number, never skipped silently.
    pub fn entries(&self) -> Result<Vec<(String, PublicKey)>> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => bail!("cannot read {}: {e}", self.path.display()),
        };
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            let key = match f.as_slice() {
                [_, KEY_TYPE, key] => parse_public_key(key).ok(),
                _ => None,
            };
            let Some(key) = key else {
                bail!(
                    "{} line {}: not `NAME {KEY_TYPE} KEY`",
                    self.path.display(),
                    i + 1
                );
            };
            out.push((f[0].to_string(), key));
        }
        Ok(out)
    }

    /// The key pinned for `name`, if any.
    pub fn lookup(&self, name: &str) -> Result<Option<PublicKey>> {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        Ok(self
            .entries()?
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, k)| k))
    }

    /// Pins `key` for `name` unless the file has an entry for it by now (another session or
    /// process may have pinned it meanwhile). `Ok(true)`: added; `Ok(false)`: the same key
    /// was there; an error if another key was.
    pub fn remember(&self, name: &str, key: &PublicKey) -> Result<bool, crate::Error> {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let _f = self.lock_file()?;
        if let Some((_, known)) = self.entries()?.into_iter().find(|(n, _)| n == name) {
            if known == *key {
                return Ok(false);
            }
            return Err(HandshakeError::ServerKeyMismatch {
                expected: known,
                got: *key,
            }
            .into());
        }
        private_parent(&self.path)?;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&self.path)
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        // One write per line: concurrent clients may append to the same file.
        f.write_all(format!("{name} {KEY_TYPE} {}\n", KeyText(key)).as_bytes())
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        Ok(true)
    }

    /// Removes every entry of `name`; returns how many there were.
    pub fn forget(&self, name: &str) -> Result<usize> {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let _f = self.lock_file()?;
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => bail!("cannot read {}: {e}", self.path.display()),
        };
        let (gone, kept): (Vec<&str>, Vec<&str>) = text
            .lines()
            .partition(|l| l.split_whitespace().next() == Some(name));
        if gone.is_empty() {
            return Ok(0);
        }
        let tmp = self.path.with_extension("tmp");
        let mut body = kept.join("\n");
        if !body.is_empty() {
            body.push('\n');
        }
        // The rewrite is as private as the file `remember` makes (0600), whatever the umask.
        let _ = std::fs::remove_file(&tmp);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| f.write_all(body.as_bytes()).and_then(|()| f.sync_all()))
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .with_context(|| format!("cannot rewrite {}", self.path.display()))?;
        Ok(gone.len())
    }

    /// An exclusive lock on `known_servers.lock` beside the file, held while an entry is
    /// added or removed, so that another process's `remember` cannot append between
    /// `forget`'s read and its rename (which would lose that entry).
    fn lock_file(&self) -> Result<nix::fcntl::Flock<std::fs::File>> {
        private_parent(&self.path)?;
        let path = self.path.with_extension("lock");
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| anyhow::anyhow!("cannot lock {}: {e}", path.display()))
    }
}

static SERVICE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// This process is a service (a proxy client, the gateway, `nena run`): a first contact is
/// logged at info, beside its sessions, instead of as a warning for a person to read.
pub fn first_contact_at_info() {
    SERVICE.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Which server key a client expects ([`crate::conn::ClientOptions::server_key`]).
#[derive(Debug, Clone)]
pub enum ServerKeyCheck {
    /// `--server-key KEY`: this key and no other.
    Given(PublicKey),
    /// The key pinned for `name` in `known`, or, on first contact, whatever key the server
    /// proves, which is then pinned.
    Known {
        name: String,
        known: Arc<KnownServers>,
    },
}

impl ServerKeyCheck {
    /// Trust on first use of `server` (as the user named it) in the file `known`.
    pub fn known(server: &crate::resolve::ServerAddr, known: Arc<KnownServers>) -> Self {
        ServerKeyCheck::Known {
            name: entry_name(server),
            known,
        }
    }

    /// The key to expect now (`None`: first contact).
    pub fn expected(&self) -> Result<Option<PublicKey>> {
        match self {
            ServerKeyCheck::Given(k) => Ok(Some(*k)),
            ServerKeyCheck::Known { name, known } => known.lookup(name),
        }
    }

    /// After a handshake that proved `key`: pins it on first contact (said once, on stderr).
    pub fn proved(&self, key: &PublicKey) -> Result<(), crate::Error> {
        let ServerKeyCheck::Known { name, known } = self else {
            return Ok(());
        };
        match known.remember(name, key) {
            Ok(true) => {
                // Said to a person running a command; in a service's log (proxy client,
                // gateway, `nena run`: every session would say it), at info.
                let level = if SERVICE.load(std::sync::atomic::Ordering::Relaxed) {
                    log::Level::Info
                } else {
                    log::Level::Warn
                };
                log::log!(
                    level,
                    "first contact with {name}: its key {} is now pinned in {} (trust on first use; \
                     a later change is refused)",
                    KeyText(key),
                    known.path().display()
                );
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(e) => Err(self.explain(e)),
        }
    }

    /// A handshake error, with the file and the command that accepts a new key when the
    /// server proved another key than the expected one.
    pub fn explain(&self, e: crate::Error) -> crate::Error {
        let crate::Error::Proto(HandshakeError::ServerKeyMismatch { expected, got }) = e.kind()
        else {
            return e;
        };
        let (expected, got) = (KeyText(expected), KeyText(got));
        crate::Error::Other(match self {
            ServerKeyCheck::Given(_) => anyhow!(
                "refused: the server proves the key {got}, not the one given with --server-key \
                 ({expected}); nothing was sent"
            ),
            ServerKeyCheck::Known { name, known } => anyhow!(
                "refused: {name} proves the key {got}, but {} pins {expected} for it: an impostor \
                 (a lying resolver, an attacker on a path) or the server's key changed; nothing \
                 was sent. If you know its key changed: nena known-servers forget {name} \
                 --known-servers {}",
                known.path().display(),
                known.path().display()
            ),
        })
    }
}

/// The `known_servers` name of a server: `HOST:PORT` as named, the host in lower case.
pub fn entry_name(server: &crate::resolve::ServerAddr) -> String {
    server.to_string().to_ascii_lowercase()
}

// ---------------------------------------------------------------------------------------
// The access token file (`--token-file`): a secret on disk, as the key file is.

use crate::wire::AccessToken;

/// Shortest access token a token file may hold (bytes, after trimming): long enough that
/// guessing it over the network is hopeless when it is random.
pub const MIN_TOKEN: usize = 16;

/// Reads an access token from `path` (`--token-file`, the same file on both sides): its
/// content with leading and trailing whitespace (a final newline) removed, 16..=255 bytes.
pub fn load_token(path: &std::path::Path) -> anyhow::Result<AccessToken> {
    // The file's bytes are wiped when dropped, as the token is (wire::AccessToken).
    let raw = zeroize::Zeroizing::new(
        std::fs::read(path).map_err(|e| anyhow::anyhow!("--token-file {}: {e}", path.display()))?,
    );
    token_from_file_bytes(&raw).map_err(|e| anyhow::anyhow!("--token-file {}: {e}", path.display()))
}

fn token_from_file_bytes(raw: &[u8]) -> Result<AccessToken, String> {
    let t = raw.trim_ascii();
    if t.len() < MIN_TOKEN {
        return Err(format!(
            "the token has {} bytes, at least {MIN_TOKEN} are needed \
             (e.g. `head -c 32 /dev/urandom | base64 > FILE`)",
            t.len()
        ));
    }
    AccessToken::new(t.to_vec()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_key_file_in_the_served_directory_is_found_through_links_and_dots() {
        let base = std::env::temp_dir().join(format!("nena-served-{}", std::process::id()));
        let served = base.join("srv");
        std::fs::create_dir_all(served.join("sub")).unwrap();
        std::fs::create_dir_all(base.join("keys")).unwrap();
        let link = base.join("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&served, &link).unwrap();
        // In it, below it, not yet made, through a link, through `..`.
        assert!(served_within(&served, &served.join("server_key")).unwrap());
        assert!(served_within(&served, &served.join("sub/new/server_key")).unwrap());
        assert!(served_within(&served, &link.join("server_key")).unwrap());
        assert!(served_within(&link, &served.join("k")).unwrap());
        assert!(served_within(&served, &base.join("keys/../srv/k")).unwrap());
        // Beside it, or a prefix of its name only.
        assert!(!served_within(&served, &base.join("keys/server_key")).unwrap());
        assert!(!served_within(&served, &base.join("srv-other/server_key")).unwrap());
        assert!(!served_within(&served, &served.join("../k")).unwrap());
        std::fs::remove_dir_all(&base).unwrap();
    }
    use super::*;

    #[test]
    fn token_files() {
        let t = token_from_file_bytes(b"  0123456789abcdef\n").unwrap();
        assert!(t.admits(Some(
            &crate::wire::AccessToken::new(b"0123456789abcdef".to_vec()).unwrap()
        )));
        let e = token_from_file_bytes(b"short\n").unwrap_err();
        assert!(e.contains("5 bytes, at least 16"), "{e}");
        assert!(token_from_file_bytes(b"\n\n").is_err());
        let e = token_from_file_bytes(&[b'x'; 300]).unwrap_err();
        assert!(e.contains("too long"), "{e}");
    }

    #[test]
    fn a_created_key_is_private_and_loads_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/server_key");
        let (k, made) = load_or_create_key(&path).unwrap();
        assert!(made);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(path.parent().unwrap())
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o700
        );
        let (again, made) = load_or_create_key(&path).unwrap();
        assert!(!made);
        assert_eq!(again.public(), k.public());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = load_key(&path).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
    }

    #[test]
    fn openssl_pem_keys_load() {
        // `openssl genpkey -algorithm ed25519` for RFC 8032's TEST 1 seed.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.pem");
        std::fs::write(
            &path,
            "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            KeyText(&load_key(&path).unwrap().public()).to_string(),
            "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
        );
        std::fs::write(&path, "not a key").unwrap();
        assert!(load_key(&path).is_err());
    }

    #[test]
    fn public_keys_parse_from_base64_or_hex() {
        let k = [0xabu8; 32];
        assert_eq!(parse_public_key(&KeyText(&k).to_string()), Ok(k));
        assert_eq!(parse_public_key(&"AB".repeat(32)), Ok(k));
        assert!(parse_public_key("abc").is_err());
        assert!(parse_public_key(&"ab".repeat(31)).is_err());
    }

    #[test]
    fn known_servers_pin_once_refuse_a_change_and_forget() {
        let dir = tempfile::tempdir().unwrap();
        let known = KnownServers::new(dir.path().join("state/known_servers"));
        assert_eq!(known.lookup("a:1").unwrap(), None);
        assert!(known.remember("a:1", &[1; 32]).unwrap());
        assert!(!known.remember("a:1", &[1; 32]).unwrap());
        assert!(known.remember("b:2", &[2; 32]).unwrap());
        assert_eq!(known.lookup("a:1").unwrap(), Some([1; 32]));
        let e = known.remember("a:1", &[3; 32]).unwrap_err();
        assert!(matches!(
            e.kind(),
            crate::Error::Proto(HandshakeError::ServerKeyMismatch { .. })
        ));
        assert_eq!(known.forget("a:1").unwrap(), 1);
        assert_eq!(known.lookup("a:1").unwrap(), None);
        assert_eq!(known.lookup("b:2").unwrap(), Some([2; 32]));
        assert_eq!(known.forget("a:1").unwrap(), 0);
        std::fs::write(known.path(), "garbage line\n").unwrap();
        assert!(known
            .lookup("b:2")
            .unwrap_err()
            .to_string()
            .contains("line 1"));
    }

    #[test]
    fn the_state_directory_is_systemds_first_then_xdg_then_home() {
        fn env<'a>(pairs: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<std::ffi::OsString> + 'a {
            move |v| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == v)
                    .map(|(_, x)| std::ffi::OsString::from(x))
            }
        }
        let all = [
            ("STATE_DIRECTORY", "/var/lib/nena-gateway:/var/lib/other"),
            ("XDG_STATE_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(
            state_dir_from(env(&all)).unwrap(),
            PathBuf::from("/var/lib/nena-gateway")
        );
        assert_eq!(
            state_dir_from(env(&[("STATE_DIRECTORY", ""), ("XDG_STATE_HOME", "/x")])).unwrap(),
            PathBuf::from("/x/nena")
        );
        assert_eq!(
            state_dir_from(env(&[("HOME", "/h")])).unwrap(),
            PathBuf::from("/h/.local/state/nena")
        );
        assert!(state_dir_from(env(&[])).is_err());
    }

    #[test]
    fn forget_keeps_the_file_private_and_loses_no_concurrent_pin() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("known_servers");
        let first = KnownServers::new(path.clone());
        assert!(first.remember("gone:1", &[9; 32]).unwrap());
        // Other processes: instances of their own (no shared mutex), pinning while this
        // one forgets. Only the file lock keeps forget's rewrite from dropping their pins.
        let pinners: Vec<_> = (0..4u8)
            .map(|t| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let k = KnownServers::new(path);
                    for i in 0..50u8 {
                        k.remember(&format!("s{t}-{i}:1"), &[t ^ i; 32]).unwrap();
                    }
                })
            })
            .collect();
        let forgetter = {
            let path = path.clone();
            std::thread::spawn(move || {
                let k = KnownServers::new(path);
                for _ in 0..200 {
                    k.remember("gone:1", &[9; 32]).unwrap();
                    k.forget("gone:1").unwrap();
                }
            })
        };
        for p in pinners {
            p.join().unwrap();
        }
        forgetter.join().unwrap();
        let names: std::collections::HashSet<String> = first
            .entries()
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        for t in 0..4u8 {
            for i in 0..50u8 {
                assert!(
                    names.contains(&format!("s{t}-{i}:1")),
                    "pin s{t}-{i} was lost"
                );
            }
        }
        assert!(!names.contains("gone:1"));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "forget rewrote the file as {mode:o}");
    }

    #[test]
    fn a_changed_key_names_the_file_and_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let known = Arc::new(KnownServers::new(dir.path().join("known_servers")));
        let check = ServerKeyCheck::Known {
            name: "server.example:7000".into(),
            known: known.clone(),
        };
        let e = check.explain(
            HandshakeError::ServerKeyMismatch {
                expected: [1; 32],
                got: [2; 32],
            }
            .into(),
        );
        let text = e.to_string();
        assert!(text.contains(&known.path().display().to_string()), "{text}");
        assert!(
            text.contains("nena known-servers forget server.example:7000"),
            "{text}"
        );
        assert!(!text.contains('\n'));
    }
}
