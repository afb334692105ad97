//! `nena lab run`: the LTE study's outage scenario, shortened, end to end (root, as CI),
//! and bad scenario files refused with one line. Each lab run uses its own prefix and is
//! torn down by the command itself; a guard runs `nena lab down` in case it is not.
use crate::harness::nena;

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn scenario(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name)
        .display()
        .to_string()
}

/// `nena lab down` for the prefix, and the output directory removed, on drop.
struct Cleanup(String, tempfile::TempDir);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = nena(&["lab", "down", "--prefix", &self.0]);
    }
}

fn namespaces_with(prefix: &str) -> usize {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(&format!("{prefix}-")))
        .count()
}

/// `nena lab run FILE --out OUT --prefix PREFIX --json EXTRA...`, which must succeed; its
/// summary.
fn lab_run(file: &str, out: &std::path::Path, prefix: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "lab",
        "run",
        file,
        "--out",
        out.to_str().unwrap(),
        "--prefix",
        prefix,
        "--json",
    ];
    args.extend_from_slice(extra);
    let o = nena(&args);
    assert!(
        o.status.success(),
        "nena lab run failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The study's measurement 3 at a fifth of its length (24 s; the untrusted "ppp1" link down
/// 2 s at 3.2 s and at 13.4 s) with nena's default mode: the session survives, every byte
/// is verified, ppp1 carries nothing while down and carries data again within 2 s of each
/// recovery, ppp0 carries data during each outage; nothing of the lab is left.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn lte_outages_shortened_survive_and_recover_within_two_seconds() {
    let prefix = nena_lab::unique_prefix().replace("nt", "ns");
    let c = Cleanup(prefix.clone(), tempfile::tempdir().unwrap());
    let out = c.1.path().join("out");
    let v = lab_run(
        &scenario("lte-outages.toml"),
        &out,
        &prefix,
        &["--scale", "0.2", "--only", "nena-aead"],
    );
    let written: Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(v, written, "--json prints what summary.json holds");
    let run = &v["runs"][0];
    assert_eq!(run["name"], "nena-aead");
    assert_eq!(run["outcome"]["mode"], "aead");
    assert_eq!(run["outcome"]["verified"], true);
    assert!(
        run["outcome"]["bytes"].as_u64().unwrap() > 1_000_000,
        "{run}"
    );
    let outages = run["outages"].as_array().unwrap();
    assert_eq!(outages.len(), 2, "{run}");
    let series = |link: &str| -> Vec<(f64, f64)> {
        run["links"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["link"] == link)
            .unwrap_or_else(|| panic!("no {link} link in {run}"))["series_mbit_s"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_f64().unwrap(), p[1].as_f64().unwrap()))
            .collect()
    };
    let trusted = series("trusted");
    for o in outages {
        assert_eq!(o["link"], "untrusted");
        assert_eq!(
            o["bytes_while_down"], 0,
            "ppp1 carried data while down: {o}"
        );
        let back = o["recovered_after_s"]
            .as_f64()
            .unwrap_or_else(|| panic!("ppp1 never carried data again: {o}"));
        assert!(
            back <= 2.0,
            "ppp1 carried data again only after {back:.2}s: {o}"
        );
        // ppp0 kept the connection going: data in the 1 s bins wholly inside the outage.
        // (Not its full rate: for about a second after ppp1 dies, the data stranded on it
        // holds the connection's window until MPTCP reinjects it on ppp0. How much follows
        // in the bin left depends on that reinjection's timing: 0.046 Mbit/s, about four
        // segments, in a fresh-clone CI rehearsal on a loaded 2-core host. The claim checked
        // is that the connection did not stall, not a rate.)
        let (down, up) = (o["down_s"].as_f64().unwrap(), o["up_s"].as_f64().unwrap());
        let during: f64 = trusted
            .iter()
            .filter(|(t, _)| *t - 1.0 >= down && *t <= up)
            .map(|(_, m)| m)
            .sum();
        assert!(during > 0.0, "ppp0 carried nothing during the outage: {o}");
    }
    for f in ["run.json", "samples.json", "trusted.pcap", "untrusted.pcap"] {
        let p = out.join("nena-aead").join(f);
        assert!(
            std::fs::metadata(&p).map(|m| m.len() > 0).unwrap_or(false),
            "{} missing or empty",
            p.display()
        );
    }
    assert_eq!(namespaces_with(&prefix), 0, "the run left its lab behind");
}

