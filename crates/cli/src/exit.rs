//! How a subcommand fails: a one-line message on stderr and an exit status.
//! Status 2 is for bad input (usage, syntax, and the codec's I/O errors, as its issue asks);
//! status 1 for an operation that was attempted and failed; status 130 for a run that Ctrl-C
//! ended after its lab was torn down ([`nena_lab::Interrupted`]).

use std::process::ExitCode;

/// A failed subcommand: the error and the status to exit with.
#[derive(Debug)]
pub struct Exit {
    pub code: u8,
    pub error: anyhow::Error,
}

pub type CmdResult = Result<(), Exit>;

impl Exit {
    /// Bad input: exit status 2.
    pub fn usage(error: impl Into<anyhow::Error>) -> Self {
        Exit {
            code: 2,
            error: error.into(),
        }
    }

    /// The command lacks the capabilities it needs: status 1, the line names the fix.
    pub fn from_missing(e: nena_transport::ops::privilege::MissingPrivilege) -> Self {
        Exit {
            code: 1,
            error: e.into(),
        }
    }

    /// Print `nena: <error chain on one line>` to stderr and return the status.
    pub fn report(self) -> ExitCode {
        let msg = format!("{:#}", self.error).replace('\n', " ");
        let msg = nena_transport::error::hint::with_fix(self.error.as_ref(), msg);
        eprintln!("nena: {msg}");
        ExitCode::from(self.code)
    }
}

impl From<anyhow::Error> for Exit {
    fn from(error: anyhow::Error) -> Self {
        // The lab's commands (bench, scenario, attack) return anyhow errors, and
        // nena_lab::Interrupted travels inside one: the one downcast left here.
        let code = if error.downcast_ref::<nena_lab::Interrupted>().is_some() {
            130
        } else {
            1
        };
        Exit { code, error }
    }
}

/// A session of nena-transport failed (`nena send|get|perf`): every kind of its
/// [`nena_transport::Error`] is an operation that was attempted and failed, status 1 (an
/// interrupt of these commands is one of them too: it is no lab's [`nena_lab::Interrupted`]);
/// the message is the error's chain, as before. No downcast: a status of its own for one
/// kind would be a `match` on [`nena_transport::Error::kind`] here.
impl From<nena_transport::Error> for Exit {
    fn from(error: nena_transport::Error) -> Self {
        Exit {
            code: 1,
            error: error.into(),
        }
    }
}

/// The client settings were refused (nena-transport's `conn::settings`): bad input, status
/// 2, or resolving them failed, status 1.
impl From<nena_transport::conn::SettingsError> for Exit {
    fn from(e: nena_transport::conn::SettingsError) -> Self {
        use nena_transport::conn::SettingsError;
        match e {
            SettingsError::Invalid(e) => Exit::usage(e),
            SettingsError::Failed(e) => Exit::from(anyhow::Error::from(e)),
        }
    }
}
