//! The [`Lab`] handle itself (a leaf): what every part of the lab that acts on one
//! (`build`, `capture`, `state`, `status`, ...) takes; its methods live with their concern.

use std::path::PathBuf;

/// A handle on a lab that is up. Dropping it does NOT tear the lab down (see
/// [`LabGuard`](crate::LabGuard)).
#[derive(Debug, Clone)]
pub struct Lab {
    pub(crate) prefix: String,
    pub(crate) state_dir: PathBuf,
}