/// Bad scenario files: one line on stderr, exit status 2, no lab built.
#[test]
fn bad_scenario_files_are_refused_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let cases = [
        (
            write(
                "unknown.toml",
                "duration = \"5s\"\ncolour = 1\n[[runs]]\nname = \"a\"\ntraffic = \"mptcp\"\n",
            ),
            "unknown field `colour`",
        ),
        (
            write(
                "order.toml",
                "duration = \"5s\"\n[[runs]]\nname = \"a\"\ntraffic = \"mptcp\"\n\
                 [[events]]\nat = \"3s\"\nlink = \"untrusted\"\naction = \"down\"\n\
                 [[events]]\nat = \"1s\"\nlink = \"untrusted\"\naction = \"up\"\n",
            ),
            "comes before",
        ),
        (
            write(
                "negative.toml",
                "duration = \"-5s\"\n[[runs]]\nname = \"a\"\ntraffic = \"mptcp\"\n",
            ),
            "negative",
        ),
        (
            dir.path().join("absent.toml").display().to_string(),
            "reading the scenario",
        ),
    ];
    for (file, want) in cases {
        let o = nena(&[
            "lab",
            "run",
            &file,
            "--out",
            dir.path().join("o").to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{file}: {err}");
        assert!(err.contains(want), "{want:?} not in {err:?}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    let o = nena(&[
        "lab",
        "run",
        &scenario("fig18.toml"),
        "--out",
        dir.path().join("o").to_str().unwrap(),
        "--scale",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(2));
}

/// `subflows = 1` keeps a kernel-MPTCP run on its first subflow (the trusted link), where
/// the default run of the same scenario has a subflow on each link: the control of the
/// fairness experiment (scenarios/fairness-shared.toml, `mptcp-1sf`).
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn one_subflow_runs_stay_on_the_trusted_link() {
    let prefix = nena_lab::unique_prefix().replace("nt", "ns");
    let c = Cleanup(prefix.clone(), tempfile::tempdir().unwrap());
    let file = c.1.path().join("one.toml");
    std::fs::write(
        &file,
        "duration = \"3s\"\n\
         [[runs]]\nname = \"one\"\ntraffic = \"mptcp\"\nsubflows = 1\n\
         [[runs]]\nname = \"two\"\ntraffic = \"mptcp\"\n",
    )
    .unwrap();
    let out = c.1.path().join("out");
    let v = lab_run(file.to_str().unwrap(), &out, &prefix, &[]);
    let links = |i: usize| -> Vec<(String, u64, u64)> {
        v["runs"][i]["links"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["subflows"].as_u64().unwrap() > 0)
            .map(|l| {
                (
                    l["link"].as_str().unwrap().to_string(),
                    l["subflows"].as_u64().unwrap(),
                    l["bytes"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    // Which links have a subflow (not which carried bytes: on bare veth a CPU-bound run
    // may leave the second subflow idle, as the kernel's scheduler fills the first).
    let one = links(0);
    assert_eq!(
        one.iter().map(|l| (l.0.as_str(), l.1)).collect::<Vec<_>>(),
        [("trusted", 1)],
        "subflows = 1: {one:?}"
    );
    assert!(one[0].2 > 0, "subflows = 1 carried nothing: {one:?}");
    let two = links(1);
    assert_eq!(
        two.iter().map(|l| (l.0.as_str(), l.1)).collect::<Vec<_>>(),
        [("trusted", 1), ("untrusted", 1)],
        "the default: {two:?}"
    );
    assert_eq!(namespaces_with(&prefix), 0, "the run left its lab behind");
}

/// `[lab] trusted_family = "ipv6"`, `untrusted_family = "ipv4"`: each run connects to the
/// server's address of its link's family (a tcp run over the untrusted link to 198.18.3.2,
/// the others over the trusted link to 2001:2:0:3::2), and the captures show each link
/// carrying its family alone.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn runs_in_a_mixed_family_lab_reach_the_server_by_their_links_family() {
    let prefix = nena_lab::unique_prefix().replace("nt", "ns");
    let c = Cleanup(prefix.clone(), tempfile::tempdir().unwrap());
    let file = c.1.path().join("mixed.toml");
    std::fs::write(
        &file,
        "duration = \"1s\"\n\
         [lab]\ntrusted_family = \"ipv6\"\nuntrusted_family = \"ipv4\"\n\
         [capture]\nlinks = [\"trusted\", \"untrusted\"]\n\
         [[runs]]\nname = \"tcp-u\"\ntraffic = \"tcp\"\nlink = \"untrusted\"\n\
         [[runs]]\nname = \"tcp-t\"\ntraffic = \"tcp\"\nlink = \"trusted\"\n\
         [[runs]]\nname = \"nena\"\ntraffic = \"nena\"\nmode = \"aead\"\n",
    )
    .unwrap();
    let out = c.1.path().join("out");
    let v = lab_run(file.to_str().unwrap(), &out, &prefix, &[]);
    for r in v["runs"].as_array().unwrap() {
        assert!(
            r["outcome"]["bytes"].as_u64().unwrap_or(0) > 0,
            "run {} moved nothing: {r}",
            r["name"]
        );
    }
    assert_eq!(
        v["runs"][2]["outcome"]["verified"], true,
        "{}",
        v["runs"][2]
    );
    let frames = |run: &str, link: &str, filter: &str| -> usize {
        let cap = out.join(run).join(format!("{link}.pcap"));
        assert!(cap.exists(), "no capture {}", cap.display());
        let o = Command::new("tcpdump")
            .args(["-nr", cap.to_str().unwrap(), filter])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).lines().count()
    };
    assert!(frames("tcp-u", "untrusted", "ip and tcp") > 0);
    assert_eq!(frames("tcp-u", "trusted", "tcp"), 0);
    for run in ["tcp-t", "nena"] {
        assert!(frames(run, "trusted", "ip6 and tcp") > 0, "{run}");
        assert_eq!(
            frames(run, "trusted", "ip"),
            0,
            "{run}: IPv4 on an IPv6-only link"
        );
    }
    assert_eq!(namespaces_with(&prefix), 0, "the run left its lab behind");
}
