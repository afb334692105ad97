//! The loader's commit on the real pinned maps (root, BPF): a load whose hook write fails
//! midway (the hook's entry removed between plan and commit, as a concurrent detach would)
//! is rolled back, and the chains loaded before stay in force.
mod common;
use common::*;
use nena_bpf::chains::loader::{commit, ifindex, plan, DevHook, HostResolver, LoadError};
use nena_bpf::{chains::spec, Hook, Policy};
use std::collections::BTreeMap;

fn file(chains: &[(&str, &str)]) -> String {
    chains
        .iter()
        .map(|(dev, hook)| {
            format!("[[chain]]\nname = \"{dev}-{hook}\"\ndev = \"{dev}\"\nhook = \"{hook}\"\nlinks = [ {{ act = \"record\" }} ]\n")
        })
        .collect()
}

/// (device, hook) -> chain name, from `status`.
fn chains(p: &Policy) -> BTreeMap<(String, Hook), Option<String>> {
    p.status()
        .unwrap()
        .hooks
        .into_iter()
        .filter(|h| h.tenant.is_none())
        .map(|h| ((h.dev, h.hook), h.chain))
        .collect()
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_commit_that_fails_midway_on_the_maps_is_rolled_back() {
    let net = Net::new();
    let pins = Pins::new();
    let d = pins.path().to_path_buf();
    net.in_ns(&net.client.clone(), move || {
        let p = Policy::attach(&d, "c1").unwrap();
        Policy::attach(&d, "c2").unwrap();
        let first = spec::parse(&file(&[("c1", "egress"), ("c2", "egress")])).unwrap();
        p.apply(&first).unwrap();
        let before = chains(&p);
        assert_eq!(
            before[&("c1".to_string(), Hook::Egress)].as_deref(),
            Some("c1-egress")
        );
        // the second file sets all four hooks; the last hook written (the larger index's
        // egress) loses its entry before the commit
        let all = [
            ("c1", "ingress"),
            ("c1", "egress"),
            ("c2", "ingress"),
            ("c2", "egress"),
        ];
        let second = spec::parse(&file(&all)).unwrap();
        let cur = p.current().unwrap();
        let pl = plan(&second, &cur, &HostResolver, 1).unwrap();
        let last = DevHook::new(ifindex("c1").unwrap().max(ifindex("c2").unwrap()), Hook::Egress);
        let hooks = libbpf_rs::MapHandle::from_pinned_path(d.join("hooks")).unwrap();
        use libbpf_rs::MapCore;
        use nena_bpf::chains::abi::Pod;
        hooks.delete(last.to_abi().as_bytes()).unwrap();
        let e = commit(&pl, &p).unwrap_err();
        assert!(
            matches!(&e, LoadError::RolledBack { cause } if matches!(**cause, LoadError::Map { .. })),
            "{e:?}"
        );
        // the three other hooks are as they were (two of them were switched, then undone),
        // and the removed entry was not brought back by the undo
        let mut want = cur.hooks.clone();
        want.remove(&last);
        assert_eq!(p.current().unwrap().hooks, want);
        let mut left = before.clone();
        left.retain(|(dev, h), _| DevHook::new(ifindex(dev).unwrap(), *h) != last);
        assert_eq!(chains(&p), left);
    });
}
