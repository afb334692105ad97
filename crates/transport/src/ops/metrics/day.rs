//! The local calendar day, for the `_today` gauges: which day it is now and the Unix time
//! of its midnight, by the C library's local time (`TZ`, else `/etc/localtime`).

/// One local calendar day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Day {
    /// Years since 1900 and day of the year (0-365), as `struct tm` has them.
    pub year: i32,
    pub yday: i32,
    /// Unix time of the day's local midnight.
    pub start_unix: i64,
}

impl Day {
    /// The local day of Unix time `t`.
    pub fn of(t: i64) -> Day {
        // SAFETY: `tm` is plain data; localtime_r and mktime only read and write through the
        // pointers they are given, both to live values for the calls.
        unsafe {
            let mut tm: libc::tm = std::mem::zeroed();
            let tt: libc::time_t = t as libc::time_t;
            if libc::localtime_r(&tt, &mut tm).is_null() {
                // No local time to be had: UTC days.
                let start = t - t.rem_euclid(86_400);
                return Day {
                    year: (t.div_euclid(86_400) / 366) as i32,
                    yday: t.div_euclid(86_400) as i32,
                    start_unix: start,
                };
            }
            let (year, yday) = (tm.tm_year, tm.tm_yday);
            tm.tm_hour = 0;
            tm.tm_min = 0;
            tm.tm_sec = 0;
            tm.tm_isdst = -1;
            let start = libc::mktime(&mut tm);
            Day {
                year,
                yday,
                start_unix: if start == -1 { t } else { start as i64 },
            }
        }
    }

    /// The local day now.
    pub fn now() -> Day {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        Day::of(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A day starts at its midnight, holds every second until the next one, and the next
    /// midnight starts another day.
    #[test]
    fn a_day_runs_from_its_midnight_to_the_next() {
        let d = Day::of(1_800_000_000);
        assert!(d.start_unix <= 1_800_000_000 && 1_800_000_000 - d.start_unix < 86_400 + 3_600);
        assert_eq!(Day::of(d.start_unix), d);
        let next = Day::of(d.start_unix + 86_400 + 3_600);
        assert_ne!(next, d);
        assert!(next.start_unix > d.start_unix);
        assert_eq!(Day::of(next.start_unix - 1), d);
    }
}
