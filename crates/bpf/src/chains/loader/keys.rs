//! Typed keys of the loader's maps, in place of `(u32, u32)` tuples: [`DevHook`] (a hook of a
//! device: the `hooks` hash, mirrored in the `hook_slots` array), [`TenantHook`] (a tenant's
//! chain of a hook: `tenant_hooks`) and [`Who`] (`tenant_cgroups` / `tenant_uids`). The bytes
//! on the maps are those of the C structs, through [`abi::HookKey`]: these types only name
//! the fields.

use crate::chains::abi::{self, HookKey};
use crate::chains::spec::Hook;

/// A hook of an attached device: key of the `hooks` hash (`struct hook_key`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DevHook {
    pub ifindex: u32,
    pub hook: Hook,
}

impl DevHook {
    pub fn new(ifindex: u32, hook: Hook) -> DevHook {
        DevHook { ifindex, hook }
    }

    /// The key as the map holds it.
    pub fn to_abi(self) -> HookKey {
        HookKey {
            ifindex: self.ifindex,
            hook: self.hook.abi(),
        }
    }

    /// A key of the `hooks` hash, if it is a hook's (not a marker such as CLSACT_OWNED).
    pub fn from_abi(k: HookKey) -> Option<DevHook> {
        let hook = match k.hook {
            abi::HOOK_XDP => Hook::Ingress,
            abi::HOOK_TC => Hook::Egress,
            _ => return None,
        };
        Some(DevHook {
            ifindex: k.ifindex,
            hook,
        })
    }

    /// Index of this hook in the `hook_slots` array (None: the device is not mirrored there,
    /// its index is FAST_IFINDEX or above).
    pub fn fast_index(self) -> Option<u32> {
        (self.ifindex < abi::FAST_IFINDEX).then(|| self.ifindex * 2 + self.hook.abi())
    }
}

/// A tenant's chain of one hook: key of `tenant_hooks`, on the map
/// `{ifindex, hook | tenant << TENANT_SHIFT}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TenantHook {
    pub at: DevHook,
    /// The tenant id (1..MAX_TENANTS).
    pub tenant: u32,
}

impl TenantHook {
    pub fn new(at: DevHook, tenant: u32) -> TenantHook {
        TenantHook { at, tenant }
    }

    pub fn to_abi(self) -> HookKey {
        HookKey {
            ifindex: self.at.ifindex,
            hook: self.at.hook.abi() | (self.tenant << abi::TENANT_SHIFT),
        }
    }

    pub fn from_abi(k: HookKey) -> Option<TenantHook> {
        let at = DevHook::from_abi(HookKey {
            ifindex: k.ifindex,
            hook: k.hook & ((1 << abi::TENANT_SHIFT) - 1),
        })?;
        Some(TenantHook {
            at,
            tenant: k.hook >> abi::TENANT_SHIFT,
        })
    }
}

/// Who a tenant is, as the programs look it up: a cgroup id (key of `tenant_cgroups`, u64)
/// or a uid (key of `tenant_uids`, u32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Who {
    Cgroup(u64),
    Uid(u32),
}

impl Who {
    /// The map key's bytes (native endian, as the programs read it).
    pub fn key_bytes(self) -> Vec<u8> {
        match self {
            Who::Cgroup(c) => c.to_ne_bytes().to_vec(),
            Who::Uid(u) => u.to_ne_bytes().to_vec(),
        }
    }

    /// Who a tenant's definition names (None: a free id).
    pub fn of(t: &abi::TenantInfo) -> Option<Who> {
        match t.kind {
            abi::TENANT_CGROUP => Some(Who::Cgroup(t.cgroup)),
            abi::TENANT_UID => Some(Who::Uid(t.uid)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chains::abi::Pod;

    #[test]
    fn the_bytes_on_the_maps_are_the_tuples_they_replace() {
        let k = TenantHook::new(DevHook::new(7, Hook::Egress), 3);
        let hk = k.to_abi();
        assert_eq!((hk.ifindex, hk.hook), (7, 1 | (3 << abi::TENANT_SHIFT)));
        let mut want = 7u32.to_ne_bytes().to_vec();
        want.extend_from_slice(&(1u32 | 3 << 8).to_ne_bytes());
        assert_eq!(hk.as_bytes(), &want[..]);
        assert_eq!(TenantHook::from_abi(hk), Some(k));
        let d = DevHook::new(7, Hook::Ingress);
        assert_eq!(DevHook::from_abi(d.to_abi()), Some(d));
        assert_eq!(d.fast_index(), Some(14));
        assert_eq!(
            DevHook::new(abi::FAST_IFINDEX, Hook::Egress).fast_index(),
            None
        );
        // the clsact marker of attach is not a hook
        assert_eq!(
            DevHook::from_abi(HookKey {
                ifindex: 7,
                hook: 0x100
            }),
            None
        );
        assert!(DevHook::new(1, Hook::Ingress) < DevHook::new(1, Hook::Egress));
        assert_eq!(Who::Uid(5).key_bytes(), 5u32.to_ne_bytes());
        assert_eq!(Who::Cgroup(5).key_bytes(), 5u64.to_ne_bytes());
    }
}
