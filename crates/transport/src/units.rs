//! Byte counts as people read them (`12.3 MiB`): the server's refusals, the log lines and
//! the CLI's reports. A leaf: it imports nothing of the crate.

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

#[cfg(test)]
mod tests {
    use super::human;

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
