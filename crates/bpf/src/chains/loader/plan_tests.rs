//! Unit tests of [`super::plan`] and of [`crate::chains::loader::commit`] on a model of the maps (no
//! BPF, no root): the ops planned for several files and states, and a commit that fails at
//! each of its writes in turn leaving the model as it was.

use super::*;
use crate::chains::abi::TenantInfo;
use crate::chains::loader::commit::{commit, Target};
use crate::chains::spec::{parse, Hook};
use std::cell::RefCell;

/// Devices v0 (index 2) and v1 (index 3) exist, nothing else; cgroups /a (100) and /b (200).
struct Fake;

impl Resolve for Fake {
    fn ifindex(&self, dev: &str) -> Result<u32, String> {
        match dev {
            "v0" => Ok(2),
            "v1" => Ok(3),
            _ => Err(format!("no interface `{dev}` here")),
        }
    }
    fn ifname(&self, idx: u32) -> String {
        format!("if{idx}")
    }
    fn cgroup_id(&self, path: &str) -> Result<u64, String> {
        match path {
            "/a" => Ok(100),
            "/b" => Ok(200),
            _ => Err(format!("no cgroup {path}")),
        }
    }
}

const V0I: DevHook = DevHook {
    ifindex: 2,
    hook: Hook::Ingress,
};
const V0E: DevHook = DevHook {
    ifindex: 2,
    hook: Hook::Egress,
};
const V1E: DevHook = DevHook {
    ifindex: 3,
    hook: Hook::Egress,
};

fn chain(name: &str, dev: &str, hook: &str, tenant: Option<&str>, act: &str) -> String {
    let t = tenant
        .map(|t| format!("tenant = \"{t}\"\n"))
        .unwrap_or_default();
    format!("[[chain]]\nname = \"{name}\"\ndev = \"{dev}\"\nhook = \"{hook}\"\n{t}links = [ {{ act = \"{act}\" }} ]\n\n")
}

fn uid_tenant(name: &str, uid: u32) -> TenantInfo {
    let mut i = TenantInfo::default();
    i.name[..name.len()].copy_from_slice(name.as_bytes());
    i.kind = abi::TENANT_UID;
    i.uid = uid;
    i
}

/// The chain name an op writes, if it writes one.
fn chain_of(op: &Op) -> Option<(u32, String)> {
    match op {
        Op::Chain { slot, chain } => Some((*slot, chain.name())),
        _ => None,
    }
}

fn hook(key: DevHook, old: u32, new: u32) -> Op {
    Op::Hook { key, old, new }
}

#[test]
fn new_chains_go_to_free_slots_and_the_hooks_switch_to_them() {
    let cur = Current {
        hooks: [(V0I, NO_CHAIN), (V0E, NO_CHAIN), (V1E, NO_CHAIN)].into(),
        ..Default::default()
    };
    let spec = parse(&format!(
        "{}{}",
        chain("out", "v0", "egress", None, "record"),
        chain("in", "v0", "ingress", None, "get_connect")
    ))
    .unwrap();
    let p = plan(&spec, &cur, &Fake, 7).unwrap();
    // slots in the order of the hooks (ingress first), then the switches; v1 keeps no chain
    assert_eq!(p.ops.len(), 4, "{:#?}", p.ops);
    assert_eq!(chain_of(&p.ops[0]), Some((0, "in".into())));
    assert_eq!(chain_of(&p.ops[1]), Some((1, "out".into())));
    assert!(matches!(&p.ops[0], Op::Chain { chain, .. } if chain.gen == 7 && chain.len == 1));
    assert_eq!(p.ops[2..], [hook(V0I, NO_CHAIN, 0), hook(V0E, NO_CHAIN, 1)]);
    // no tenants before, none after: no tenant op, no cache forgotten
    assert!(p.ops.iter().all(|o| o.phase() == 0 || o.phase() == 8));
}

