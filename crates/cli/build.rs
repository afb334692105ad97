//! Build script: names the commit the binary was built from, for `nena --version`
//! ("nena 0.1.0 (commit 0123456789ab)"; "..., modified" when tracked files differed from that
//! commit at build time). A build outside a git checkout (a source tarball) takes the commit
//! from `NENA_COMMIT`, or says "commit unknown".

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rerun-if-env-changed=NENA_COMMIT");
    let commit = match std::env::var("NENA_COMMIT") {
        Ok(c) if !c.trim().is_empty() => format!("commit {}", c.trim()),
        _ => match git(&["rev-parse", "--short=12", "HEAD"]) {
            Some(hash) => {
                watch_git();
                // Only tracked files count: untracked ones (scratch files, captures) do not
                // change what was built.
                let modified = git(&["status", "--porcelain", "--untracked-files=no"])
                    .is_some_and(|s| !s.is_empty());
                if modified {
                    format!("commit {hash}, modified")
                } else {
                    format!("commit {hash}")
                }
            }
            None => "commit unknown".to_string(),
        },
    };
    println!("cargo:rustc-env=NENA_VERSION={version} ({commit})");
}

/// Run again when HEAD moves (a commit, a checkout) or a source file changes (which may
/// make the tree modified or clean again).
fn watch_git() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let root = Path::new(&manifest).join("../..");
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let dir = Path::new(&dir);
        let branch = git(&["symbolic-ref", "-q", "HEAD"]);
        // Only files that exist: cargo runs the script on every build for a missing one.
        ["HEAD", "packed-refs", "index"]
            .into_iter()
            .chain(branch.as_deref())
            .map(|f| dir.join(f))
            .filter(|p| p.exists())
            .for_each(|p| println!("cargo:rerun-if-changed={}", p.display()));
    }
    // Directories are scanned recursively for changes.
    for p in ["crates", "Cargo.toml", "Cargo.lock", "contrib"] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
}
