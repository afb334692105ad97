//! A progress bar on standard error, shown only when standard error is a terminal.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// Progress of a benchmark run; silent unless stderr is a TTY.
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar with `message` if stderr is a terminal, otherwise nothing.
    pub fn stderr_if_tty(message: &str) -> Self {
        if !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = ProgressBar::new(0);
        if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({eta})") {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(message.to_string());
        Progress { bar: Some(bar) }
    }

    /// Report `done` of `total` steps.
    pub fn update(&self, done: u64, total: u64) {
        if let Some(b) = &self.bar {
            b.set_length(total);
            b.set_position(done);
        }
    }

    /// Remove the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
