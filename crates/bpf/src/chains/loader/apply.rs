//! Applying a policy, the entry points of [`Policy`]: a file's chains, a tenant's chains or
//! one hook's chain loaded, each as a [`super::plan`] of the state read from the maps, then
//! [`super::commit`]ted: chains written into free slots of the `chains` map (their counters
//! reset), then swapped in by one update of each hook's slot id; a failed write is rolled
//! back.

use super::commit::commit;
use super::error::LoadError;
use super::host::ifindex;
use super::keys::DevHook;
use super::plan::{plan, plan_set_chain, plan_tenant};
use super::tenants::HostResolver;
use super::Policy;
use crate::chains::spec::{ChainSpec, Hook, PolicySpec};

impl Policy {
    /// Replace the whole policy: every chain of `spec` is checked first (devices exist and are
    /// attached, slots are free), then written to free slots, then swapped in; hooks that
    /// `spec` does not name get no chain. Nothing is half-applied.
    pub fn apply(&self, spec: &PolicySpec) -> Result<(), LoadError> {
        let p = plan(spec, &self.current()?, &HostResolver, gen_now())?;
        commit(&p, self)
    }

    /// Replace the chains of one tenant only, with those `spec` gives it (its hooks the file
    /// does not name for it fall back to the default chain). The default chains, the other
    /// tenants' chains and their counters are not touched, nor are their flows. The tenant
    /// must be loaded already (by `apply`); its definition (cgroup or uid) is updated from
    /// `spec` if it changed.
    pub fn apply_tenant(&self, spec: &PolicySpec, name: &str) -> Result<(), LoadError> {
        let p = plan_tenant(spec, name, &self.current()?, &HostResolver, gen_now())?;
        commit(&p, self)
    }

    /// Set (or clear, with None) the chain of one hook of an attached device, leaving the
    /// others alone: the library call nena's transport uses.
    pub fn set_chain(
        &self,
        dev: &str,
        hook: Hook,
        chain: Option<&ChainSpec>,
    ) -> Result<(), LoadError> {
        let idx = ifindex(dev).map_err(|e| LoadError::NoDevice(e.to_string()))?;
        self.set_chain_ifindex(idx, hook, chain)
    }

    /// `set_chain` by interface index (no name lookup, so callable from any namespace).
    pub fn set_chain_ifindex(
        &self,
        idx: u32,
        hook: Hook,
        chain: Option<&ChainSpec>,
    ) -> Result<(), LoadError> {
        let key = DevHook::new(idx, hook);
        let p = plan_set_chain(key, chain, &self.current()?, &HostResolver, gen_now())?;
        commit(&p, self)
    }
}

/// A chain's generation number: informational (shown as is), milliseconds of the wall clock.
fn gen_now() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u32)
        .unwrap_or(0)
}
