//! Text from a peer made safe to print: every control character (C0, DEL, C1: terminal escape
//! sequences start with ESC or CSI) and every invisible formatting character that can reorder
//! or hide text on a terminal (bidirectional overrides and isolates, zero-width characters) is
//! shown as a `\u{..}` escape. The application protocol's decoders pass every message a peer
//! sends through [`printable`] ([`crate::wire::Reply`], [`crate::wire::ConnectReply`]), so
//! nothing printed from the network can move the cursor, retitle the window or rewrite what
//! the user sees (issue 41, finding 6).

/// Whether `c` must not reach a terminal as it is.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        )
}

/// `bytes` (UTF-8, invalid sequences replaced) with every hidden character escaped.
pub fn printable(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    if !text.chars().any(hidden) {
        return text.into_owned();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hidden(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_escapes_and_bidi_controls_are_shown_escaped() {
        let evil = "ok\x1b[2J\x1b]0;pwned\x07\r\n\u{9b}31m\u{202e}txt.exe\u{200b}é";
        let shown = printable(evil.as_bytes());
        assert!(!shown.chars().any(hidden), "{shown:?}");
        assert_eq!(
            shown,
            "ok\\u{1b}[2J\\u{1b}]0;pwned\\u{7}\\u{d}\\u{a}\\u{9b}31m\\u{202e}txt.exe\\u{200b}é"
        );
        // Ordinary text, any script, passes unchanged; invalid UTF-8 is replaced.
        assert_eq!(
            printable("disk full: 1.0 GiB — ünïcode".as_bytes()),
            "disk full: 1.0 GiB — ünïcode"
        );
        assert_eq!(printable(b"a\xffb"), "a\u{fffd}b");
    }
}
