//! Tenants (root, BPF): which chain a packet runs when tenants are defined.
//!
//! - With BPF_PROG_TEST_RUN (no socket): a flow the egress side attributed to a tenant runs
//!   that tenant's chain at egress and, through the per-flow map, at ingress (reverse flow);
//!   a tenant with no chain on a hook, and a flow of no tenant, run the default chain.
//! - In two network namespaces with real MPTCP: a connection made with uid 4242 runs the uid
//!   tenant's chain on both paths, its initial subflow and its join, although the join's
//!   socket, made by the kernel's path manager, has sk_uid 0 (the programs read the uid of
//!   the MPTCP socket instead); a connection of another uid runs the default chain.

mod common;

use common::*;
use nena_bpf::chains::packet::{mp, Tcp};
use nena_bpf::chains::spec::{parse, ChainSpec};
use nena_bpf::{Hook, Policy, TestBed};
use std::io::Write;
use std::time::Duration;

fn chain(hook: Hook, links: &str) -> ChainSpec {
    let text = format!(
        "[[chain]]\nname = \"t\"\ndev = \"lo\"\nhook = \"{}\"\nlinks = [ {links} ]\n",
        hook.name()
    );
    parse(&text).unwrap().chains.remove(0)
}

fn hits(b: &TestBed, slot: u32) -> Vec<u64> {
    b.slot_stats(slot).unwrap().iter().map(|s| s.hits).collect()
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_flows_tenant_picks_its_chain_and_no_rule_means_the_default() {
    let mut b = TestBed::new().expect("loading the BPF object (root and BPF needed)");
    // default chains on both hooks, tenant 1's own chain on both, tenant 2's at egress only,
    // tenant 3 none
    let mut default = [0u32; 2];
    let mut t1 = [0u32; 2];
    for (i, h) in [Hook::Ingress, Hook::Egress].into_iter().enumerate() {
        b.set_tenant_chain(h, 1, &chain(h, r#"{ act = "record" }"#))
            .unwrap();
        t1[i] = b.last_slot();
        b.set_chain(h, &chain(h, r#"{ act = "get_connect" }"#))
            .unwrap();
        default[i] = b.last_slot();
    }
    b.set_tenant_chain(Hook::Egress, 2, &chain(Hook::Egress, r#"{ act = "drop" }"#))
        .unwrap();
    let t2_egress = b.last_slot();
    let out = Tcp::new("198.18.100.1", "198.18.100.2", 40000, 5201)
        .opt(&mp::ts(7, 9))
        .opt(&mp::dss(Some(77), None));
    let back = out.reply();
    let other = Tcp::new("198.18.100.1", "198.18.100.2", 40001, 5201).opt(&mp::ts(7, 9));

    // no tenant known for the flow: the default chains
    assert_eq!(b.run(Hook::Egress, &out.build(), 1).unwrap().ret, 0);
    assert_eq!(b.run(Hook::Ingress, &back.build(), 1).unwrap().ret, 2);
    assert_eq!(hits(&b, t1[0]), [0]);
    assert_eq!(hits(&b, t1[1]), [0]);
    // (get_connect runs without acting on a DSS ACK: counted as a run, not a hit)
    let runs = |slot| b.slot_stats(slot).unwrap()[0].runs;
    assert_eq!((runs(default[0]), runs(default[1])), (1, 1));
    // the egress side saw it leave without a socket: cached as no tenant
    assert_eq!(b.flow_tenant(&out.flow()).unwrap(), Some(0));

    // the flow is tenant 1's: its chain at egress, and at ingress for the reverse flow
    b.set_flow_tenant(&out.flow(), 1).unwrap();
    b.run(Hook::Egress, &out.build(), 1).unwrap();
    b.run(Hook::Ingress, &back.build(), 1).unwrap();
    assert_eq!(hits(&b, t1[1]), [1], "tenant 1's egress chain");
    assert_eq!(
        hits(&b, t1[0]),
        [1],
        "tenant 1's ingress chain, by the flow map"
    );
    assert_eq!(
        (runs(default[0]), runs(default[1])),
        (1, 1),
        "default untouched"
    );
    // another flow, of no tenant, still the default
    b.run(Hook::Egress, &other.build(), 1).unwrap();
    assert_eq!(runs(default[1]), 2);

    // tenant 3 has no chain anywhere: the default chains; tenant 2 has one at egress only:
    // its chain there (drop), the default at ingress
    b.set_flow_tenant(&out.flow(), 3).unwrap();
    assert_eq!(b.run(Hook::Egress, &out.build(), 1).unwrap().ret, 0);
    b.run(Hook::Ingress, &back.build(), 1).unwrap();
    assert_eq!((runs(default[0]), runs(default[1])), (2, 3));
    b.set_flow_tenant(&out.flow(), 2).unwrap();
    assert_eq!(
        b.run(Hook::Egress, &out.build(), 1).unwrap().ret,
        2,
        "tenant 2's drop (TC_ACT_SHOT)"
    );
    assert_eq!(hits(&b, t2_egress), [1]);
    assert_eq!(b.run(Hook::Ingress, &back.build(), 1).unwrap().ret, 2);
    assert_eq!(
        runs(default[0]),
        3,
        "tenant 2 has no ingress chain: the default"
    );
    assert_eq!(runs(default[1]), 3);
}

/// `uid:N` of the client's subflow sockets in `ss -tne` (none: uid 0), by local address.
fn subflow_uids(net: &Net) -> Vec<(String, Option<u32>)> {
    net.ss_e(&net.client)
        .lines()
        .filter(|l| l.contains(":5300"))
        .map(|l| {
            let local = l.split_whitespace().nth(3).unwrap_or("").to_string();
            let uid = l
                .split_whitespace()
                .find_map(|w| w.strip_prefix("uid:"))
                .and_then(|u| u.parse().ok());
            (local, uid)
        })
        .collect()
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_uid_tenant_covers_the_join_subflow_too() {
    let _one = serial();
    let net = Net::new();
    net.sh_c("ip mptcp endpoint add 198.18.101.1 dev c2 subflow");
    let pins = Pins::new();
    let c1 = net.in_ns(&net.client.clone(), {
        let d = pins.path().to_path_buf();
        move || {
            let p = Policy::attach(&d, "c1").unwrap();
            Policy::attach(&d, "c2").unwrap();
            p.apply(
                &parse(
                    r#"
[[tenant]]
name = "u"
uid = 4242

[[chain]]
name = "def1"
dev = "c1"
hook = "egress"
links = [ { act = "record" } ]
[[chain]]
name = "def2"
dev = "c2"
hook = "egress"
links = [ { act = "record" } ]
[[chain]]
name = "u1"
dev = "c1"
hook = "egress"
tenant = "u"
links = [ { act = "record" } ]
[[chain]]
name = "u2"
dev = "c2"
hook = "egress"
tenant = "u"
links = [ { act = "record" } ]
"#,
                )
                .unwrap(),
            )
            .unwrap();
            p
        }
    });
    let l = net.listen(&net.server, "198.18.100.2:5300");
    let sink_t = sink(l);
    // the socket of uid 4242: the fsuid of this thread when it is created (sock_alloc)
    let mut s = net.in_ns(&net.client.clone(), || {
        // SAFETY: setfsuid changes this thread's filesystem uid only.
        unsafe { libc::setfsuid(4242) };
        let s = std::panic::catch_unwind(|| connect_here("198.18.100.2:5300"));
        unsafe { libc::setfsuid(0) };
        s.expect("connect")
    });
    let chunk = vec![1u8; 16 * 1024];
    assert!(
        nena_testkit::poll_until(Duration::from_secs(5), || {
            s.write_all(&chunk).unwrap();
            subflow_uids(&net).len() >= 2
        }),
        "no join: {:?}",
        subflow_uids(&net)
    );
    for _ in 0..50 {
        s.write_all(&chunk).unwrap();
    }
    // the sockets: the initial subflow has the uid (the setfsuid above worked). (`ss -e`
    // shows the join with it too: that is its socket inode's uid, which the kernel copies
    // from the MPTCP socket; its sk_uid, which bpf_get_socket_uid reads, is 0, so that
    // before the programs read the MPTCP socket's uid the join ran the default chain.)
    let uids = subflow_uids(&net);
    let of = |a: &str| {
        uids.iter()
            .find(|(l, _)| l.starts_with(a))
            .unwrap_or_else(|| panic!("no subflow from {a}: {uids:?}"))
            .1
    };
    assert_eq!(of("198.18.100.1"), Some(4242), "{uids:?}");
    of("198.18.101.1");
    drop(s);
    sink_t.join().unwrap().unwrap();

    // a connection of uid 0: the default chains
    let l = net.listen(&net.server, "198.18.100.2:5300");
    let sink_t = sink(l);
    let mut s = net.connect(&net.client, "198.18.100.2:5300");
    assert!(nena_testkit::poll_until(Duration::from_secs(5), || {
        s.write_all(&chunk).unwrap();
        subflow_uids(&net).len() >= 2
    }));
    s.write_all(&chunk).unwrap();
    drop(s);
    sink_t.join().unwrap().unwrap();

    // (interface names resolve in the namespace that asks)
    let status = || {
        let dir = c1.dir().to_path_buf();
        net.in_ns(&net.client.clone(), move || {
            Policy::open(&dir).unwrap().status().unwrap()
        })
    };
    let runs = |st: &nena_bpf::chains::loader::Status, dev: &str, tenant: Option<&str>| -> u64 {
        st.hooks
            .iter()
            .find(|h| h.dev == dev && h.hook == Hook::Egress && h.tenant.as_deref() == tenant)
            .unwrap_or_else(|| panic!("{dev} {tenant:?}"))
            .links[0]
            .runs
    };
    let counts = |st: &nena_bpf::chains::loader::Status| {
        (
            runs(st, "c1", Some("u")),
            runs(st, "c2", Some("u")),
            runs(st, "c1", None),
            runs(st, "c2", None),
        )
    };
    // The counters of the last packets (the connections' ends) may still come in.
    nena_testkit::poll_until(Duration::from_secs(2), || {
        let (u1, u2, d1, d2) = counts(&status());
        u1 > 5 && u2 > 0 && d1 > 5 && d2 > 0
    });
    let (u1, u2, d1, d2) = counts(&status());
    eprintln!("uid tenant: c1 {u1} c2 {u2}; default: c1 {d1} c2 {d2}");
    assert!(
        u1 > 5,
        "the uid's initial subflow ran the tenant chain {u1} times"
    );
    assert!(u2 > 0, "the uid's join ran the tenant chain {u2} times");
    assert!(
        d1 > 5 && d2 > 0,
        "uid 0's subflows: default chains {d1} / {d2}"
    );
    let flows = c1.tenant_flows().unwrap();
    assert!(flows.iter().any(|(_, t)| *t == 1) && flows.iter().any(|(_, t)| *t == 0));
    let dir = c1.dir().to_path_buf();
    net.in_ns(&net.client.clone(), move || {
        let p = Policy::open(&dir).unwrap();
        p.detach("c1").unwrap();
        let p = Policy::open(&dir).unwrap();
        assert!(p.detach("c2").unwrap(), "pins removed with the last device");
    });
}
