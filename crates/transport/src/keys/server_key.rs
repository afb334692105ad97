//! The server's long-term Ed25519 key file (docs/PROTOCOL.md, "Server key"): PKCS#8 in PEM,
//! created with mode 0600 on first start ([`load_or_create_key`]), refused when others may
//! read it. [`served_within`] tells a file server whether its key file lies in the
//! directory it would serve (it then refuses to start).

use super::state_dir::{private_parent, state_dir};
use anyhow::{anyhow, bail, Context, Result};
use nena_proto::ServerKey;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

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

fn create_key(path: &Path) -> Result<ServerKey> {
    let shown = path.display();
    private_parent(path)?;
    let seed = zeroize::Zeroizing::new(crate::stream::handshake::random::<32>()?);
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

#[cfg(test)]
mod tests {
    use super::*;
    use nena_proto::KeyText;

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
}
