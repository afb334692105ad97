//! `nena policy ...` and `nena bench policy` end to end (root, BPF; a network namespace of
//! their own with one veth pair; pins under a unique directory; all removed on drop).
use crate::harness::nena_cmd;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

static N: AtomicU32 = AtomicU32::new(0);

fn uniq() -> String {
    format!(
        "{}{}",
        std::process::id() % 100000,
        N.fetch_add(1, Ordering::SeqCst)
    )
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

struct Ns {
    name: String,
    pins: PathBuf,
    files: Vec<PathBuf>,
}

impl Ns {
    fn new() -> Ns {
        let u = uniq();
        let ns = Ns {
            name: format!("plx{u}"),
            pins: PathBuf::from(format!("/sys/fs/bpf/nena-cli{u}")),
            files: vec![],
        };
        for args in [
            vec!["netns", "add", &ns.name],
            vec![
                "-n", &ns.name, "link", "add", "v0", "type", "veth", "peer", "name", "v1",
            ],
            vec!["-n", &ns.name, "link", "set", "v0", "up"],
            vec!["-n", &ns.name, "link", "set", "v1", "up"],
        ] {
            let o = Command::new("ip").args(&args).output().unwrap();
            assert!(o.status.success(), "ip {args:?}: {}", text(&o).1);
        }
        ns
    }
    /// `nena policy <args> --pin-dir <pins> --netns <ns>`.
    fn policy(&self, args: &[&str]) -> Output {
        let mut c = nena_cmd();
        c.arg("policy").args(args);
        if args[0] != "check" {
            c.arg("--pin-dir")
                .arg(&self.pins)
                .args(["--netns", &self.name]);
        }
        c.output().unwrap()
    }
    fn file(&mut self, body: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!(
            "nena-policy-{}-{}.toml",
            self.name,
            self.files.len()
        ));
        std::fs::write(&p, body).unwrap();
        self.files.push(p.clone());
        p
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
        if self.pins.exists() {
            for e in std::fs::read_dir(&self.pins)
                .into_iter()
                .flatten()
                .flatten()
            {
                let _ = std::fs::remove_file(e.path());
            }
            let _ = std::fs::remove_dir(&self.pins);
        }
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

const GOOD: &str = r#"# backup on v0's egress
[[chain]]
name = "backup-v0"
dev = "v0"
hook = "egress"
links = [
  { select = "dst", prefix = "198.18.101.0/24" },
  { select = "packet_type", all = ["pure_ack"] },
  { act = "set_backup", backup = true },
]

[[chain]]
name = "keys"
dev = "v0"
hook = "ingress"
links = [ { act = "get_connect" }, { act = "get_subflow" } ]
"#;

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn check_reports_the_line_of_an_error() {
    let mut ns = Ns::new();
    let good = ns.file(GOOD);
    let o = ns.policy(&["check", good.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    let bad = ns.file(&GOOD.replace(
        "\"set_backup\", backup = true",
        "\"set_backup\", backup = \"yes\"",
    ));
    let o = ns.policy(&["check", bad.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("nena: ") && err.contains("line 9: `backup` must be true or false"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    let o = ns.policy(&["check", "/nonexistent/policy.toml"]);
    assert_eq!(o.status.code(), Some(2));
}

/// Tenants on the command line: `check` counts them; `load --tenant` refuses a tenant the
/// file does not define, a tenant that is not loaded, and a cgroup that does not exist,
/// each in one line with status 2, and applies nothing.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn tenant_errors_on_the_command_line() {
    let mut ns = Ns::new();
    let with = |who: &str| {
        format!(
            "[[tenant]]\nname = \"t\"\n{who}\n\n{}",
            GOOD.replace("name = \"keys\"", "name = \"keys\"\ntenant = \"t\"")
        )
    };
    let f = ns.file(&with("uid = 4242"));
    let o = ns.policy(&["check", f.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(
        text(&o).0.contains("2 chain(s), 1 tenant(s), ok"),
        "{:?}",
        text(&o)
    );
    let o = ns.policy(&["attach", "--dev", "v0"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let one_line = |o: &std::process::Output, want: &str| {
        let (_, err) = text(o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.starts_with("nena: ") && err.contains(want), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    };
    let o = ns.policy(&["load", f.to_str().unwrap(), "--tenant", "z"]);
    one_line(&o, "no tenant `z` in the file");
    let o = ns.policy(&["load", f.to_str().unwrap(), "--tenant", "t"]);
    assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));
    assert!(
        text(&o).1.contains("tenant `t` is not loaded"),
        "{:?}",
        text(&o)
    );
    let g = ns.file(&with("cgroup = \"/nena-no-such-cgroup-here\""));
    let o = ns.policy(&["load", g.to_str().unwrap()]);
    one_line(
        &o,
        "line 1: tenant `t`: no cgroup /nena-no-such-cgroup-here (make it: mkdir -p /",
    );
    assert!(
        text(&o).1.contains("nena-no-such-cgroup-here;"),
        "{:?}",
        text(&o)
    );
    let o = ns.policy(&["show", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["tenants"].as_array().map(Vec::len), Some(0), "{v}");
    // loaded: show names the tenant and its chain
    let o = ns.policy(&["load", f.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    let o = ns.policy(&["show"]);
    let out = text(&o).0;
    assert!(out.contains("tenant t (id 1): uid 4242"), "{out}");
    assert!(out.contains("v0 ingress tenant t: chain \"keys\""), "{out}");
    let o = ns.policy(&["load", f.to_str().unwrap(), "--tenant", "t"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(
        text(&o).0.contains("loaded 1 chain(s) of tenant t"),
        "{:?}",
        text(&o)
    );
    let o = ns.policy(&["detach", "--dev", "v0"]);
    assert!(o.status.success(), "{:?}", text(&o));
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn attach_load_show_events_detach() {
    let mut ns = Ns::new();
    let o = ns.policy(&["attach", "--dev", "v0"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(ns.pins.join("chains").exists() && ns.pins.join("hooks").exists());
    let good = ns.file(GOOD);
    let o = ns.policy(&["load", good.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    let show = |ns: &Ns| -> serde_json::Value {
        let o = ns.policy(&["show", "--json"]);
        assert!(o.status.success(), "{:?}", text(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let v = show(&ns);
    let hooks = v["hooks"].as_array().unwrap();
    assert_eq!(hooks.len(), 2);
    let eg = hooks.iter().find(|h| h["hook"] == "egress").unwrap();
    assert_eq!(eg["dev"], "v0");
    assert_eq!(eg["chain"], "backup-v0");
    assert_eq!(eg["links"].as_array().unwrap().len(), 3);
    assert!(eg["links"][0]["link"]
        .as_str()
        .unwrap()
        .contains("198.18.101.0/24"));
    // a chain for a device that is not attached: exit 2, nothing applied
    let bad = ns.file(&format!("{GOOD}\n[[chain]]\nname = \"x\"\ndev = \"v1\"\nhook = \"egress\"\nlinks = [ {{ act = \"record\" }} ]\n"));
    let o = ns.policy(&["load", bad.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("line 18") && err.contains("v1 is not attached"),
        "{err}"
    );
    assert_eq!(show(&ns), v, "nothing changed");
    // text show names the chain; events end on their own
    let o = ns.policy(&["show"]);
    assert!(
        text(&o).0.contains("v0 egress: chain \"backup-v0\""),
        "{:?}",
        text(&o)
    );
    let o = ns.policy(&["events", "--timeout", "0.2", "--json"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let o = ns.policy(&["events", "--timeout", "-1"]);
    assert_eq!(o.status.code(), Some(2));
    // detach: hooks off, pins gone
    let o = ns.policy(&["detach", "--dev", "v0"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(!ns.pins.exists(), "pins left behind");
    let o = ns.policy(&["show"]);
    assert_eq!(o.status.code(), Some(1));
    let o = ns.policy(&["attach", "--dev", "nosuchdev"]);
    assert_eq!(o.status.code(), Some(2));
}

/// `nena bench policy --json`, shortened: every link acting and (all but `record`) skipping,
/// the actors that rewrite frames timed in single runs, chains whose links all act, every
/// figure at both hooks with its ratio to the dispatcher of the same run, and the verdict
/// consistent with the figures. (Whether a missed target exits 1 is unit-tested on synthetic
/// figures in `cmd/bench/policy.rs`: this short run on a shared host may meet or miss them.)
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn bench_policy_json() {
    let o = nena_cmd()
        .args([
            "bench",
            "policy",
            "--json",
            "--repeat",
            "200",
            "--batches",
            "3",
            "--singles",
            "2",
            "--no-check",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let results = v["results"].as_array().unwrap();
    let names: Vec<&str> = results
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "dispatcher",
            "subflow",
            "ip_pair",
            "src",
            "dst",
            "sequence",
            "packet_type",
            "rate_limit",
            "set_backup",
            "blk_subflow",
            "add_subflow",
            "get_connect",
            "get_subflow",
            "record",
            "chain-2",
            "chain-4",
            "chain-8",
        ]
    );
    let disp = &results[0]["act"];
    let d = [
        disp["ingress"]["ns"].as_f64().unwrap(),
        disp["egress"]["ns"].as_f64().unwrap(),
    ];
    assert!(d.iter().all(|x| x.is_finite() && *x > 0.0), "{disp}");
    let mut noise = vec![];
    for r in &results[1..] {
        let name = r["name"].as_str().unwrap();
        let rewrites = ["rate_limit", "set_backup", "blk_subflow", "add_subflow"].contains(&name);
        let chain = name.starts_with("chain-");
        let method = if rewrites || name == "chain-4" || name == "chain-8" {
            "single"
        } else {
            "batch"
        };
        assert_eq!(r["act"]["method"], method, "{r}");
        assert_eq!(r["skip"].is_null(), name == "record" || chain, "{r}");
        for (what, m) in [("act", &r["act"]), ("skip", &r["skip"])] {
            if m.is_null() {
                continue;
            }
            for (i, hook) in ["ingress", "egress"].iter().enumerate() {
                let f = &m[hook];
                let ns = f["ns"].as_f64().unwrap();
                let ratio = f["ratio"].as_f64().unwrap();
                assert!(ns.is_finite() && ratio.is_finite(), "{r}");
                assert!((ratio - ns / d[i]).abs() < 1e-9, "{r}");
                assert_eq!(f["noise"], ns < 0.0, "{r}");
                if ns < 0.0 {
                    noise.push(format!("{name} {what} {hook}"));
                }
                assert!(f["samples"].as_u64().unwrap() >= 3, "{r}");
            }
        }
        if chain {
            let n: usize = name[6..].parse().unwrap();
            assert_eq!(r["links"].as_array().unwrap().len(), n, "{r}");
        }
        if name == "chain-8" {
            // eight links that all act, three of them rewriting the frame: never below noise
            for hook in ["ingress", "egress"] {
                assert!(r["act"][hook]["ratio"].as_f64().unwrap() > 0.0, "{r}");
            }
        }
    }
    assert_eq!(
        v["noise"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap())
            .collect::<Vec<_>>(),
        noise
    );
    // the verdict: one target per measurement (none for the dispatcher), the larger hook's
    // ratio against the limit
    let targets = v["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 13 + 12 + 3, "{targets:?}");
    for t in targets {
        let ratio = t["ratio"].as_f64().unwrap();
        let limit = t["limit"].as_f64().unwrap();
        assert!(limit > 0.0, "{t}");
        assert_eq!(t["pass"], ratio <= limit, "{t}");
    }
    let chain8 = targets.iter().find(|t| t["name"] == "chain-8").unwrap();
    let c8 = &results[16]["act"];
    let worst = c8["ingress"]["ratio"]
        .as_f64()
        .unwrap()
        .max(c8["egress"]["ratio"].as_f64().unwrap());
    assert!(
        (chain8["ratio"].as_f64().unwrap() - worst).abs() < 1e-12,
        "{chain8}"
    );
    assert_eq!(v["targets_met"], targets.iter().all(|t| t["pass"] == true));
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn default_pins_are_per_namespace() {
    // two namespaces, each with a v0 of the same interface index: separate maps by default
    let a = Ns::new();
    let b = Ns::new();
    let run = |ns: &Ns, args: &[&str]| -> Output {
        nena_cmd()
            .arg("policy")
            .args(args)
            .args(["--netns", &ns.name])
            .output()
            .unwrap()
    };
    for ns in [&a, &b] {
        let o = run(ns, &["attach", "--dev", "v0"]);
        assert!(o.status.success(), "{:?}", text(&o));
    }
    let dir = |ns: &Ns| -> String {
        let o = run(ns, &["show", "--json"]);
        assert!(o.status.success(), "{:?}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["pin_dir"].as_str().unwrap().to_string()
    };
    let (da, db) = (dir(&a), dir(&b));
    assert_ne!(da, db);
    assert!(da.starts_with("/sys/fs/bpf/nena/net-"), "{da}");
    for ns in [&a, &b] {
        let o = run(ns, &["detach", "--dev", "v0"]);
        assert!(o.status.success(), "{:?}", text(&o));
    }
    assert!(!std::path::Path::new(&da).exists() && !std::path::Path::new(&db).exists());
    // Under `ip netns exec` (a private /sys without the BPF filesystem) attach refuses, saying
    // why and what to do, and leaves the device as it was.
    let o = std::process::Command::new("ip")
        .args(["netns", "exec", &a.name, env!("CARGO_BIN_EXE_nena")])
        .args(["policy", "attach", "--dev", "v0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("--netns NAME"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let stdout = |cmd: &str, args: &[&str]| {
        let o = std::process::Command::new(cmd)
            .args(["-n", &a.name])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(!stdout("ip", &["link", "show", "dev", "v0"]).contains("xdp"));
    assert!(!stdout("tc", &["qdisc", "show", "dev", "v0"]).contains("clsact"));
}
