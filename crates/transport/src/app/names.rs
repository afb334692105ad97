//! File names that arrive from the network: what the server accepts as a name inside DIR.
//!
//! A name is a single path component: not empty, at most [`crate::wire::MAX_NAME`] bytes,
//! no `/` or `\`, not `.` or `..`, not hidden (a leading `.` is reserved for the server's
//! temporary files), no NUL or other control characters. Anything else is refused before
//! the file system is touched, so no name can reach outside DIR.

pub use crate::wire::NameError;

/// Check a name received from the network (or given to `send`/`get`).
pub fn check_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > crate::wire::MAX_NAME {
        return Err(NameError::TooLong);
    }
    if name.contains(['/', '\\']) {
        return Err(NameError::Separator);
    }
    if name == "." || name == ".." {
        return Err(NameError::Dots);
    }
    if name.starts_with('.') {
        return Err(NameError::Hidden);
    }
    if name.chars().any(char::is_control) {
        return Err(NameError::Control);
    }
    Ok(())
}

/// A file name checked once, as [`check_name`] checks it: what `nena send` stores a file as
/// and `nena get` asks for ([`crate::app::files::send_name`], [`crate::app::files::get_dest`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileName(String);

impl FileName {
    /// `name`, if [`check_name`] accepts it.
    pub fn new(name: &str) -> Result<FileName, NameError> {
        check_name(name)?;
        Ok(FileName(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_names() {
        for n in [
            "a",
            "file.bin",
            "report 2024 (final).pdf",
            "ünïcödé.txt",
            "a..b",
            "x.",
        ] {
            assert_eq!(check_name(n), Ok(()), "{n}");
        }
        assert_eq!(check_name(&"x".repeat(255)), Ok(()));
    }

    #[test]
    fn hostile_names() {
        let cases: &[(&str, NameError)] = &[
            ("", NameError::Empty),
            ("..", NameError::Dots),
            (".", NameError::Dots),
            ("../etc/passwd", NameError::Separator),
            ("/etc/passwd", NameError::Separator),
            ("a/b", NameError::Separator),
            ("..\\win", NameError::Separator),
            (".hidden", NameError::Hidden),
            (".nena-upload.part", NameError::Hidden),
            ("nul\0byte", NameError::Control),
            ("new\nline", NameError::Control),
            ("esc\x1b[2J", NameError::Control),
            ("del\x7f", NameError::Control),
        ];
        for (n, e) in cases {
            assert_eq!(check_name(n).as_ref(), Err(e), "{n:?}");
        }
        assert_eq!(check_name(&"x".repeat(256)), Err(NameError::TooLong));
    }
}
