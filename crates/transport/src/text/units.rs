//! Byte counts as people read them (`12.3 MiB`) and write them (`100M`): the server's
//! refusals, the log lines, the CLI's reports, and the one parser of sizes for command-line
//! flags and scenario files, so that "M" means the same everywhere. A leaf: it imports
//! nothing of the crate.

/// Bytes in a human unit (binary: KiB, MiB, ...; one decimal above bytes).
pub fn human(b: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < U.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", U[i])
    }
}

/// A byte count as a person writes it: `1000`, `64K`, `100M`, `1G`, `2T`, with an optional
/// space and `B` (`64 KiB`, `100MB`). Every unit is binary: K, KB and KiB are 1,024 bytes,
/// M, MB and MiB 1,048,576, and so on (as `human` prints them, and as iperf3 reads `-n`).
/// Errors say what was wrong in one line.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a byte count (e.g. 1000, 64K, 100M, 1G)"))?;
    let mult: u64 = match unit.trim_start().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" | "kb" => 1 << 10,
        "m" | "mib" | "mb" => 1 << 20,
        "g" | "gib" | "gb" => 1 << 30,
        "t" | "tib" | "tb" => 1 << 40,
        _ => {
            return Err(format!(
                "unknown unit in `{s}` (use K, M, G or T: binary units)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("`{s}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::{human, parse_bytes};

    #[test]
    fn sizes_in_binary_units_however_written() {
        assert_eq!(parse_bytes("0"), Ok(0));
        assert_eq!(parse_bytes("64K"), Ok(65536));
        assert_eq!(parse_bytes("100M"), Ok(100 << 20));
        assert_eq!(parse_bytes("100MB"), Ok(100 << 20));
        assert_eq!(parse_bytes("100 MiB"), Ok(100 << 20));
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("1T"), Ok(1 << 40));
        assert_eq!(parse_bytes(" 7b "), Ok(7));
        assert!(parse_bytes("").unwrap_err().contains("not a byte count"));
        assert!(parse_bytes("M").unwrap_err().contains("not a byte count"));
        assert!(parse_bytes("1.5G").unwrap_err().contains("unknown unit"));
        assert!(parse_bytes("5X").unwrap_err().contains("unknown unit"));
        assert!(parse_bytes("99999999999T")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn a_parsed_size_prints_back_as_written() {
        for s in ["64K", "3M", "2G"] {
            let n = parse_bytes(s).unwrap();
            assert_eq!(
                human(n),
                format!("{}.0 {}iB", &s[..s.len() - 1], &s[s.len() - 1..])
            );
        }
    }

    #[test]
    fn bytes_in_binary_units() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(1023), "1023 B");
        assert_eq!(human(1024), "1.0 KiB");
        assert_eq!(human(3 << 20), "3.0 MiB");
        assert_eq!(human(1536 << 30), "1.5 TiB");
        assert_eq!(human(u64::MAX), "16777216.0 TiB");
    }
}
