//! Link rates in bits per second, parsed and printed the way `tc` writes them
//! (`100mbit`, `20mbit`, `1gbit`, `512kbit`, or a bare number of bits per second).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A rate in bits per second (decimal units: 1 mbit = 1 000 000 bit/s, as in `tc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Rate(pub u64);

impl Rate {
    /// A rate of `n` megabits (10^6 bits) per second.
    pub const fn mbit(n: u64) -> Rate {
        Rate(n * 1_000_000)
    }
    /// Bits per second.
    pub fn bps(self) -> u64 {
        self.0
    }
    /// Bytes per second (rounded down).
    pub fn bytes_per_sec(self) -> u64 {
        self.0 / 8
    }
}

/// Why a rate string was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateParseError(String);

impl fmt::Display for RateParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RateParseError {}

impl FromStr for Rate {
    type Err = RateParseError;

    fn from_str(s: &str) -> Result<Rate, RateParseError> {
        let t = s.trim();
        let err = |why: &str| {
            RateParseError(format!(
                "invalid rate `{s}`: {why} (examples: 100mbit, 20mbit, 1gbit, 512kbit, 1000000)"
            ))
        };
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        if num.is_empty() {
            return Err(err("no number"));
        }
        let value: f64 = num.parse().map_err(|_| err("bad number"))?;
        let mult: f64 = match unit.to_ascii_lowercase().as_str() {
            "" | "bit" => 1.0,
            "k" | "kbit" => 1e3,
            "m" | "mbit" => 1e6,
            "g" | "gbit" => 1e9,
            "t" | "tbit" => 1e12,
            u if u.ends_with("bps") || u.ends_with("b/s") => {
                return Err(err("byte units are ambiguous here; use bit units"))
            }
            _ => return Err(err("unknown unit")),
        };
        let bits = value * mult;
        if !bits.is_finite() || bits < 8.0 {
            return Err(err("must be at least 8 bit/s"));
        }
        if bits > 4e12 {
            return Err(err("larger than 4tbit"));
        }
        Ok(Rate(bits.round() as u64))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        for (div, unit) in [
            (1_000_000_000_000, "tbit"),
            (1_000_000_000, "gbit"),
            (1_000_000, "mbit"),
            (1_000, "kbit"),
        ] {
            if n >= div && n.is_multiple_of(div) {
                return write!(f, "{}{unit}", n / div);
            }
        }
        write!(f, "{n}bit")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tc_units() {
        assert_eq!("100mbit".parse::<Rate>().unwrap(), Rate(100_000_000));
        assert_eq!("20Mbit".parse::<Rate>().unwrap(), Rate(20_000_000));
        assert_eq!("1gbit".parse::<Rate>().unwrap(), Rate(1_000_000_000));
        assert_eq!("512kbit".parse::<Rate>().unwrap(), Rate(512_000));
        assert_eq!("2.5m".parse::<Rate>().unwrap(), Rate(2_500_000));
        assert_eq!("1000000".parse::<Rate>().unwrap(), Rate(1_000_000));
    }

    #[test]
    fn refuses_garbage() {
        for bad in [
            "",
            "mbit",
            "10mbps",
            "10 furlongs",
            "-5mbit",
            "0",
            "1e99",
            "9tbit",
        ] {
            assert!(bad.parse::<Rate>().is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn displays_round_trip() {
        for r in [
            Rate(100_000_000),
            Rate(512_000),
            Rate(1_500),
            Rate(1_000_000_000),
            Rate(123),
        ] {
            assert_eq!(r.to_string().parse::<Rate>().unwrap(), r);
        }
        assert_eq!(Rate::mbit(100).to_string(), "100mbit");
    }
}
