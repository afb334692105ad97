//! `--config FILE` for the long-running commands (`nena serve`, `nena proxy server`, `nena
//! proxy client`): a TOML table whose keys are the command's long flags without the dashes
//! (kebab-case). One generic implementation for every command that has a `--config` flag:
//! which keys exist, and whether each is a switch, a count, or takes one or several values,
//! come from the clap definitions, and each value is checked with the flag's own value
//! parser. The table becomes `--key=value` tokens appended to the command line before clap
//! parses it; a key the command line gives itself is left out, so flags override the file.

use clap::{Arg, ArgAction, Command};
use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The id (and long name) of the `--config` flag.
pub const CONFIG: &str = "config";

/// The command line to parse, and the config file it was completed from, if any.
#[derive(Debug)]
pub struct Expanded {
    pub argv: Vec<OsString>,
    pub file: Option<PathBuf>,
}

/// Complete `argv` from the file named by `--config`, if the subcommand it invokes has that
/// flag and it is given. An error is one line naming the file (and the key, if one is at
/// fault): bad input, exit status 2.
pub fn expand(root: &Command, argv: Vec<OsString>) -> Result<Expanded, String> {
    // Walk down the subcommands the command line names. Options before a subcommand's name
    // are the global switches (-v), none of which takes a value.
    let mut cmd = root;
    let mut path = vec![root.get_name().to_string()];
    let mut i = 1;
    let mut start = argv.len();
    while i < argv.len() {
        let Some(t) = argv[i].to_str() else { break };
        if t == "--" {
            break;
        }
        i += 1;
        if t.starts_with('-') {
            continue;
        }
        match cmd.find_subcommand(t) {
            Some(sub) => {
                cmd = sub;
                path.push(sub.get_name().to_string());
                start = i;
            }
            None => break,
        }
    }
    if !cmd.get_arguments().any(|a| a.get_id() == CONFIG) {
        return Ok(Expanded { argv, file: None });
    }
    // The leaf's own tokens (after its name): which flags they give, and the config file.
    let end = argv[start..]
        .iter()
        .position(|t| t == "--")
        .map_or(argv.len(), |p| start + p);
    let mut given: HashSet<String> = HashSet::new();
    let mut file: Option<PathBuf> = None;
    let mut j = start;
    while j < end {
        let tok = argv[j].to_string_lossy().into_owned();
        j += 1;
        if let Some(long) = tok.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, _)) => (n, true),
                None => (long, false),
            };
            let Some(arg) = find_long(cmd, name) else {
                continue;
            };
            given.insert(arg.get_id().to_string());
            if arg.get_id() == CONFIG {
                if inline {
                    file = Some(PathBuf::from(&long[name.len() + 1..]));
                } else if j < end {
                    file = Some(PathBuf::from(&argv[j]));
                    j += 1;
                }
            } else if !inline && takes_value(arg) {
                j += 1; // its value
            }
        } else if let Some(shorts) = tok.strip_prefix('-') {
            if let Some(c) = shorts.chars().next() {
                if let Some(arg) = cmd.get_arguments().find(|a| a.get_short() == Some(c)) {
                    given.insert(arg.get_id().to_string());
                    if shorts.len() == 1 && takes_value(arg) {
                        j += 1;
                    }
                }
            }
        }
    }
    let Some(file) = file else {
        return Ok(Expanded { argv, file: None });
    };
    let tokens = tokens_from_file(cmd, &path.join(" "), &file, &given)?;
    let mut argv = argv;
    argv.splice(end..end, tokens);
    Ok(Expanded {
        argv,
        file: Some(file),
    })
}

fn find_long<'a>(cmd: &'a Command, name: &str) -> Option<&'a Arg> {
    cmd.get_arguments().find(|a| {
        a.get_long() == Some(name) || a.get_all_aliases().is_some_and(|v| v.contains(&name))
    })
}

fn takes_value(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::Set | ArgAction::Append)
}

/// The `--key=value` tokens of the file's table for `cmd`, leaving out the flags in `given`.
fn tokens_from_file(
    cmd: &Command,
    cmd_path: &str,
    file: &Path,
    given: &HashSet<String>,
) -> Result<Vec<OsString>, String> {
    let shown = file.display();
    let text = std::fs::read_to_string(file).map_err(|e| format!("--config {shown}: {e}"))?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].lines().count().max(1));
        let msg = e.message().replace('\n', " ");
        match line {
            Some(l) => format!("{shown} line {l}: {}", msg.trim()),
            None => format!("{shown}: {}", msg.trim()),
        }
    })?;
    let mut out = Vec::new();
    for (key, value) in &table {
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some(key.as_str()) && a.get_id() != CONFIG)
            .ok_or_else(|| {
                let hint = if key.contains('_')
                    && cmd
                        .get_arguments()
                        .any(|a| a.get_long() == Some(key.replace('_', "-").as_str()))
                {
                    format!("; did you mean `{}`?", key.replace('_', "-"))
                } else {
                    String::new()
                };
                format!(
                    "{shown}: unknown key `{key}` (the keys are the long flags of `{cmd_path}`){hint}"
                )
            })?;
        // Every key is checked, even one the command line overrides.
        let mut toks: Vec<OsString> = Vec::new();
        let bad = |what: String| format!("{shown}: key `{key}`: {what}");
        match arg.get_action() {
            ArgAction::SetTrue => match value {
                toml::Value::Boolean(true) => toks.push(format!("--{key}").into()),
                toml::Value::Boolean(false) => {}
                v => {
                    return Err(bad(format!(
                        "a switch: true or false, not {}",
                        v.type_str()
                    )))
                }
            },
            ArgAction::Count => match value {
                toml::Value::Integer(n) if (0..=255).contains(n) => {
                    for _ in 0..*n {
                        toks.push(format!("--{key}").into());
                    }
                }
                v => return Err(bad(format!("a count from 0 to 255, not {v}"))),
            },
            ArgAction::Set | ArgAction::Append => {
                let many = matches!(arg.get_action(), ArgAction::Append);
                let values: Vec<&toml::Value> = match value {
                    toml::Value::Array(items) if many => items.iter().collect(),
                    toml::Value::Array(_) => {
                        return Err(bad("takes one value, not a list".to_string()))
                    }
                    v => vec![v],
                };
                for v in values {
                    let s = scalar(v).ok_or_else(|| {
                        bad(format!("a string or a number, not {}", v.type_str()))
                    })?;
                    // The flag's own parser, so a bad value is reported against the file.
                    check_value(arg, &s).map_err(bad)?;
                    toks.push(format!("--{key}={s}").into());
                }
            }
            _ => return Err(bad("cannot be set from a config file".to_string())),
        }
        if !given.contains(arg.get_id().as_str()) {
            out.extend(toks); // else the command line's flag wins
        }
    }
    Ok(out)
}

