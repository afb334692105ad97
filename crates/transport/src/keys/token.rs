//! The access token file (`--token-file`, [`load_token`]): a secret on disk, as the key file
//! is, which both a server and its clients read (`crate::ops::access` re-exports it).

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
}
