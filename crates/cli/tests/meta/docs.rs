//! The documents' promises stay true to each other: the README's promise is
//! docs/THREAT-MODEL.md's, word for word, and every test the threat model names exists.

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
