//! docs/ARCHITECTURE.md matches the code: every workspace crate has its row, and the table of
//! crate edges is exactly what `cargo metadata` reports (normal dependencies between the
//! workspace's own crates, optional ones included).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

const ARCH: &str = include_str!("../../../../docs/ARCHITECTURE.md");

type Edges = BTreeMap<String, BTreeSet<String>>;

/// The edges `cargo metadata` reports.
fn from_cargo() -> Edges {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(&root)
        .output()
        .expect("running cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pkgs = m["packages"].as_array().unwrap();
    let names: BTreeSet<String> = pkgs
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    pkgs.iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap().to_string())
                .filter(|n| names.contains(n))
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

/// The rows of the "Crate edges" table: `` | `a` | `b`, `c` | `` (or `none`).
fn from_doc() -> Edges {
    let section = ARCH
        .split("## Crate edges")
        .nth(1)
        .expect("ARCHITECTURE.md has a `## Crate edges` section");
    let section = section.split("\n## ").next().unwrap();
    let crate_name = |cell: &str| cell.trim().trim_matches('`').to_string();
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').collect();
            let deps = if cells[2].trim() == "none" {
                BTreeSet::new()
            } else {
                cells[2].split(',').map(crate_name).collect()
            };
            (crate_name(cells[1]), deps)
        })
        .collect()
}

#[test]
fn the_crate_edges_in_the_doc_are_cargos() {
    let (cargo, doc) = (from_cargo(), from_doc());
    assert!(cargo.len() >= 10, "workspace crates: {cargo:?}");
    for (name, deps) in &cargo {
        assert_eq!(
            doc.get(name),
            Some(deps),
            "docs/ARCHITECTURE.md, Crate edges: `{name}` depends on {deps:?} (cargo metadata)"
        );
    }
    for name in doc.keys() {
        assert!(
            cargo.contains_key(name),
            "docs/ARCHITECTURE.md, Crate edges: `{name}` is no workspace crate"
        );
    }
}

#[test]
fn every_crate_has_its_row() {
    for name in from_cargo().keys() {
        assert!(
            ARCH.contains(&format!("| `{name}` (`crates/")),
            "docs/ARCHITECTURE.md's crate table has no row for `{name}`"
        );
    }
}

#[test]
fn the_doc_parser_reads_a_table() {
    // The checks above are only as good as the parser: a table it misreads must not pass.
    let doc = from_doc();
    assert!(doc.values().any(|d| !d.is_empty()), "{doc:?}");
    assert!(doc.values().any(|d| d.is_empty()), "{doc:?}");
}
