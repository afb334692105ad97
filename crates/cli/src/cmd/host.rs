//! `nena completions SHELL` and `nena man --out-dir DIR`: shell completions and man pages,
//! both generated from the same clap `Command` the binary parses (no second copy of the CLI).

use crate::exit::{CmdResult, Exit};
use anyhow::{anyhow, Context};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to write completions for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// Directory to write the pages to (created if missing): nena.1 and one page per
    /// subcommand (nena-serve.1, nena-proxy-server.1, ...).
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub out_dir: PathBuf,
}

/// Write the completion script for `a.shell` to standard output.
pub fn completions(a: CompletionsArgs, mut cmd: clap::Command) -> CmdResult {
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "nena", &mut buf);
    let mut out = std::io::stdout().lock();
    match out.write_all(&buf).and_then(|()| out.flush()) {
        // A reader that stops early (`| head`) is not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Exit::from(anyhow!("writing the completions: {e}")))
        }
        _ => Ok(()),
    }
}

/// Write the man pages to `a.out_dir` and list them on standard output.
pub fn man(a: ManArgs, cmd: clap::Command) -> CmdResult {
    std::fs::create_dir_all(&a.out_dir)
        .with_context(|| format!("--out-dir {}", a.out_dir.display()))
        .map_err(Exit::usage)?;
    clap_mangen::generate_to(cmd, &a.out_dir)
        .with_context(|| format!("writing man pages to {}", a.out_dir.display()))?;
    let mut pages: Vec<String> = std::fs::read_dir(&a.out_dir)
        .with_context(|| format!("{}", a.out_dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("nena") && n.ends_with(".1"))
        .collect();
    pages.sort();
    for p in pages {
        println!("{}", a.out_dir.join(p).display());
    }
    Ok(())
}
