//! The documents' promises stay true to each other: the README's promise is
//! docs/THREAT-MODEL.md's, word for word, every test the threat model names exists, and every
//! relative markdown link of the README and of docs/ (its subdirectories included) leads to
//! a file that exists and, with `#anchor`, to a heading of it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const README: &str = include_str!("../../../../README.md");
const THREAT: &str = include_str!("../../../../docs/THREAT-MODEL.md");

fn words(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

#[test]
fn readme_promise_is_the_threat_models_word_for_word() {
    let promise = THREAT
        .split("<!-- promise -->")
        .nth(1)
        .and_then(|s| s.split("<!-- /promise -->").next())
        .expect("THREAT-MODEL.md marks its promise with <!-- promise --> ... <!-- /promise -->");
    let want = words(promise);
    assert!(want.len() > 20, "the promise is a paragraph: {promise}");
    let readme = words(README);
    assert!(
        readme.windows(want.len()).any(|w| w == want.as_slice()),
        "README.md does not carry the threat model's promise word for word:\n{promise}"
    );
}

/// Every `file.rs::test_name` and every test named in backquotes after a file in the threat
/// model is a function in that file.
#[test]
fn tests_named_by_the_threat_model_exist() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut checked = 0;
    for (i, _) in THREAT.match_indices("::") {
        // `crates/x/tests/y.rs::name` (a path, then a test name)
        let before = &THREAT[..i];
        let Some(start) = before.rfind('`') else {
            continue;
        };
        let path = &before[start + 1..];
        if !path.ends_with(".rs") {
            continue;
        }
        let after = &THREAT[i + 2..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let src = std::fs::read_to_string(format!("{root}/{path}"))
            .unwrap_or_else(|e| panic!("THREAT-MODEL.md names {path}: {e}"));
        assert!(
            src.contains(&format!("fn {name}(")),
            "THREAT-MODEL.md names {path}::{name}, which does not exist"
        );
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} references checked");
}

/// GitHub's anchor for a heading: lower case, only letters, digits, `-`, `_` and spaces
/// kept, spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A markdown text's lines outside fenced code blocks, with their numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .map(|(i, l)| (i + 1, l))
        .collect()
}

/// The anchors of a markdown text's headings (a repeated one numbered `-1`, `-2`, ...).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, l) in prose(text) {
        let hashes = l.chars().take_while(|&c| c == '#').count();
        let Some(h) = l[hashes..]
            .strip_prefix(' ')
            .filter(|_| (1..=6).contains(&hashes))
        else {
            continue;
        };
        let s = slug(h);
        let n = seen.entry(s.clone()).or_insert(0);
        out.insert(if *n == 0 {
            s.clone()
        } else {
            format!("{s}-{n}")
        });
        *n += 1;
    }
    out
}

/// The relative link targets of a markdown text, `(line, target)`: `](target)` outside code
/// blocks and code spans, no URL scheme.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, l) in prose(text) {
        // code spans out: every other piece between backquotes
        let plain: String = l
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, p)| p)
            .collect::<Vec<_>>()
            .join(" ");
        for piece in plain.split("](").skip(1) {
            let Some(end) = piece.find(')') else { continue };
            let t = &piece[..end];
            let scheme = t
                .split_once(':')
                .is_some_and(|(s, _)| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphabetic()));
            if !scheme && !t.is_empty() && !t.contains(char::is_whitespace) {
                out.push((n, t.to_string()));
            }
        }
    }
    out
}

/// Every `.md` file under `dir`, its subdirectories included.
fn markdown_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            markdown_under(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

/// What is wrong with each relative link of `text` (in the file `file`).
fn broken_links(file: &Path, text: &str) -> Vec<String> {
    let mut bad = Vec::new();
    for (n, t) in links(text) {
        let (path, anchor) = t.split_once('#').unwrap_or((&t, ""));
        let target = if path.is_empty() {
            file.to_path_buf()
        } else {
            file.parent().unwrap().join(path)
        };
        let at = format!("{}:{n}: ({t})", file.display());
        if !target.exists() {
            bad.push(format!("{at}: no such file"));
        } else if !anchor.is_empty() && target.extension().is_some_and(|x| x == "md") {
            let doc = std::fs::read_to_string(&target).unwrap();
            if !anchors(&doc).contains(anchor) {
                bad.push(format!("{at}: no heading with that anchor"));
            }
        }
    }
    bad
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let mut files = vec![root.join("README.md")];
    markdown_under(&root.join("docs"), &mut files);
    assert!(files.len() >= 10, "{files:?}");
    let mut checked = 0;
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        checked += links(&text).len();
        bad.extend(broken_links(f, &text));
    }
    assert!(checked >= 50, "only {checked} links checked");
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

/// The link checker itself: anchors as GitHub makes them, code left out, faults found.
#[test]
fn the_link_checker_finds_a_broken_link() {
    let doc = "# Peers (`nena bench peers`)\n## How to read it\n## How to read it\n```\n# not a heading [x](nowhere.md)\n```\nSee [a](#peers-nena-bench-peers), [b](#how-to-read-it-1), `[c](nowhere.md)`, [d](https://x.invalid/y).\n";
    assert_eq!(
        anchors(doc),
        [
            "how-to-read-it",
            "how-to-read-it-1",
            "peers-nena-bench-peers"
        ]
        .map(String::from)
        .into()
    );
    let l: Vec<String> = links(doc).into_iter().map(|(_, t)| t).collect();
    assert_eq!(l, ["#peers-nena-bench-peers", "#how-to-read-it-1"]);
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("a.md");
    std::fs::write(&f, doc).unwrap();
    assert!(broken_links(&f, doc).is_empty());
    let bad = "[x](#how-to-read-it-2) [y](b.md) [z](a.md#peers-nena-bench-peers)";
    let faults = broken_links(&f, bad);
    assert_eq!(faults.len(), 2, "{faults:?}");
}
