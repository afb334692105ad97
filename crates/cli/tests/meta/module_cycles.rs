//! No circle between source files: per crate (each `src/lib.rs`, `src/main.rs` and
//! `src/bin/*.rs` tree of `crates/*`), the graph of references between files must have no
//! cycle. A file refers to another when it names an item of it by path: `crate::a::b`,
//! `super::x`, `self::x` or a child module's name (`child::f`), in a `use` or in code.
//! Paths are mapped to files by the module tree (`mod x;` is `x.rs` or `x/mod.rs`, or its
//! `#[path]`); a name a module re-exports (`pub use`) is followed to where it is defined, and
//! a re-export is itself no reference (a parent that only re-exports its children's items
//! does not depend on them). `#[cfg(test)]` items and modules are left out. Comments and
//! string literals are ignored. The test fails naming every cycle, one reference per step.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    /// `::`
    Path,
    Punct(char),
}

/// Tokens with their line numbers; comments dropped, string and char literals as `Str`.
fn tokenize(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if ch == '"' || raw_string_start(&c, i).is_some() {
            // "..." (escapes), r"..." / r#"..."# (and b-prefixed forms, the b read as an ident
            // before: harmless).
            let start_line = line;
            let mut s = String::new();
            if let Some((hashes, skip)) = raw_string_start(&c, i) {
                i += skip;
                loop {
                    if i >= c.len() {
                        break;
                    }
                    if c[i] == '"' && (0..hashes).all(|k| c.get(i + 1 + k) == Some(&'#')) {
                        i += 1 + hashes;
                        break;
                    }
                    if c[i] == '\n' {
                        line += 1;
                    }
                    s.push(c[i]);
                    i += 1;
                }
            } else {
                i += 1;
                while i < c.len() && c[i] != '"' {
                    if c[i] == '\\' {
                        i += 1;
                    }
                    if c.get(i) == Some(&'\n') {
                        line += 1;
                    }
                    if let Some(&x) = c.get(i) {
                        s.push(x);
                    }
                    i += 1;
                }
                i += 1;
            }
            out.push((Tok::Str(s), start_line));
        } else if ch == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if c.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push((Tok::Str(String::new()), line));
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push((Tok::Str(String::new()), line));
            } else {
                i += 1; // a lifetime: its name follows as an ident
            }
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let w: String = c[start..i].iter().collect();
            let w = w.strip_prefix("r#").map(str::to_string).unwrap_or(w);
            out.push((Tok::Ident(w), line));
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((Tok::Path, line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

/// At `r"`, `r#"`, `br"`...: (number of #, chars to skip to the first content char).
fn raw_string_start(c: &[char], i: usize) -> Option<(usize, usize)> {
    if i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_') && c[i - 1] != 'b' {
        return None;
    }
    if c[i] != 'r' {
        return None;
    }
    let mut j = i + 1;
    while c.get(j) == Some(&'#') {
        j += 1;
    }
    (c.get(j) == Some(&'"')).then_some((j - i - 1, j + 1 - i))
}

/// Drop every item under `#[cfg(test)]` (and a file that starts with `#![cfg(test)]`).
fn strip_test_items(toks: Vec<(Tok, usize)>) -> Vec<(Tok, usize)> {
    let is = |t: &[(Tok, usize)], want: &[&str]| {
        t.len() >= want.len()
            && t.iter().zip(want).all(|((tok, _), w)| match tok {
                Tok::Ident(s) => s == w,
                Tok::Punct(p) => w.len() == 1 && w.starts_with(*p),
                _ => false,
            })
    };
    if is(&toks, &["#", "!", "[", "cfg", "(", "test", ")", "]"]) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let test_item = is(&toks[i..], &["#", "[", "cfg", "(", "test", ")", "]"]);
        // A macro's body: its paths mean something only where it is expanded.
        let macro_def = is(&toks[i..], &["macro_rules", "!"]);
        if !test_item && !macro_def {
            out.push(toks[i].clone());
            i += 1;
            continue;
        }
        // Skip to the end of the item: its first `;` or its `{...}` at nesting depth 0.
        i += if test_item { 7 } else { 3 };
        let mut depth = 0i32;
        while i < toks.len() {
            match toks[i].0 {
                Tok::Punct('(') | Tok::Punct('[') => depth += 1,
                Tok::Punct(')') | Tok::Punct(']') => depth -= 1,
                Tok::Punct(';') if depth == 0 => {
                    i += 1;
                    break;
                }
                Tok::Punct('{') if depth == 0 => {
                    let mut braces = 0;
                    while i < toks.len() {
                        match toks[i].0 {
                            Tok::Punct('{') => braces += 1,
                            Tok::Punct('}') => {
                                braces -= 1;
                                if braces == 0 {
                                    break;
                                }
                            }
                            _ => {}
                        }
                        i += 1;
                    }
                    i += 1;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
    }
    out
}

/// A reference found in a file: the module it is written in, the path as written, whether
/// it is a re-export (`pub use`), and its line.
#[derive(Debug, Clone)]
struct Ref {
    module: Vec<String>,
    path: Vec<String>,
    alias: Option<String>,
    reexport: bool,
    line: usize,
}

#[derive(Debug, Default)]
struct Module {
    file: PathBuf,
    /// Child modules declared here (inline or in files).
    children: BTreeSet<String>,
}

struct Crate {
    modules: BTreeMap<Vec<String>, Module>,
    refs: Vec<(PathBuf, Ref)>,
}

/// Expand a `use` tree starting at `toks[i]` (after `use`) up to its `;`.
fn use_tree(
    toks: &[(Tok, usize)],
    i: &mut usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let mut path = prefix;
    while *i < toks.len() {
        match &toks[*i].0 {
            Tok::Ident(s) if s == "as" => {
                *i += 1;
                if let Some((Tok::Ident(a), _)) = toks.get(*i) {
                    out.push((path.clone(), Some(a.clone())));
                    *i += 1;
                }
                return;
            }
            Tok::Ident(s) => {
                path.push(s.clone());
                *i += 1;
            }
            Tok::Path => *i += 1,
            Tok::Punct('*') => {
                path.push("*".into());
                *i += 1;
            }
            Tok::Punct('{') => {
                *i += 1;
                loop {
                    use_tree(toks, i, path.clone(), out);
                    match toks.get(*i).map(|t| &t.0) {
                        Some(Tok::Punct(',')) => *i += 1,
                        Some(Tok::Punct('}')) => {
                            *i += 1;
                            return;
                        }
                        _ => return,
                    }
                    if let Some((Tok::Punct('}'), _)) = toks.get(*i) {
                        *i += 1;
                        return;
                    }
                }
            }
            _ => break,
        }
    }
    if path.last().is_some_and(|l| l == "self") {
        path.pop();
    }
    out.push((path, None));
}

/// Read one file of module `module`: its declared child modules (recursively read) and
/// its references.
fn read_module(krate: &mut Crate, file: &Path, module: Vec<String>, child_dir: PathBuf) {
    let Ok(src) = std::fs::read_to_string(file) else {
        return;
    };
    let toks = strip_test_items(tokenize(&src));
    krate.modules.entry(module.clone()).or_default().file = file.to_path_buf();
    // Inline modules: (name, brace depth inside it).
    let mut stack: Vec<(String, i32)> = Vec::new();
    let mut depth = 0i32;
    let mut path_attr: Option<String> = None;
    let mut pending_pub = false;
    let mut i = 0;
    let cur = |stack: &[(String, i32)]| {
        let mut m = module.clone();
        m.extend(stack.iter().map(|s| s.0.clone()));
        m
    };
    while i < toks.len() {
        let (tok, line) = (&toks[i].0, toks[i].1);
        match tok {
            Tok::Punct('#') => {
                // #[path = "x.rs"]
                if let (Some((Tok::Ident(p), _)), Some((Tok::Str(s), _))) =
                    (toks.get(i + 2), toks.get(i + 4))
                {
                    if p == "path" {
                        path_attr = Some(s.clone());
                    }
                }
                i += 1;
                continue;
            }
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if stack.last().is_some_and(|s| s.1 == depth) {
                    stack.pop();
                }
                depth -= 1;
            }
            Tok::Ident(k) if k == "pub" => {
                pending_pub = true;
                i += 1;
                // pub(crate), pub(super), pub(in path)
                if let Some((Tok::Punct('('), _)) = toks.get(i) {
                    while i < toks.len() && toks[i].0 != Tok::Punct(')') {
                        i += 1;
                    }
                    i += 1;
                }
                continue;
            }
            Tok::Ident(k) if k == "mod" => {
                if let Some((Tok::Ident(name), _)) = toks.get(i + 1) {
                    let m = cur(&stack);
                    krate
                        .modules
                        .entry(m.clone())
                        .or_default()
                        .children
                        .insert(name.clone());
                    let mut child = m.clone();
                    child.push(name.clone());
                    match toks.get(i + 2).map(|t| &t.0) {
                        Some(Tok::Punct(';')) => {
                            let dir = stack.iter().fold(child_dir.clone(), |d, s| d.join(&s.0));
                            let f = match path_attr.take() {
                                Some(p) => file.parent().unwrap().join(p),
                                None if dir.join(format!("{name}.rs")).is_file() => {
                                    dir.join(format!("{name}.rs"))
                                }
                                None => dir.join(name).join("mod.rs"),
                            };
                            let cd = if f.file_name().is_some_and(|n| n == "mod.rs") {
                                f.parent().unwrap().to_path_buf()
                            } else {
                                f.with_extension("")
                            };
                            read_module(krate, &f, child, cd);
                        }
                        Some(Tok::Punct('{')) => {
                            krate.modules.entry(child).or_default().file = file.to_path_buf();
                            stack.push((name.clone(), depth + 1));
                        }
                        _ => {}
                    }
                }
            }
            Tok::Ident(k) if k == "use" => {
                let reexport = pending_pub;
                i += 1;
                let mut paths = Vec::new();
                use_tree(&toks, &mut i, Vec::new(), &mut paths);
                for (path, alias) in paths {
                    krate.refs.push((
                        file.to_path_buf(),
                        Ref {
                            module: cur(&stack),
                            path,
                            alias,
                            reexport,
                            line,
                        },
                    ));
                }
                pending_pub = false;
                continue;
            }
            Tok::Ident(first) if toks.get(i + 1).map(|t| &t.0) == Some(&Tok::Path) => {
                let starts = i == 0 || toks[i - 1].0 != Tok::Path;
                if starts {
                    let mut path = vec![first.clone()];
                    let mut j = i + 1;
                    while let (Some((Tok::Path, _)), Some((Tok::Ident(s), _))) =
                        (toks.get(j), toks.get(j + 1))
                    {
                        path.push(s.clone());
                        j += 2;
                    }
                    krate.refs.push((
                        file.to_path_buf(),
                        Ref {
                            module: cur(&stack),
                            path,
                            alias: None,
                            reexport: false,
                            line,
                        },
                    ));
                    i = j;
                    pending_pub = false;
                    continue;
                }
            }
            _ => {}
        }
        if !matches!(tok, Tok::Punct('#') | Tok::Punct('[') | Tok::Punct(']')) {
            pending_pub = false;
        }
        i += 1;
    }
}

impl Crate {
    /// The absolute module path a reference written in `module` names, or None (another
    /// crate, a local name).
    fn absolute(&self, module: &[String], path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        let mut abs: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" => module.to_vec(),
            "super" => {
                let mut m = module.to_vec();
                let mut k = 0;
                while path.get(k).is_some_and(|s| s == "super") {
                    m.pop()?;
                    k += 1;
                }
                m.extend(path[k..].iter().cloned());
                return Some(m);
            }
            name if self
                .modules
                .get(module)
                .is_some_and(|m| m.children.contains(name)) =>
            {
                let mut m = module.to_vec();
                m.push(name.to_string());
                m
            }
            _ => return None,
        };
        abs.extend(path[1..].iter().cloned());
        Some(abs)
    }

    /// The file that defines what an absolute path names, following re-exports.
    fn file_of(&self, abs: &[String], hops: usize) -> Option<PathBuf> {
        let mut k = abs.len();
        while !self.modules.contains_key(&abs[..k]) {
            k -= 1;
        }
        let m = &abs[..k];
        if let (Some(item), true) = (abs.get(k), hops < 16) {
            // A name re-exported by that module: follow it.
            for (_, r) in &self.refs {
                let named = r.alias.as_ref().or(r.path.last());
                if r.reexport && r.module == m && named == Some(item) && item != "*" {
                    if let Some(target) = self.absolute(&r.module, &r.path) {
                        let mut t = target;
                        t.extend(abs[k + 1..].iter().cloned());
                        return self.file_of(&t, hops + 1);
                    }
                }
            }
        }
        Some(self.modules[m].file.clone())
    }
}

pub(crate) fn crate_roots(root: &Path) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    let mut crates: Vec<_> = std::fs::read_dir(root.join("crates"))
        .expect("crates/")
        .map(|e| e.unwrap().path())
        .collect();
    crates.sort();
    for c in crates {
        let src = c.join("src");
        for f in ["lib.rs", "main.rs"] {
            if src.join(f).is_file() {
                roots.push(src.join(f));
            }
        }
        if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
            let mut b: Vec<_> = bins.map(|e| e.unwrap().path()).collect();
            b.sort();
            roots.extend(
                b.into_iter()
                    .filter(|p| p.extension().is_some_and(|e| e == "rs")),
            );
        }
    }
    roots
}

