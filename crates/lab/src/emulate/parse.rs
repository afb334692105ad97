//! Parsers for the emulation's command-line values and trace files (durations and
//! probabilities are in `values`): loss (`5%`, `0.05`), Gilbert-Elliott parameters (`p,r[,1-h[,1-k]]`), outages
//! (`16s+5s`), and rate traces (CSV `time_s,rate` or mahimahi delivery traces). Every
//! refusal is one line that says what was wrong.

use super::values::{err, parse_duration, parse_probability, EmulationParseError};
use super::{Loss, Outage, RateStep, RateTrace};
use crate::Rate;
use std::path::Path;
use std::time::Duration;

impl RateTrace {
    /// Read a trace file: CSV (`time_s,rate` lines) or mahimahi (one integer per line).
    pub fn from_file(path: &Path) -> Result<RateTrace, EmulationParseError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            EmulationParseError(format!("cannot read trace file {}: {e}", path.display()))
        })?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        parse_trace(&name, &text)
            .map_err(|e| EmulationParseError(format!("trace file {}: {e}", path.display())))
    }
}

/// Random loss: `5%` or `0.05` (`0` is no loss).
pub fn parse_loss(s: &str) -> Result<Loss, EmulationParseError> {
    let p = parse_probability(s, "loss")?;
    Ok(if p == 0.0 {
        Loss::None
    } else {
        Loss::Random(p)
    })
}

/// Gilbert-Elliott loss: `p,r[,1-h[,1-k]]`, each a probability (`1%,30%` or `0.01,0.3`).
/// `1-h` (loss in the bad state) defaults to 100%, `1-k` (loss in the good state) to 0.
pub fn parse_ge_loss(s: &str) -> Result<Loss, EmulationParseError> {
    let parts: Vec<&str> = s.split(',').collect();
    if !(2..=4).contains(&parts.len()) {
        return err(format!(
            "invalid Gilbert-Elliott loss `{s}`: give p,r[,1-h[,1-k]] (e.g. 1%,30% or 1%,30%,90%,0.1%)"
        ));
    }
    let names = ["p", "r", "1-h", "1-k"];
    let mut v = [0.0, 0.0, 1.0, 0.0];
    for (i, part) in parts.iter().enumerate() {
        v[i] = parse_probability(part, &format!("Gilbert-Elliott {}", names[i]))?;
    }
    if v[1] == 0.0 && v[0] > 0.0 {
        return err(format!(
            "invalid Gilbert-Elliott loss `{s}`: r (bad -> good) is 0, the link would stay bad forever"
        ));
    }
    Ok(Loss::GilbertElliott {
        p: v[0],
        r: v[1],
        loss_bad: v[2],
        loss_good: v[3],
    })
}

/// An outage `START+DURATION` (`16s+5s`), relative to when the emulation is applied.
pub fn parse_outage(s: &str) -> Result<Outage, EmulationParseError> {
    let Some((a, b)) = s.split_once('+') else {
        return err(format!(
            "invalid outage `{s}`: give START+DURATION (e.g. 16s+5s)"
        ));
    };
    let start = parse_duration(a)?;
    let duration = parse_duration(b)?;
    if duration.is_zero() {
        return err(format!("invalid outage `{s}`: the duration is 0"));
    }
    Ok(Outage { start, duration })
}

