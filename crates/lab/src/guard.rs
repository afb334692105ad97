//! A lab that tears itself down when dropped, for tests: also when a test fails or panics.

use crate::{unique_prefix, Lab, LabConfig};
use anyhow::Result;

/// A lab torn down when dropped (for tests). Derefs to [`Lab`].
#[derive(Debug)]
pub struct LabGuard(pub(crate) Lab);

impl LabGuard {
    /// Bring a lab up and tear it down when the guard is dropped. If `up` fails, whatever
    /// was half-built is removed before the error is returned.
    pub fn up(cfg: &LabConfig) -> Result<LabGuard> {
        match Lab::up(cfg) {
            Ok(lab) => Ok(LabGuard(lab)),
            Err(e) => {
                if let Err(e2) = Lab::down(&cfg.prefix) {
                    log::warn!("cleaning up after failed up: {e2:#}");
                }
                Err(e)
            }
        }
    }

    /// A lab with a fresh unique prefix and otherwise default settings.
    pub fn unique() -> Result<LabGuard> {
        LabGuard::up(&LabConfig::with_prefix(unique_prefix()))
    }
}

impl From<Lab> for LabGuard {
    fn from(lab: Lab) -> Self {
        LabGuard(lab)
    }
}

impl std::ops::Deref for LabGuard {
    type Target = Lab;
    fn deref(&self) -> &Lab {
        &self.0
    }
}

impl Drop for LabGuard {
    fn drop(&mut self) {
        if let Err(e) = Lab::down(&self.0.prefix) {
            eprintln!("nena-lab: tearing down `{}`: {e:#}", self.0.prefix);
        }
    }
}