#[test]
fn a_replaced_chain_takes_a_new_slot_and_unnamed_hooks_lose_theirs() {
    // v0 attached with a chain on egress (slot 0), v1 with one on egress (slot 3)
    let cur = Current {
        hooks: [(V0I, NO_CHAIN), (V0E, 0), (V1E, 3)].into(),
        ..Default::default()
    };
    let spec = parse(
        "[[chain]]\nname = \"new\"\ndev = \"v0\"\nhook = \"egress\"\nlinks = [ { act = \"set_backup\", backup = true } ]\n",
    )
    .unwrap();
    let p = plan(&spec, &cur, &Fake, 1).unwrap();
    assert_eq!(
        chain_of(&p.ops[0]),
        Some((1, "new".into())),
        "slots 0 and 3 are in use"
    );
    assert_eq!(
        p.ops[1..],
        [hook(V0E, 0, 1), hook(V1E, 3, NO_CHAIN), Op::ForgetPrio],
        "v0 ingress had no chain and keeps none: no write"
    );
    // loaded again on top of the result: another new slot, the old one (1) is left
    let after = Current {
        hooks: [(V0I, NO_CHAIN), (V0E, 1), (V1E, NO_CHAIN)].into(),
        ..Default::default()
    };
    let p = plan(&spec, &after, &Fake, 2).unwrap();
    assert_eq!(chain_of(&p.ops[0]), Some((0, "new".into())));
    assert_eq!(p.ops[1], hook(V0E, 1, 0));
}

/// Two tenants loaded (old: id 1, keep: id 2), each with a chain on v0 egress.
fn with_tenants() -> Current {
    Current {
        hooks: [(V0I, NO_CHAIN), (V0E, 4)].into(),
        tenant_hooks: [(TenantHook::new(V0E, 1), 5), (TenantHook::new(V0E, 2), 6)].into(),
        tenants: [(1, uid_tenant("old", 10)), (2, uid_tenant("keep", 20))].into(),
        who: [(Who::Uid(10), 1), (Who::Uid(20), 2)].into(),
        tenant_count: 2,
    }
}

#[test]
fn tenants_keep_their_ids_a_new_one_takes_a_free_id_and_a_removed_one_goes() {
    let cur = with_tenants();
    let text = format!(
        "[[tenant]]\nname = \"keep\"\nuid = 20\n\n[[tenant]]\nname = \"new\"\ncgroup = \"/a\"\n\n{}{}{}",
        chain("def", "v0", "egress", None, "record"),
        chain("n", "v0", "egress", Some("new"), "record"),
        chain("k", "v0", "egress", Some("keep"), "record"),
    );
    let p = plan(&parse(&text).unwrap(), &cur, &Fake, 1).unwrap();
    let chains: Vec<_> = p.ops.iter().filter_map(chain_of).collect();
    assert_eq!(
        chains,
        [(0, "def".into()), (1, "n".into()), (2, "k".into())],
        "slots 4, 5, 6 in use"
    );
    let mut new = TenantInfo::default();
    new.name[..3].copy_from_slice(b"new");
    new.kind = abi::TENANT_CGROUP;
    new.cgroup = 100;
    new.what[..2].copy_from_slice(b"/a");
    let rest: Vec<&Op> = p.ops.iter().filter(|o| o.phase() > 0).collect();
    assert_eq!(
        rest,
        [
            // `keep` keeps id 2; `new` takes id 1, which `old` leaves
            &Op::Tenant {
                id: 1,
                old: uid_tenant("old", 10),
                new
            },
            &Op::Who {
                who: Who::Cgroup(100),
                old: None,
                new: Some(1)
            },
            &Op::Who {
                who: Who::Uid(10),
                old: Some(1),
                new: None
            },
            &Op::ForgetFlows(Flows::All),
            &Op::TenantHook {
                key: TenantHook::new(V0E, 1),
                old: Some(5),
                new: Some(1)
            },
            &Op::TenantHook {
                key: TenantHook::new(V0E, 2),
                old: Some(6),
                new: Some(2)
            },
            &hook(V0E, 4, 0),
        ]
    );
    // a file without tenants: every tenant, its who and its chains go, tenancy off
    let p = plan(
        &parse(&chain("def", "v0", "egress", None, "record")).unwrap(),
        &cur,
        &Fake,
        1,
    )
    .unwrap();
    let free = TenantInfo::default();
    let want = [
        Op::Chain {
            slot: 0,
            chain: Box::new(match &p.ops[0] {
                Op::Chain { chain, .. } => **chain,
                o => panic!("{o:?}"),
            }),
        },
        Op::Tenant {
            id: 1,
            old: uid_tenant("old", 10),
            new: free,
        },
        Op::Tenant {
            id: 2,
            old: uid_tenant("keep", 20),
            new: free,
        },
        Op::Who {
            who: Who::Uid(10),
            old: Some(1),
            new: None,
        },
        Op::Who {
            who: Who::Uid(20),
            old: Some(2),
            new: None,
        },
        Op::TenantCount { old: 2, new: 0 },
        Op::ForgetFlows(Flows::All),
        Op::TenantHook {
            key: TenantHook::new(V0E, 1),
            old: Some(5),
            new: None,
        },
        Op::TenantHook {
            key: TenantHook::new(V0E, 2),
            old: Some(6),
            new: None,
        },
        hook(V0E, 4, 0),
    ];
    assert_eq!(p.ops, want);
    // the same tenants again: no tenant op at all
    let same = "[[tenant]]\nname = \"old\"\nuid = 10\n[[tenant]]\nname = \"keep\"\nuid = 20\n";
    let p = plan(&parse(same).unwrap(), &cur, &Fake, 1).unwrap();
    assert!(
        p.ops
            .iter()
            .all(|o| matches!(o, Op::TenantHook { new: None, .. } | Op::Hook { .. })),
        "{:#?}",
        p.ops
    );
}

