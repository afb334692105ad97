//! Things worth saying once per process: why a connection is single-path is the same for
//! every connection of a proxy that runs for hours, and one line says it. Each note is
//! logged as a warning the first time its key is seen, at debug level after that.

use std::collections::HashSet;
use std::sync::Mutex;

static SAID: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Log `line` as a warning if no note with `key` was logged by this process before (at
/// debug level otherwise). True the first time.
pub fn say_once(key: &str, line: &str) -> bool {
    let first = SAID
        .lock()
        .map(|mut s| s.get_or_insert_with(HashSet::new).insert(key.to_string()))
        .unwrap_or(true);
    if first {
        log::warn!("{line}");
    } else {
        log::debug!("{line}");
    }
    first
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_key_is_said_once() {
        assert!(super::say_once("notes-test a", "one"));
        assert!(!super::say_once("notes-test a", "one again"));
        assert!(super::say_once("notes-test b", "another"));
    }
}
