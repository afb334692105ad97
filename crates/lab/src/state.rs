//! What a lab remembers between commands (its configuration and which links are down), in
//! `/run/nena/lab/<prefix>/state.json`, written atomically.

use crate::{Lab, LabConfig, Link};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::PathBuf;

/// Where the lab keeps its state (config, capture records): `/run/nena/lab/<prefix>`.
pub fn state_dir(prefix: &str) -> PathBuf {
    PathBuf::from("/run/nena/lab").join(prefix)
}

/// What the state directory remembers between commands.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct State {
    pub(crate) config: LabConfig,
    #[serde(default)]
    pub(crate) links_down: Vec<Link>,
    /// The relay process of the emulated links, if any.
    #[serde(default)]
    pub(crate) relay_pid: Option<u32>,
    /// The generation of the last `emulation.json` written.
    #[serde(default)]
    pub(crate) generation: u64,
    /// Fleet servers taken out of the balancer ([`Lab::set_fleet_member`]).
    #[serde(default)]
    pub(crate) fleet_out: Vec<u8>,
}

impl Lab {
    pub(crate) fn load(&self) -> Result<State> {
        let p = self.state_dir.join("state.json");
        let b = fs::read(&p).with_context(|| format!("cannot read {}", p.display()))?;
        serde_json::from_slice(&b).with_context(|| format!("corrupt {}", p.display()))
    }

    pub(crate) fn save(&self, st: &State) -> Result<()> {
        fs::create_dir_all(&self.state_dir)?;
        let p = self.state_dir.join("state.json");
        let tmp = self.state_dir.join("state.json.tmp");
        fs::write(&tmp, serde_json::to_vec_pretty(st)?)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        fs::rename(&tmp, &p).with_context(|| format!("cannot write {}", p.display()))?;
        Ok(())
    }
}