#[test]
fn the_files_faults_carry_their_line_and_nothing_is_planned() {
    let cur = Current {
        hooks: [(V0I, NO_CHAIN), (V0E, NO_CHAIN)].into(),
        ..Default::default()
    };
    let text = format!(
        "{}{}",
        chain("a", "v0", "egress", None, "record"),
        chain("b", "v1", "egress", None, "record")
    );
    let e = plan(&parse(&text).unwrap(), &cur, &Fake, 1).unwrap_err();
    assert!(
        matches!(&e, LoadError::Spec { line: 7, fault: SpecFault::NotAttached { dev } } if dev == "v1"),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "line 7: v1 is not attached (run `nena policy attach --dev v1` first)"
    );
    let e = plan(
        &parse(&chain("a", "nosuch", "egress", None, "record")).unwrap(),
        &cur,
        &Fake,
        1,
    )
    .unwrap_err();
    assert_eq!(e.spec_line(), Some(1));
    assert_eq!(e.to_string(), "line 1: no interface `nosuch` here");
    let e = plan(
        &parse("[[tenant]]\nname = \"t\"\ncgroup = \"/nope\"\n").unwrap(),
        &cur,
        &Fake,
        1,
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "line 1: tenant `t`: no cgroup /nope");
    // not the file's fault: too many chains for the slots left
    let full = Current {
        hooks: (0..abi::MAX_CHAINS - 1)
            .map(|i| (DevHook::new(100 + i, Hook::Egress), i))
            .chain([(V0E, NO_CHAIN)])
            .collect(),
        ..Default::default()
    };
    let text = format!(
        "{}{}",
        chain("a", "v0", "egress", None, "record"),
        chain("b", "v0", "egress", Some("t"), "record")
    );
    let e = plan(
        &parse(&format!("[[tenant]]\nname = \"t\"\nuid = 1\n{text}")).unwrap(),
        &full,
        &Fake,
        1,
    )
    .unwrap_err();
    assert!(
        matches!(e, LoadError::NoFreeSlots { asked: 2, free: 1 }),
        "{e:?}"
    );
    assert_eq!(e.spec_line(), None);
}

