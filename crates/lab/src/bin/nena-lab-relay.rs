//! The lab's relay as a binary of its own, for the lab crate's tests (which cannot build the
//! `nena` binary): takes the same arguments as `nena lab relay --prefix P` (`lab relay
//! --prefix P`) and runs [`nena_lab::emulate::relay_main`].

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let prefix = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["lab", "relay", "--prefix", p] => p.to_string(),
        _ => {
            eprintln!("usage: nena-lab-relay lab relay --prefix PREFIX");
            return std::process::ExitCode::from(2);
        }
    };
    match nena_lab::emulate::relay_main(&prefix) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nena-lab-relay: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
