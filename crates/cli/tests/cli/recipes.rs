//! The README's quickstart recipes as the tests read them (`quickstart.rs`, and
//! `tests/meta/package_deb.rs` for the server's): each is the fenced `sh` block after a
//! `<!-- quickstart:NAME -->` marker, its commands run where the `# on the ...` comment
//! above them says, as written but for the user's values the README names (`SERVER` and
//! the interfaces), which [`in_the_lab`] maps to the lab's. Self-contained (no harness), so
//! that the meta binary shares it.
#![allow(dead_code)]

/// The README, as this build's tests read it.
pub const README: &str = include_str!("../../../../README.md");

/// The values a recipe leaves to its reader, as the README's quickstart names them, and
/// what they are in the lab: the server's address, the client's trusted and untrusted
/// links (an LTE modem, a public WLAN) and its LAN link (a router's LAN).
pub const USER_VALUES: [(&str, &str); 4] = [
    ("SERVER", "198.18.3.2"),
    ("wwan0", "trusted"),
    ("wlan0", "untrusted"),
    ("eth1", "lan"),
];

/// Where a recipe's command runs, from the `# on the ...` comment above it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Machine {
    /// `# on the server`: the lab's server host (for the package, the root booted there).
    Server,
    /// `# on the laptop`: the lab's client host.
    Laptop,
    /// `# on the router`: the lab's client host, the LAN host behind it.
    Router,
}

/// One command of a recipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub on: Machine,
    /// The line as the README writes it (a trailing comment included: the shell drops it).
    pub line: String,
}

impl Step {
    /// The line with the user's values replaced by the lab's ([`in_the_lab`]).
    pub fn in_the_lab(&self) -> String {
        in_the_lab(&self.line)
    }
}

/// The commands of the recipe `name` (`laptop`, `lan`, `server`), in order, each with the
/// machine it runs on. Panics if the README has no such recipe, or a command comes before
/// any `# on the ...` line.
pub fn recipe(name: &str) -> Vec<Step> {
    recipe_in(README, name)
}

pub fn recipe_in(readme: &str, name: &str) -> Vec<Step> {
    let marker = format!("<!-- quickstart:{name} -->");
    let after = readme
        .split_once(&marker)
        .unwrap_or_else(|| panic!("README.md has no {marker}"))
        .1;
    let mut lines = after.lines().skip_while(|l| l.trim().is_empty());
    assert_eq!(
        lines.next().map(str::trim),
        Some("```sh"),
        "{marker} is not followed by a ```sh block"
    );
    let mut on = None;
    let mut steps = Vec::new();
    for l in lines.by_ref() {
        let l = l.trim();
        if l == "```" {
            return steps;
        }
        if let Some(comment) = l.strip_prefix('#') {
            let c = comment.trim_start();
            for (words, m) in [
                ("on the server", Machine::Server),
                ("on the laptop", Machine::Laptop),
                ("on the router", Machine::Router),
            ] {
                if c.starts_with(words) {
                    on = Some(m);
                }
            }
            continue;
        }
        if l.is_empty() {
            continue;
        }
        let on = on.unwrap_or_else(|| panic!("{marker}: `{l}` runs on no named machine"));
        steps.push(Step {
            on,
            line: l.to_string(),
        });
    }
    panic!("{marker}: the ```sh block does not end");
}

/// `line` with every user value of [`USER_VALUES`] that stands as a word of its own (not
/// inside a longer name: `SERVER:7100`, not `SERVERS`) replaced by the lab's.
pub fn in_the_lab(line: &str) -> String {
    let mut out = line.to_string();
    for (theirs, lab) in USER_VALUES {
        out = replace_word(&out, theirs, lab);
    }
    out
}

fn replace_word(s: &str, word: &str, by: &str) -> String {
    let part = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(word) {
        let before = match i {
            0 => out.chars().next_back(),
            _ => rest[..i].chars().next_back(),
        };
        let after = rest[i + word.len()..].chars().next();
        out.push_str(&rest[..i]);
        if part(before) || part(after) {
            out.push_str(word);
        } else {
            out.push_str(by);
        }
        rest = &rest[i + word.len()..];
    }
    out.push_str(rest);
    out
}