#[test]
fn one_tenant_is_replaced_and_the_others_are_left() {
    let cur = with_tenants();
    let text = format!(
        "[[tenant]]\nname = \"keep\"\nuid = 21\n\n[[tenant]]\nname = \"old\"\nuid = 10\n\n{}",
        chain("k2", "v0", "ingress", Some("keep"), "record"),
    );
    let spec = parse(&text).unwrap();
    let p = plan_tenant(&spec, "keep", &cur, &Fake, 1).unwrap();
    let rest: Vec<&Op> = p.ops.iter().filter(|o| o.phase() > 0).collect();
    assert_eq!(chain_of(&p.ops[0]), Some((0, "k2".into())));
    assert_eq!(
        rest,
        [
            &Op::Tenant {
                id: 2,
                old: uid_tenant("keep", 20),
                new: uid_tenant("keep", 21)
            },
            &Op::Who {
                who: Who::Uid(21),
                old: None,
                new: Some(2)
            },
            &Op::Who {
                who: Who::Uid(20),
                old: Some(2),
                new: None
            },
            &Op::ForgetFlows(Flows::TenantOrNone(2)),
            &Op::TenantHook {
                key: TenantHook::new(V0I, 2),
                old: None,
                new: Some(0)
            },
            // its egress chain goes; tenant 1's stays, the default chains are not touched
            &Op::TenantHook {
                key: TenantHook::new(V0E, 2),
                old: Some(6),
                new: None
            },
        ]
    );
    let e = plan_tenant(&spec, "zz", &cur, &Fake, 1).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the file defines no tenant `zz` (it defines: keep, old)"
    );
    let e = plan_tenant(&spec, "keep", &Current::default(), &Fake, 1).unwrap_err();
    assert!(
        matches!(e, LoadError::TenantNotLoaded(ref t) if t == "keep"),
        "{e:?}"
    );
    // a definition that is another tenant's
    let clash = "[[tenant]]\nname = \"keep\"\nuid = 10\n";
    let e = plan_tenant(&parse(clash).unwrap(), "keep", &cur, &Fake, 1).unwrap_err();
    assert!(matches!(e, LoadError::TenantClash(_)), "{e:?}");
}

#[test]
fn one_hook_is_set_or_cleared() {
    let cur = Current {
        hooks: [(V0I, NO_CHAIN), (V0E, 0)].into(),
        ..Default::default()
    };
    let spec = parse(&chain("c", "v0", "ingress", None, "drop")).unwrap();
    let p = plan_set_chain(V0I, Some(&spec.chains[0]), &cur, &Fake, 1).unwrap();
    assert_eq!(chain_of(&p.ops[0]), Some((1, "c".into())));
    assert_eq!(p.ops[1..], [hook(V0I, NO_CHAIN, 1)]);
    let p = plan_set_chain(V0E, None, &cur, &Fake, 1).unwrap();
    assert_eq!(p.ops, [hook(V0E, 0, NO_CHAIN)]);
    let e = plan_set_chain(V1E, None, &cur, &Fake, 1).unwrap_err();
    assert_eq!(e.to_string(), "if3 is not attached");
}

/// A model of the maps (a [`Current`] and the chain slots) that fails its `fail_at`-th write.
struct Mem {
    state: RefCell<(Current, BTreeMap<u32, String>)>,
    writes: RefCell<Vec<Op>>,
    fail_at: Option<usize>,
}

impl Mem {
    fn new(cur: &Current, fail_at: Option<usize>) -> Mem {
        Mem {
            state: RefCell::new((cur.clone(), BTreeMap::new())),
            writes: RefCell::default(),
            fail_at,
        }
    }
}