/// A trace file's text: CSV (`time_s,rate`, an optional header line, `#` comments) or
/// mahimahi (one millisecond timestamp per line).
pub(crate) fn parse_trace(name: &str, text: &str) -> Result<RateTrace, String> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        .collect();
    if lines.is_empty() {
        return Err("empty (no rows)".into());
    }
    if lines.iter().any(|(_, l)| l.contains(',')) {
        let mut steps: Vec<RateStep> = Vec::new();
        for (n, (ln, l)) in lines.iter().enumerate() {
            let Some((t, r)) = l.split_once(',') else {
                return Err(format!("line {ln}: expected `time_s,rate`, got `{l}`"));
            };
            let (t, r) = (t.trim(), r.trim());
            if n == 0 && t.parse::<f64>().is_err() {
                continue; // a header such as `time_s,rate`
            }
            let secs: f64 = t
                .parse()
                .map_err(|_| format!("line {ln}: time `{t}` is not a number of seconds"))?;
            if !secs.is_finite() || secs < 0.0 {
                return Err(format!("line {ln}: time `{t}` is negative"));
            }
            let rate = if r == "0" {
                Rate(0)
            } else {
                r.parse::<Rate>().map_err(|e| format!("line {ln}: {e}"))?
            };
            let at = Duration::from_secs_f64(secs);
            if let Some(prev) = steps.last() {
                if at <= prev.at {
                    return Err(format!(
                        "line {ln}: time {t} s is not after the previous row (times must increase)"
                    ));
                }
            } else if !at.is_zero() {
                return Err(format!("line {ln}: the first row must be at time 0"));
            }
            steps.push(RateStep { at, rate });
        }
        if steps.is_empty() {
            return Err("empty (a header and no rows)".into());
        }
        if steps.iter().all(|s| s.rate.0 == 0) {
            return Err("every rate is 0: nothing would ever be delivered".into());
        }
        Ok(RateTrace::Rates {
            name: name.into(),
            steps,
        })
    } else {
        let mut opp = Vec::with_capacity(lines.len());
        for (ln, l) in &lines {
            let ms: u64 = l.parse().map_err(|_| {
                format!("line {ln}: `{l}` is not a millisecond timestamp (mahimahi trace) or a `time_s,rate` row")
            })?;
            if opp.last().is_some_and(|&p| ms < p) {
                return Err(format!(
                    "line {ln}: timestamp {ms} is before the previous one (must not decrease)"
                ));
            }
            opp.push(ms);
        }
        let period_ms = *opp.last().expect("not empty");
        if period_ms == 0 {
            return Err("the last timestamp (the period) is 0".into());
        }
        Ok(RateTrace::Deliveries {
            name: name.into(),
            period_ms,
            opportunities_ms: opp,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn losses() {
        assert_eq!(parse_loss("5%").unwrap(), Loss::Random(0.05));
        assert_eq!(parse_loss("0.05").unwrap(), Loss::Random(0.05));
        assert_eq!(parse_loss("0").unwrap(), Loss::None);
        assert_eq!(parse_loss("100%").unwrap(), Loss::Random(1.0));
        for (bad, why) in [
            ("101%", "more than 100%"),
            ("5", "more than 100%"),
            ("-1%", "negative"),
            ("x%", "not a number"),
        ] {
            let e = parse_loss(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert_eq!(
            parse_ge_loss("1%,30%").unwrap(),
            Loss::GilbertElliott {
                p: 0.01,
                r: 0.3,
                loss_bad: 1.0,
                loss_good: 0.0
            }
        );
        assert_eq!(
            parse_ge_loss("0.01,0.3,0.9,0.001").unwrap(),
            Loss::GilbertElliott {
                p: 0.01,
                r: 0.3,
                loss_bad: 0.9,
                loss_good: 0.001
            }
        );
        for bad in ["1%", "1%,2%,3%,4%,5%", "1%,0", "1%,200%", "a,b"] {
            assert!(parse_ge_loss(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn outages() {
        assert_eq!(
            parse_outage("16s+5s").unwrap(),
            Outage {
                start: Duration::from_secs(16),
                duration: Duration::from_secs(5)
            }
        );
        for bad in ["16s", "16s+0", "-1s+2s", "1s+x", "+"] {
            assert!(parse_outage(bad).is_err(), "{bad}");
        }
    }

    /// Fuzz-style: random strings over the parsers' alphabet and mutated valid traces never
    /// panic, and every refusal is one line.
    #[test]
    fn random_inputs_never_panic_and_errors_are_one_line() {
        let alphabet: Vec<char> = "0123456789.,-+%msunµkbitMG# \n\r\txe".chars().collect();
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let one_line = |e: String| assert!(!e.contains(['\n', '\r']), "{e:?}");
        let valid = ["time_s,rate\n0,10mbit\n1.5,0\n3,2000000\n", "1\n1\n5\n10\n"];
        for i in 0..20_000 {
            let s: String = if i % 2 == 0 {
                let len = (next() % 40) as usize;
                (0..len)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect()
            } else {
                let mut b: Vec<char> = valid[i % 4 / 2].chars().collect();
                for _ in 0..(next() % 4) {
                    let at = (next() % (b.len() as u64 + 1)) as usize;
                    let c = alphabet[(next() % alphabet.len() as u64) as usize];
                    match next() % 3 {
                        0 if at < b.len() => b[at] = c,
                        1 if at < b.len() => {
                            b.remove(at);
                        }
                        _ => b.insert(at, c),
                    }
                }
                b.into_iter().collect()
            };
            if let Err(e) = parse_duration(&s) {
                one_line(e.to_string());
            }
            if let Err(e) = parse_loss(&s) {
                one_line(e.to_string());
            }
            if let Err(e) = parse_ge_loss(&s) {
                one_line(e.to_string());
            }
            if let Err(e) = parse_outage(&s) {
                one_line(e.to_string());
            }
            match parse_trace("f", &s) {
                Err(e) => one_line(EmulationParseError(e).to_string()),
                Ok(t) => {
                    // a trace that parses can be run without panicking
                    let mut m = crate::LinkModel::new(
                        crate::Emulation {
                            trace: Some(t),
                            ..crate::Emulation::default()
                        },
                        1,
                        Duration::ZERO,
                    );
                    for k in 0..50u64 {
                        m.on_frame(Duration::from_millis(k * 7), 1514);
                    }
                }
            }
        }
    }

    #[test]
    fn traces() {
        let t = parse_trace("t", "time_s,rate\n0,10mbit\n1.5,0\n3,2000000\n").unwrap();
        let RateTrace::Rates { steps, .. } = t else {
            panic!("not CSV")
        };
        assert_eq!(steps.len(), 3);
        assert_eq!(steps[1].at, Duration::from_millis(1500));
        assert_eq!(steps[2].rate, Rate(2_000_000));
        let m = parse_trace("m", "# mahimahi\n1\n1\n5\n10\n").unwrap();
        assert_eq!(
            m,
            RateTrace::Deliveries {
                name: "m".into(),
                period_ms: 10,
                opportunities_ms: vec![1, 1, 5, 10]
            }
        );
        for (bad, why) in [
            ("", "empty"),
            ("# only a comment\n", "empty"),
            ("time_s,rate\n", "empty"),
            ("0,1mbit\n2,1mbit\n1,1mbit\n", "times must increase"),
            ("1,1mbit\n", "first row must be at time 0"),
            ("0,fast\n", "line 1"),
            ("0,0\n", "every rate is 0"),
            ("0,1mbit\n-1,2mbit\n", "line 2"),
            ("5\n3\n", "must not decrease"),
            ("0\n0\n", "period"),
            ("1\nx\n", "line 2"),
        ] {
            let e = parse_trace("t", bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }
}
