//! docs/ARCHITECTURE.md matches the code: every workspace crate has its paragraph under
//! `## Crates`, which begins (after the crate's name, directory and I/O) with the first
//! sentence of the crate's own documentation (the `//!` lines of its `lib.rs`, for the
//! binary-only `nena` its `main.rs`) and stays short (at most [`MAX_PARAGRAPH`] characters);
//! and the table of crate edges is exactly what `cargo metadata` reports (normal dependencies
//! between the workspace's own crates, optional ones included).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

const ARCH: &str = include_str!("../../../../docs/ARCHITECTURE.md");

/// The longest a crate's paragraph may be, in characters (whitespace runs counted as one).
const MAX_PARAGRAPH: usize = 700;

type Edges = BTreeMap<String, BTreeSet<String>>;

/// `cargo metadata --no-deps` of the workspace.
fn metadata() -> serde_json::Value {
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
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The edges `cargo metadata` reports.
fn from_cargo() -> Edges {
    let m = metadata();
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

/// Each workspace crate's root source file: its library's, else its binary's.
fn crate_roots() -> BTreeMap<String, String> {
    let m = metadata();
    let root = |p: &serde_json::Value, kind: &str| {
        p["targets"].as_array().unwrap().iter().find_map(|t| {
            let kinds = t["kind"].as_array().unwrap();
            kinds
                .iter()
                .any(|k| k == kind)
                .then(|| t["src_path"].as_str().unwrap().to_string())
        })
    };
    m["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let src = root(p, "lib").or_else(|| root(p, "bin")).unwrap();
            (p["name"].as_str().unwrap().to_string(), src)
        })
        .collect()
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first sentence of a crate's `//!` documentation: its first paragraph up to the first
/// `. ` before a capital letter (so "Kato et al. (SECURWARE" stays whole), rustdoc's link
/// brackets dropped (`` [`skel`] `` reads `` `skel` ``), without a leading "`crate`: ".
fn first_sentence(src: &str, name: &str) -> String {
    let para: Vec<&str> = src
        .lines()
        .skip_while(|l| !l.starts_with("//!"))
        .map_while(|l| l.strip_prefix("//!"))
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .collect();
    let text = squash(&para.join(" "))
        .replace("[`", "`")
        .replace("`]", "`");
    let b = text.as_bytes();
    let end = (0..b.len().saturating_sub(2))
        .find(|&i| b[i] == b'.' && b[i + 1] == b' ' && b[i + 2].is_ascii_uppercase())
        .map_or(text.len(), |i| i + 1);
    let sentence = &text[..end];
    [format!("{name}: "), format!("`{name}`: ")]
        .iter()
        .find_map(|p| sentence.strip_prefix(p.as_str()))
        .unwrap_or(sentence)
        .to_string()
}

/// The paragraphs under `## Crates`, by crate name: `` **`name`** (`crates/dir`...): ... ``.
fn paragraphs(doc: &str) -> BTreeMap<String, String> {
    let section = doc
        .split("\n## Crates\n")
        .nth(1)
        .expect("ARCHITECTURE.md has a `## Crates` section");
    let section = section.split("\n## ").next().unwrap();
    section
        .split("\n\n")
        .filter_map(|p| {
            let rest = p.trim().strip_prefix("**`")?;
            let (name, _) = rest.split_once("`**")?;
            Some((name.to_string(), squash(p)))
        })
        .collect()
}

/// What is wrong with one crate's paragraph (`None`: nothing).
fn paragraph_fault(name: &str, dir: &str, para: &str, sentence: &str) -> Option<String> {
    let head = format!("**`{name}`** (`{dir}`");
    if !para.starts_with(&head) {
        return Some(format!("does not begin with {head}"));
    }
    let Some((_, after_head)) = para.split_once("): ") else {
        return Some("has no `): ` after its head".into());
    };
    if !after_head
        .to_lowercase()
        .starts_with(&sentence.to_lowercase())
    {
        return Some(format!(
            "does not begin (after its head) with the first sentence of its crate's docs: {sentence:?}"
        ));
    }
    let len = para.chars().count();
    (len > MAX_PARAGRAPH).then(|| format!("is {len} characters long, more than {MAX_PARAGRAPH}"))
}

#[test]
fn every_crate_has_its_paragraph_which_begins_with_its_docs_first_sentence() {
    let paras = paragraphs(ARCH);
    let roots = crate_roots();
    assert!(roots.len() >= 10, "workspace crates: {roots:?}");
    for (name, src) in &roots {
        let para = paras
            .get(name)
            .unwrap_or_else(|| panic!("docs/ARCHITECTURE.md, Crates: no paragraph for `{name}`"));
        let dir = Path::new(src)
            .ancestors()
            .find(|p| p.join("Cargo.toml").exists())
            .and_then(|p| p.file_name())
            .map(|d| format!("crates/{}", d.to_string_lossy()))
            .unwrap();
        let code = std::fs::read_to_string(src).unwrap();
        let sentence = first_sentence(&code, name);
        assert!(sentence.len() > 20, "{src}: no `//!` first sentence");
        if let Some(fault) = paragraph_fault(name, &dir, para, &sentence) {
            panic!("docs/ARCHITECTURE.md, Crates: the paragraph of `{name}` {fault}");
        }
    }
    for name in paras.keys() {
        assert!(
            roots.contains_key(name),
            "docs/ARCHITECTURE.md, Crates: `{name}` is no workspace crate"
        );
    }
}

/// The checker itself: sentences cut where they end, paragraphs found, faults named.
#[test]
fn the_paragraph_checker_finds_each_fault() {
    let src = "//! nena-x: the thing of Kato et al. (2017), sans-IO [`a`]. More here.\n//! Yet more.\n//!\n//! Later.\nfn f() {}\n";
    let s = first_sentence(src, "nena-x");
    assert_eq!(s, "the thing of Kato et al. (2017), sans-IO `a`.");
    assert_eq!(
        first_sentence("//! `nena`: the front end. A thin layer.", "nena"),
        "the front end."
    );
    let doc = "# A\n\n## Crates\n\nIntro.\n\n**`nena-x`** (`crates/x`; I/O: none): the thing of Kato\net al. (2017), sans-IO `a`. And so on.\n\n## Next\n\n**`nena-y`** (`crates/y`): no.\n";
    let p = paragraphs(doc);
    assert_eq!(p.keys().collect::<Vec<_>>(), ["nena-x"]);
    let para = &p["nena-x"];
    assert_eq!(paragraph_fault("nena-x", "crates/x", para, &s), None);
    assert!(paragraph_fault("nena-x", "crates/z", para, &s).is_some());
    assert!(paragraph_fault("nena-x", "crates/x", para, "another sentence.").is_some());
    assert!(paragraph_fault("nena-x", "crates/x", "**`nena-x`** (`crates/x`) none", &s).is_some());
    let long = format!("{para} {}", "word ".repeat(200));
    assert!(paragraph_fault("nena-x", "crates/x", &long, &s)
        .unwrap()
        .contains("characters long"));
}

#[test]
fn the_doc_parser_reads_a_table() {
    // The checks above are only as good as the parser: a table it misreads must not pass.
    let doc = from_doc();
    assert!(doc.values().any(|d| !d.is_empty()), "{doc:?}");
    assert!(doc.values().any(|d| d.is_empty()), "{doc:?}");
}
