//! contrib/grafana/nena-dashboard.json against the metrics the binary exports: every metric
//! a query of the dashboard names is a sample of a family that nena's metrics register
//! (`Metrics::families`, what `--metrics` serves for every role once the family has a
//! series), and the families the dashboard exists for are all queried. No root, no process.

use nena_transport::ops::metrics::{Metrics, Role};
use std::collections::BTreeSet;

fn dashboard() -> serde_json::Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../contrib/grafana/nena-dashboard.json"
    );
    let text = std::fs::read_to_string(path).expect("the dashboard");
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

/// Every PromQL text of the dashboard: the panels' queries and the variables' definitions.
fn queries(d: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    for panel in d["panels"].as_array().expect("panels") {
        let targets = panel["targets"].as_array().expect("a panel's targets");
        assert!(
            !targets.is_empty(),
            "a panel without a query: {}",
            panel["title"]
        );
        for t in targets {
            out.push(t["expr"].as_str().expect("a target's expr").to_string());
        }
    }
    for v in d["templating"]["list"].as_array().expect("variables") {
        out.push(
            v["definition"]
                .as_str()
                .expect("a variable's query")
                .to_string(),
        );
    }
    out
}

/// The `nena_*` names in a query.
fn metric_names(q: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = q;
    while let Some(i) = rest.find("nena_") {
        let name: String = rest[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[i + name.len()..];
        out.push(name);
    }
    out
}

/// The sample names of every family nena registers (the same for every role), those
/// without a series yet included: a fresh `nena serve --metrics` scrape leaves those out.
fn exported() -> BTreeSet<String> {
    Metrics::new(Role::Serve)
        .families()
        .iter()
        .flat_map(|f| f.samples())
        .collect()
}

#[test]
fn every_query_of_the_grafana_dashboard_names_a_metric_nena_registers() {
    let served = exported();
    assert!(served.contains("nena_sessions_total"), "{served:?}");

    let d = dashboard();
    let queries = queries(&d);
    let mut named = BTreeSet::new();
    for q in &queries {
        let names = metric_names(q);
        assert!(!names.is_empty(), "a query that names no nena metric: {q}");
        for n in names {
            assert!(
                served.contains(&n),
                "{n} (in `{q}`) is not registered; nena exports {served:?}"
            );
            named.insert(n);
        }
    }
    // What the dashboard is for (issue 58): sessions by outcome, bytes per path and the
    // trusted share, waits for the trusted link, refusals, integrity failures, handshake p99.
    for want in [
        "nena_sessions_total",
        "nena_bytes_total",
        "nena_sessions_waiting_for_trusted_link",
        "nena_trusted_link_waits_total",
        "nena_refusals_total",
        "nena_integrity_failures_total",
        "nena_handshake_seconds_bucket",
    ] {
        assert!(named.contains(want), "no panel queries {want}");
    }
    assert!(
        queries
            .iter()
            .any(|q| q.contains("histogram_quantile(0.99") && q.contains("nena_handshake")),
        "the handshake's p99"
    );
    assert!(
        queries
            .iter()
            .any(|q| q.contains("path=\"trusted\"") && q.contains(" / ")),
        "the trusted share"
    );
    // The datasource is an input of the import, not a uid of somebody's Grafana.
    assert_eq!(d["__inputs"][0]["name"], "DS_PROMETHEUS");
    for p in d["panels"].as_array().unwrap() {
        assert_eq!(p["datasource"]["uid"], "${DS_PROMETHEUS}", "{}", p["title"]);
    }
}
