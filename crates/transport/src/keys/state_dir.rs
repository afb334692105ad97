//! nena's state directory, where the server's key file and the client's `known_servers`
//! live unless the user names them ([`state_dir`]), and the private directory (mode 0700)
//! made for a secret file ([`private_parent`]).

use anyhow::{bail, Context, Result};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

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

/// Creates the directory of `path` (mode 0700) if it is missing.
pub(super) fn private_parent(path: &Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
