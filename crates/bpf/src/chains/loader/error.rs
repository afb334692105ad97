//! [`LoadError`]: why a load (`apply`, `apply_tenant`, `set_chain`) failed, typed, so that a
//! caller tells the file's faults (a [`LoadError::Spec`], with the line of the file) from the
//! kernel's and the state's without reading messages. The `nena policy load` command exits
//! with status 2 on a `Spec` error and 1 on the others.

use crate::chains::spec::SpecError;

/// What is wrong with a policy file, found while planning its load (the parser's own
/// errors come as [`SpecFault::Parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecFault {
    /// The parser refused the file.
    #[error("{0}")]
    Parse(String),
    /// A chain names a device that does not exist here (the lookup's message).
    #[error("{0}")]
    NoDevice(String),
    /// A chain names a device the dispatchers are not attached to.
    #[error("{dev} is not attached (run `nena policy attach --dev {dev}` first)")]
    NotAttached { dev: String },
    /// A tenant's cgroup cannot be resolved.
    #[error("tenant `{tenant}`: {why}")]
    NoCgroup { tenant: String, why: String },
    /// A chain names a tenant the file does not define.
    #[error("chain `{chain}`: no tenant `{tenant}` in the file")]
    UnknownTenant { chain: String, tenant: String },
}

/// Why a load failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file's fault, at `line` (1-based; 0: a spec built in code, no line is shown). The
    /// parser gives lines only (no columns).
    #[error("{}{fault}", if *line > 0 { format!("line {line}: ") } else { String::new() })]
    Spec { line: usize, fault: SpecFault },
    /// A device named by the caller (not by a file) does not exist here.
    #[error("{0}")]
    NoDevice(String),
    /// A hook named by the caller (not by a file) is not attached.
    #[error("{dev} is not attached")]
    NotAttached { dev: String },
    /// `--tenant NAME` names a tenant the file does not define.
    #[error("the file defines no tenant `{name}` (it defines: {known})")]
    NoSuchTenant { name: String, known: String },
    /// `--tenant NAME` names a tenant that is not in the maps yet.
    #[error("tenant `{0}` is not loaded (load the whole file first, without --tenant)")]
    TenantNotLoaded(String),
    /// A tenant's new definition is another loaded tenant's.
    #[error("tenant `{0}`: another tenant has that cgroup or uid")]
    TenantClash(String),
    /// More chains than free slots.
    #[error("{asked} chains asked, {free} slots free")]
    NoFreeSlots { asked: usize, free: usize },
    /// Every tenant id is taken.
    #[error("no tenant id left")]
    NoTenantId,
    /// A map read or write the kernel refused.
    #[error("{what}")]
    Map {
        what: String,
        #[source]
        source: libbpf_rs::Error,
    },
    /// A write of a commit failed; the writes before it (and it) were undone.
    #[error("rolled back after a failed write")]
    RolledBack {
        #[source]
        cause: Box<LoadError>,
    },
}

impl LoadError {
    /// The line of the file at fault, if this is the file's fault.
    pub fn spec_line(&self) -> Option<usize> {
        match self {
            LoadError::Spec { line, .. } => Some(*line),
            _ => None,
        }
    }

    /// A map error: what was being done, and the kernel's error.
    pub(super) fn map(what: impl Into<String>) -> impl FnOnce(libbpf_rs::Error) -> LoadError {
        let what = what.into();
        move |source| LoadError::Map { what, source }
    }
}

impl From<SpecError> for LoadError {
    fn from(e: SpecError) -> LoadError {
        LoadError::Spec {
            line: e.line,
            fault: SpecFault::Parse(e.msg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_error_shows_its_line_and_carries_it() {
        let e = LoadError::Spec {
            line: 18,
            fault: SpecFault::NotAttached { dev: "v1".into() },
        };
        assert_eq!(
            e.to_string(),
            "line 18: v1 is not attached (run `nena policy attach --dev v1` first)"
        );
        assert_eq!(e.spec_line(), Some(18));
        let e = LoadError::Spec {
            line: 0,
            fault: SpecFault::NoDevice("no interface `x` here".into()),
        };
        assert_eq!(e.to_string(), "no interface `x` here");
        let e: LoadError = crate::chains::spec::parse("[[chain]]\nname = 3\n")
            .unwrap_err()
            .into();
        assert_eq!(e.spec_line(), Some(2), "{e}");
        assert_eq!(LoadError::NoTenantId.spec_line(), None);
    }
}