/// The references between the files of the crate rooted at `root_file`: every source file
/// of it, and per file the files it refers to, each with the first reference that makes the
/// edge (`a.rs:LINE (path)`, relative to `base`).
pub(crate) type Edges = BTreeMap<PathBuf, BTreeMap<PathBuf, String>>;

pub(crate) fn file_edges(root_file: &Path, base: &Path) -> (Vec<PathBuf>, Edges) {
    let mut krate = Crate {
        modules: BTreeMap::new(),
        refs: Vec::new(),
    };
    read_module(
        &mut krate,
        root_file,
        Vec::new(),
        root_file.parent().unwrap().to_path_buf(),
    );
    // Edges between files, each with the first reference that makes it.
    let mut edges: BTreeMap<PathBuf, BTreeMap<PathBuf, String>> = BTreeMap::new();
    for (file, r) in &krate.refs {
        if r.reexport {
            continue;
        }
        let Some(abs) = krate.absolute(&r.module, &r.path) else {
            continue;
        };
        let Some(to) = krate.file_of(&abs, 0) else {
            continue;
        };
        if &to != file {
            let rel = |p: &Path| p.strip_prefix(base).unwrap_or(p).display().to_string();
            edges
                .entry(file.clone())
                .or_default()
                .entry(to.clone())
                .or_insert_with(|| format!("{}:{} ({})", rel(file), r.line, r.path.join("::")));
        }
    }
    let nodes: Vec<PathBuf> = krate
        .modules
        .values()
        .map(|m| m.file.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    (nodes, edges)
}

/// Every cycle of the file graph of the crate rooted at `root_file`, each as its steps
/// `a.rs:LINE (path) -> b.rs`.
fn cycles(root_file: &Path, base: &Path) -> (usize, Vec<Vec<String>>) {
    let (nodes, edges) = file_edges(root_file, base);
    // Tarjan's strongly connected components.
    let idx: HashMap<&PathBuf, usize> = nodes.iter().enumerate().map(|(i, n)| (n, i)).collect();
    let adj: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| {
            edges
                .get(n)
                .map(|e| e.keys().filter_map(|t| idx.get(t).copied()).collect())
                .unwrap_or_default()
        })
        .collect();
    let sccs = tarjan(&adj);
    let mut found = Vec::new();
    for scc in sccs.into_iter().filter(|s| s.len() > 1) {
        // One concrete cycle through the component's first file (BFS back to it).
        let set: BTreeSet<usize> = scc.iter().copied().collect();
        let start = *set.iter().next().unwrap();
        let mut prev: HashMap<usize, usize> = HashMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        let mut end = None;
        'bfs: while let Some(u) = queue.pop_front() {
            for &v in &adj[u] {
                if !set.contains(&v) {
                    continue;
                }
                if v == start {
                    end = Some(u);
                    break 'bfs;
                }
                if let std::collections::hash_map::Entry::Vacant(e) = prev.entry(v) {
                    e.insert(u);
                    queue.push_back(v);
                }
            }
        }
        let mut chain = vec![end.expect("a component has a cycle")];
        while *chain.last().unwrap() != start {
            chain.push(prev[chain.last().unwrap()]);
        }
        chain.reverse();
        let mut steps = Vec::new();
        for (k, &u) in chain.iter().enumerate() {
            let v = chain.get(k + 1).copied().unwrap_or(start);
            let to = nodes[v].strip_prefix(base).unwrap_or(&nodes[v]);
            steps.push(format!(
                "{} -> {}",
                edges[&nodes[u]][&nodes[v]],
                to.display()
            ));
        }
        if scc.len() > chain.len() {
            steps.push(format!(
                "(the component holds {} files: {})",
                scc.len(),
                scc.iter()
                    .map(|&i| nodes[i].strip_prefix(base).unwrap().display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        found.push(steps);
    }
    (nodes.len(), found)
}

fn tarjan(adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct St<'a> {
        adj: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut St, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on[v] = true;
        for k in 0..s.adj[v].len() {
            let w = s.adj[v][k];
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on[w] => s.low[v] = s.low[v].min(iw),
                _ => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            comp.sort();
            s.out.push(comp);
        }
    }
    let n = adj.len();
    let mut s = St {
        adj,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_cycle_between_source_files() {
    let base = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .canonicalize()
        .unwrap();
    let mut report = Vec::new();
    let mut files = 0;
    for root in crate_roots(&base) {
        let (n, found) = cycles(&root, &base);
        files += n;
        for steps in found {
            report.push(format!("cycle:\n  {}", steps.join("\n  ")));
        }
    }
    assert!(files > 100, "only {files} source files read");
    assert!(report.is_empty(), "{}", report.join("\n"));
}

/// The checker itself: a cycle through a child's `super::` and its parent's use of it is
/// found, a parent that only re-exports is none, and test code does not count.
#[test]
fn the_checker_finds_a_cycle_and_only_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    let w = |p: &str, s: &str| std::fs::write(src.join(p), s).unwrap();
    w(
        "lib.rs",
        "//! crate::b::nothing\nmod a;\nmod b;\npub use a::A;\n#[cfg(test)]\nmod t { use crate::b::B; }\n",
    );
    w("a/mod.rs", "mod x;\nmod y;\npub use x::A;\npub use y::Y;\n");
    w("a/x.rs", "pub struct A;\nfn f() { let _ = super::Y; }\n");
    w("a/y.rs", "pub struct Y;\n");
    w(
        "b.rs",
        "pub struct B;\nfn g() -> crate::A { crate::a::A }\n",
    );
    let (n, found) = cycles(&src.join("lib.rs"), dir.path());
    assert_eq!(n, 5);
    assert!(found.is_empty(), "{found:?}");
    // y.rs now uses the crate root, which uses b.rs, which uses x.rs (through a::A),
    // which uses y.rs: a cycle of four files.
    w(
        "lib.rs",
        "mod a;\nmod b;\npub use a::A;\nfn h() { b::B; }\n",
    );
    w("a/y.rs", "pub struct Y;\nuse crate::h;\n");
    let (_, found) = cycles(&src.join("lib.rs"), dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    let text = found[0].join("\n");
    for f in ["src/lib.rs", "src/b.rs", "src/a/x.rs", "src/a/y.rs"] {
        assert!(text.contains(f), "{text}");
    }
}
