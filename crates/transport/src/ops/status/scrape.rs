//! The samples of an OpenMetrics text as nena's counters write it: `name{label="value",...}
//! value` lines (comments skipped). Only what [`crate::ops::metrics::Metrics::encode`]
//! produces is read: it is the command's own text, never a peer's.

/// One sample: its name, labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    /// The value of label `key` (empty when absent).
    pub fn label(&self, key: &str) -> &str {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map_or("", |(_, v)| v.as_str())
    }
}

/// Every sample of `text`; lines that do not parse are skipped.
pub fn samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(sample)
        .collect()
}

fn sample(line: &str) -> Option<Sample> {
    let (head, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let (name, labels) = match head.split_once('{') {
        Some((name, rest)) => (name, labels(rest.strip_suffix('}')?)?),
        None => (head, Vec::new()),
    };
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// `k="v",k2="v2"` with `\"`, `\\` and `\n` escapes in values.
fn labels(mut s: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    while !s.is_empty() {
        let (key, rest) = s.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (_, c) => value.push(c),
            }
        };
        out.push((key.to_string(), value));
        s = rest[end + 1..]
            .strip_prefix(',')
            .unwrap_or(&rest[end + 1..]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_with_labels_escapes_and_none() {
        let text = "# TYPE nena_bytes counter\n\
                    nena_bytes_total{role=\"serve\",path=\"a\\\"b\",direction=\"sent\"} 42\n\
                    nena_up 1\n\
                    # EOF\n";
        let s = samples(text);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].name, "nena_bytes_total");
        assert_eq!(s[0].label("path"), "a\"b");
        assert_eq!(s[0].label("direction"), "sent");
        assert_eq!(s[0].value, 42.0);
        assert_eq!(s[1].name, "nena_up");
        assert!(s[1].labels.is_empty());
    }

    #[test]
    fn the_counters_own_text_reads_back() {
        use crate::ops::metrics::{Metrics, PathsUsed, Role};
        let m = Metrics::new(Role::ProxyClient);
        m.add_bytes(&PathsUsed {
            paths: vec![("trusted".into(), 5, 7)],
            ..PathsUsed::default()
        });
        let s = samples(&m.encode());
        let got = s
            .iter()
            .find(|s| s.name == "nena_bytes_total" && s.label("direction") == "received")
            .expect("the bytes sample");
        assert_eq!((got.label("path"), got.value), ("trusted", 7.0));
    }
}
