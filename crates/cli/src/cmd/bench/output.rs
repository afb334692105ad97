//! What the benches share in how they show their work: progress lines on standard error,
//! the report as JSON with `--json` or as a table, and the exit status of a missed target.
use crate::exit::CmdResult;

/// A bench's progress lines: each on standard error as `bench NAME: LINE`, none with
/// `--json` (the JSON is the whole output then).
pub fn progress(name: &'static str, json: bool) -> impl FnMut(&str) + Send + 'static {
    move |line| {
        if !json {
            eprintln!("bench {name}: {line}");
        }
    }
}

/// A bench's report as one pretty-printed JSON object on standard output (`--json`).
pub fn print_json<T: serde::Serialize>(report: &T) -> CmdResult {
    println!(
        "{}",
        serde_json::to_string_pretty(report).map_err(anyhow::Error::from)?
    );
    Ok(())
}

/// Exit status 1 naming the targets `missed`, if any, unless `--no-check`.
pub fn check_targets<'a>(missed: impl IntoIterator<Item = &'a str>, no_check: bool) -> CmdResult {
    let missed: Vec<&str> = missed.into_iter().collect();
    if missed.is_empty() || no_check {
        return Ok(());
    }
    Err(anyhow::anyhow!(
        "target(s) not met: {} (use --no-check to report only)",
        missed.join(", ")
    )
    .into())
}

/// A bench's report: JSON with `--json`, else its `table`; then, when a target was missed
/// (`pass` false) and `--no-check` was not given, the error `missed` (a non-zero exit).
pub fn report<T: serde::Serialize>(
    r: &T,
    json: bool,
    table: impl FnOnce(&T) -> String,
    pass: bool,
    no_check: bool,
    missed: &str,
) -> CmdResult {
    if json {
        print_json(r)?;
    } else {
        print!("{}", table(r));
    }
    if !pass && !no_check {
        return Err(anyhow::anyhow!("{missed}").into());
    }
    Ok(())
}

/// The benches that run a DNS server in the lab (`page`, `hostile-lan`) need `--dnsmasq` to
/// be an executable file; otherwise a usage error with the fix.
pub fn check_dnsmasq(dnsmasq: &std::path::Path) -> CmdResult {
    if nena_bench::peers::find_program(dnsmasq).is_none() {
        return Err(crate::exit::Exit::usage(anyhow::anyhow!(
            "dnsmasq ({}) is not an executable file here; scripts/install-deps.sh installs \
             it (Debian's dnsmasq-base), or name yours with --dnsmasq",
            dnsmasq.display()
        )));
    }
    Ok(())
}
