//! Layers that only point down: a crate's top-level modules (its rooms) stand in layers,
//! and a source file may refer (by the references [`module_cycles`] reads: `use`, paths in
//! code, re-exports followed to their definitions, test code left out) to files of its own
//! room, of rooms of its layer and of layers below, never above. Every room of a layered
//! crate must have its layer: a new module is placed on purpose. The crate root (`lib.rs`)
//! only declares and re-exports, and is in no layer. The test fails naming every reference
//! that points up, with its file and line.
//!
//! [`module_cycles`]: crate::module_cycles

use crate::module_cycles::file_edges;
use std::path::{Path, PathBuf};

/// nena-transport's rooms from the bottom up (docs/ARCHITECTURE.md, "Layers inside
/// nena-transport").
const TRANSPORT: &[&[&str]] = &[
    // leaves every layer may use
    &["text"],
    // the session's own protocol, sans-IO: messages, targets, replies
    &["wire"],
    // a session: its protected halves (with copies and handshake), errors, keys, names
    &["stream", "error", "keys", "resolve", "dns"],
    // opening sessions over kernel MPTCP
    &["conn"],
    // running a server: access rules, metrics, stops
    &["ops"],
    // what sessions are used for
    &["app", "proxy", "launch", "baseline"],
    // the test helpers, over everything
    &["testing"],
];

/// The room of a source file: the first component of its path under `src`, without `.rs`;
/// `None` for the crate root.
fn room(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    if rel.components().count() == 1 && (first == "lib.rs" || first == "main.rs") {
        return None;
    }
    Some(first.trim_end_matches(".rs").to_string())
}

/// Every reference that points up a layer, and every room without a layer, in the crate
/// rooted at `root_file` (its `src/lib.rs`).
fn upward(root_file: &Path, base: &Path, layers: &[&[&str]]) -> Vec<String> {
    let src = root_file.parent().unwrap();
    let layer_of = |room: &str| layers.iter().position(|l| l.contains(&room));
    let (files, edges) = file_edges(root_file, base);
    let mut found = Vec::new();
    let mut unplaced: Vec<String> = files
        .iter()
        .filter_map(|f| room(src, f))
        .filter(|r| layer_of(r).is_none())
        .collect();
    unplaced.dedup();
    for r in unplaced {
        found.push(format!("room `{r}` has no layer: place it in the table"));
    }
    for (from, tos) in &edges {
        let Some(a) = room(src, from) else { continue };
        for (to, why) in tos {
            let Some(b) = room(src, to) else { continue };
            if let (Some(la), Some(lb)) = (layer_of(&a), layer_of(&b)) {
                if lb > la {
                    let to: PathBuf = to.strip_prefix(base).unwrap_or(to).to_path_buf();
                    found.push(format!(
                        "{why} -> {}: `{a}` (layer {la}) points up to `{b}` (layer {lb})",
                        to.display()
                    ));
                }
            }
        }
    }
    found
}

#[test]
fn nena_transport_points_only_down() {
    let base = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .canonicalize()
        .unwrap();
    let found = upward(&base.join("crates/transport/src/lib.rs"), &base, TRANSPORT);
    assert!(found.is_empty(), "\n{}", found.join("\n"));
}

/// The checker itself: a reference down or within a layer passes, one up is named with its
/// line, one from test code does not count, and a room with no layer is named.
#[test]
fn the_checker_finds_a_reference_up_and_a_room_without_a_layer() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("top")).unwrap();
    let w = |p: &str, s: &str| std::fs::write(src.join(p), s).unwrap();
    w("lib.rs", "pub mod low;\npub mod mid;\npub mod top;\n");
    w(
        "low.rs",
        "pub struct L;\n#[cfg(test)]\nmod t { use crate::top::T; }\n",
    );
    w("mid.rs", "pub struct M(crate::low::L);\n");
    w("top/mod.rs", "mod inner;\npub use inner::T;\n");
    w(
        "top/inner.rs",
        "pub struct T(crate::mid::M, crate::low::L);\n",
    );
    let layers: &[&[&str]] = &[&["low"], &["mid"], &["top"]];
    let found = upward(&src.join("lib.rs"), dir.path(), layers);
    assert!(found.is_empty(), "{found:?}");
    // low now names top's type outside its tests: one reference up, from line 2.
    w("low.rs", "pub struct L;\npub fn f(_: crate::top::T) {}\n");
    let found = upward(&src.join("lib.rs"), dir.path(), layers);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("src/low.rs:2") && found[0].contains("src/top/inner.rs"),
        "{found:?}"
    );
    // A room the table does not place.
    w(
        "lib.rs",
        "pub mod low;\npub mod mid;\npub mod top;\npub mod new;\n",
    );
    w("new.rs", "pub struct N;\n");
    let found = upward(&src.join("lib.rs"), dir.path(), &[&["low", "mid", "top"]]);
    assert_eq!(
        found,
        vec!["room `new` has no layer: place it in the table"]
    );
}
