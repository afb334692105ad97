//! The emulation's basic values as text: durations (`20ms`, also how they are shown) and
//! probabilities (`5%`, `0.05`), and the one-line error every refused value gives. A leaf:
//! the link model's types and the other parsers use it.

use std::fmt;
use std::time::Duration;

/// Why an emulation value was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmulationParseError(pub String);

impl fmt::Display for EmulationParseError {
    /// One line: control characters of the echoed input (a newline in an argument) escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for EmulationParseError {}

pub(super) fn err<T>(msg: String) -> Result<T, EmulationParseError> {
    Err(EmulationParseError(msg))
}

/// The longest duration accepted anywhere (a day): larger values are typos.
const MAX: Duration = Duration::from_secs(86_400);

/// `20ms`, `1.5s`, `250us`, `100ns`, `2m`, or `0`. No negative values, no bare numbers
/// other than 0.
pub fn parse_duration(s: &str) -> Result<Duration, EmulationParseError> {
    let t = s.trim();
    let bad = |why: &str| {
        EmulationParseError(format!(
            "invalid duration `{s}`: {why} (examples: 20ms, 1.5s, 250us, 0)"
        ))
    };
    if t.starts_with('-') {
        return Err(bad("must not be negative"));
    }
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(bad("no number"));
    }
    let v: f64 = num.parse().map_err(|_| bad("bad number"))?;
    let secs = match unit {
        "ns" => v * 1e-9,
        "us" | "µs" => v * 1e-6,
        "ms" => v * 1e-3,
        "s" => v,
        "m" | "min" => v * 60.0,
        "" => return Err(bad("give a unit")),
        _ => return Err(bad("unknown unit")),
    };
    if !secs.is_finite() || secs > MAX.as_secs_f64() {
        return Err(bad("longer than a day"));
    }
    Ok(Duration::from_nanos((secs * 1e9).round() as u64))
}

/// The shortest exact form: `0`, `20ms`, `1.5s`, `250us`, `100ns`.
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        "0".into()
    } else if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        let ms = ns / 1_000_000;
        if ms >= 1000 {
            format!("{}s", ms as f64 / 1000.0)
        } else {
            format!("{ms}ms")
        }
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1000)
    } else {
        format!("{ns}ns")
    }
}

/// A probability: `5%` or a fraction `0.05`; 0 to 100%.
pub fn parse_probability(s: &str, what: &str) -> Result<f64, EmulationParseError> {
    let t = s.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 0.01),
        None => (t, 1.0),
    };
    let v: f64 = match num.parse() {
        Ok(v) => v,
        Err(_) => return err(format!("invalid {what} `{s}`: not a number (5% or 0.05)")),
    };
    let p = v * scale;
    if !p.is_finite() || p < 0.0 {
        return err(format!("invalid {what} `{s}`: must not be negative"));
    }
    if p > 1.0 {
        return err(format!(
            "invalid {what} `{s}`: more than 100% (a fraction is 0..1, or write 5%)"
        ));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("20ms").unwrap(), Duration::from_millis(20));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        for bad in [
            "",
            "-5ms",
            "20",
            "ms",
            "20 parsecs",
            "1e9s",
            "2d",
            "1.2.3ms",
        ] {
            let e = parse_duration(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("`{bad}`")), "{bad}: {e}");
            assert!(!e.contains('\n'));
        }
        assert!(parse_duration("-5ms")
            .unwrap_err()
            .to_string()
            .contains("negative"));
        for d in [
            Duration::ZERO,
            Duration::from_millis(20),
            Duration::from_millis(1500),
            Duration::from_micros(250),
            Duration::from_nanos(7),
            Duration::from_secs(16),
        ] {
            assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
        }
    }
}