impl Target for Mem {
    fn write(&self, op: &Op) -> Result<(), LoadError> {
        let n = self.writes.borrow().len();
        self.writes.borrow_mut().push(op.clone());
        if self.fail_at == Some(n) {
            return Err(LoadError::Map {
                what: "a write the test fails".into(),
                source: libbpf_rs::Error::from_raw_os_error(libc::ENOMEM),
            });
        }
        let mut st = self.state.borrow_mut();
        let (cur, chains) = &mut *st;
        fn set<K: Ord, V>(m: &mut BTreeMap<K, V>, k: K, v: Option<V>) {
            match v {
                Some(v) => m.insert(k, v),
                None => m.remove(&k),
            };
        }
        match op {
            Op::Chain { slot, chain } => {
                chains.insert(*slot, chain.name());
            }
            Op::Tenant { id, new, .. } => {
                let v = (new.kind != abi::TENANT_FREE).then_some(*new);
                set(&mut cur.tenants, *id, v);
            }
            Op::Who { who, new, .. } => set(&mut cur.who, *who, *new),
            Op::TenantCount { new, .. } => cur.tenant_count = *new,
            Op::ForgetFlows(_) | Op::ForgetPrio => {}
            Op::TenantHook { key, new, .. } => set(&mut cur.tenant_hooks, *key, *new),
            Op::Hook { key, new, .. } => match cur.hooks.get_mut(key) {
                Some(s) => *s = *new,
                None => panic!("EXIST: {key:?}"),
            },
        }
        Ok(())
    }
}

fn mixed_spec() -> PolicySpec {
    parse(&format!(
        "[[tenant]]\nname = \"keep\"\nuid = 20\n\n[[tenant]]\nname = \"new\"\ncgroup = \"/b\"\n\n{}{}{}",
        chain("def", "v0", "egress", None, "record"),
        chain("n", "v0", "ingress", Some("new"), "record"),
        chain("k", "v0", "egress", Some("keep"), "record"),
    ))
    .unwrap()
}

#[test]
fn a_commit_writes_in_phase_order_and_ends_where_the_plan_said() {
    let cur = with_tenants();
    let p = plan(&mixed_spec(), &cur, &Fake, 1).unwrap();
    let mem = Mem::new(&cur, None);
    commit(&p, &mem).unwrap();
    let phases: Vec<u8> = mem.writes.borrow().iter().map(Op::phase).collect();
    assert!(phases.windows(2).all(|w| w[0] <= w[1]), "{phases:?}");
    assert_eq!(mem.writes.borrow().len(), p.ops.len());
    let (after, chains) = &*mem.state.borrow();
    assert_eq!(after.hooks[&V0E], 0);
    assert_eq!(chains[&0], "def");
    assert_eq!(
        after.tenant_hooks,
        [(TenantHook::new(V0I, 1), 1), (TenantHook::new(V0E, 2), 2)].into()
    );
    assert_eq!(after.who, [(Who::Cgroup(200), 1), (Who::Uid(20), 2)].into());
    assert_eq!(after.tenants[&1].name(), "new");
    assert_eq!(after.tenant_count, 2);
    // planned again from there: the same file changes nothing but the chains' slots
    let again = plan(&mixed_spec(), after, &Fake, 2).unwrap();
    assert!(again.ops.iter().all(|o| matches!(
        o,
        Op::Chain { .. } | Op::TenantHook { .. } | Op::Hook { .. }
    )));
}

#[test]
fn a_commit_failing_at_any_write_leaves_the_maps_as_they_were() {
    let cur = with_tenants();
    let p = plan(&mixed_spec(), &cur, &Fake, 1).unwrap();
    let n = p.ops.len();
    assert!(n >= 10, "{n} ops");
    for k in 0..n {
        let mem = Mem::new(&cur, Some(k));
        let e = commit(&p, &mem).unwrap_err();
        assert!(
            matches!(&e, LoadError::RolledBack { cause } if matches!(**cause, LoadError::Map { .. })),
            "{e:?}"
        );
        let (after, _) = &*mem.state.borrow();
        assert_eq!(after, &cur, "failing at write {k}");
        // the undo ran newest first, after the failing write (and undid that one too if it
        // was a hook's, whose hash entry may be written when its mirror is not)
        let w = mem.writes.borrow();
        let ops = p.ordered();
        let upto = if matches!(ops[k], Op::Hook { .. }) {
            k + 1
        } else {
            k
        };
        let undone: Vec<Op> = ops[..upto]
            .iter()
            .rev()
            .filter_map(|o| o.inverse())
            .collect();
        assert_eq!(w[k + 1..], undone[..], "failing at write {k}");
    }
}
