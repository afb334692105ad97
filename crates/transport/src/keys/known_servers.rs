//! The client's `known_servers` file, which pins each server's public key on first contact
//! (trust on first use, as SSH's known_hosts) unless the user gives it (`--server-key`,
//! [`parse_public_key`]), and which key a client expects of a server ([`ServerKeyCheck`]).
//! The handshake itself checks the key (nena-proto); this module says which key to expect
//! and remembers the first one.

use super::state_dir::{private_parent, state_dir};
use anyhow::{anyhow, bail, Context, Result};
use nena_proto::{HandshakeError, KeyText, PublicKey, SERVER_KEY_LEN};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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

    /// The key expected now, for `nena status`: the key and where it comes from, or that
    /// the next contact pins one.
    pub fn describe(&self) -> String {
        match (self, self.expected()) {
            (ServerKeyCheck::Given(k), _) => format!("{} (--server-key)", KeyText(k)),
            (ServerKeyCheck::Known { known, .. }, Ok(Some(k))) => {
                format!("{} (pinned in {})", KeyText(&k), known.path().display())
            }
            (ServerKeyCheck::Known { known, .. }, Ok(None)) => format!(
                "none yet: the first contact pins the key it proves (in {})",
                known.path().display()
            ),
            (ServerKeyCheck::Known { known, .. }, Err(e)) => {
                format!("{} cannot be read: {e:#}", known.path().display())
            }
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

#[cfg(test)]
mod tests {
    use super::*;

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

    /// `nena status` names the key pinned now, or that none is yet, and the file.
    #[test]
    fn describe_names_the_pinned_key_and_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let known = Arc::new(KnownServers::new(dir.path().join("known_servers")));
        let check = ServerKeyCheck::Known {
            name: "a:1".into(),
            known: known.clone(),
        };
        assert!(
            check.describe().starts_with("none yet"),
            "{}",
            check.describe()
        );
        known.remember("a:1", &[7; 32]).unwrap();
        let key = KeyText(&[7; 32]).to_string();
        assert!(check.describe().starts_with(&key), "{}", check.describe());
        assert!(check.describe().contains("known_servers"));
        assert!(ServerKeyCheck::Given([7; 32])
            .describe()
            .contains("--server-key"));
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