/// Parse `value` with `arg`'s own value parser (alone, without its relations to other
/// flags), for an error that names the file's key.
fn check_value(arg: &Arg, value: &str) -> Result<(), String> {
    let mut one = Arg::new("value")
        .action(ArgAction::Set)
        .allow_hyphen_values(true)
        .value_parser(arg.get_value_parser().clone());
    if let Some(names) = arg.get_value_names() {
        one = one.value_names(names.iter().cloned());
    }
    Command::new("nena")
        .no_binary_name(true)
        .disable_help_flag(true)
        .arg(one)
        .try_get_matches_from([value])
        .map(|_| ())
        .map_err(|e| one_line(&e.render().to_string()))
}

fn scalar(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(n) => Some(n.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// clap's message spans lines (what is wrong, then usage and a hint); keep what is wrong,
/// joined into one line.
pub fn one_line(text: &str) -> String {
    let what: Vec<String> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        // clap's "did you mean" ("tip: a similar subcommand exists: 'send'") is kept, as
        // "; a similar ..."; its other tips (quoting, `--`) are left to --help
        .filter_map(|l| match l.strip_prefix("tip:") {
            Some(t) if t.contains("similar") => Some(format!(";{t}")),
            Some(_) => None,
            None => Some(l.to_string()),
        })
        .collect();
    what.join(" ")
        .replace(" ;", ";")
        .trim_start_matches("error: ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    #[command(name = "t")]
    enum T {
        Run {
            #[arg(long)]
            config: Option<PathBuf>,
            #[arg(long)]
            listen: String,
            #[arg(long)]
            flag: bool,
            #[arg(long)]
            many: Vec<String>,
            #[arg(long, default_value = "1")]
            n: u32,
        },
        Other {
            #[arg(long)]
            listen: String,
        },
    }

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn with_file(body: &str, argv: &[&str]) -> Result<Vec<String>, String> {
        let dir = std::env::temp_dir().join(format!("nena-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join(format!("{:x}.toml", body.len() * 31 + argv.len()));
        std::fs::write(&f, body).unwrap();
        let mut v = argv.to_vec();
        let fs = f.to_str().unwrap().to_string();
        v.extend(["--config", &fs]);
        let cmd = <T as clap::CommandFactory>::command();
        let r = expand(&cmd, os(&v));
        let _ = std::fs::remove_file(&f);
        r.map(|e| {
            e.argv
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect()
        })
    }

    #[test]
    fn keys_become_flags_and_the_command_line_wins() {
        let got = with_file(
            "listen = \"a\"\nflag = true\nmany = [\"x\", \"y\"]\nn = 3\n",
            &["t", "run", "--listen", "b"],
        )
        .unwrap();
        let tail: Vec<&str> = got[6..].iter().map(String::as_str).collect();
        assert_eq!(tail, ["--flag", "--many=x", "--many=y", "--n=3"]);
        let parsed = T::try_parse_from(&got).unwrap();
        match parsed {
            T::Run {
                listen,
                flag,
                many,
                n,
                ..
            } => {
                assert_eq!(listen, "b");
                assert!(flag);
                assert_eq!(many, ["x", "y"]);
                assert_eq!(n, 3);
            }
            T::Other { .. } => panic!("wrong subcommand"),
        }
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_file() {
        let e = with_file("listen_addr = \"a\"\n", &["t", "run"]).unwrap_err();
        assert!(e.contains("unknown key `listen_addr`"), "{e}");
        assert!(e.contains(".toml"), "{e}");
        let e = with_file("listen = \"a\"\nn = \"many\"\n", &["t", "run"]).unwrap_err();
        assert!(e.contains("key `n`") && e.contains("many"), "{e}");
        let e = with_file("flag = 1\n", &["t", "run"]).unwrap_err();
        assert!(e.contains("key `flag`: a switch"), "{e}");
        let e = with_file("listen = [\"a\"]\n", &["t", "run"]).unwrap_err();
        assert!(e.contains("takes one value"), "{e}");
        let e = with_file("listen = \n", &["t", "run"]).unwrap_err();
        assert!(e.contains("line 1"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn commands_without_the_flag_are_left_alone() {
        let cmd = <T as clap::CommandFactory>::command();
        let argv = os(&["t", "other", "--listen", "x", "--config", "y"]);
        let e = expand(&cmd, argv.clone()).unwrap();
        assert_eq!(e.argv, argv);
        assert!(e.file.is_none());
    }
}
