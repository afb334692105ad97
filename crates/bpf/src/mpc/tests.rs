//! Tests of `mpc`.
use super::*;

#[test]
fn flow_keys_are_in_network_order() {
    let k = flow_key(
        "198.18.1.2:40000".parse().unwrap(),
        "198.18.3.2:4433".parse().unwrap(),
    )
    .unwrap();
    let b = k.as_bytes();
    assert_eq!(b[0], 0);
    assert_eq!(&b[4..6], &40000u16.to_be_bytes());
    assert_eq!(&b[6..8], &4433u16.to_be_bytes());
    assert_eq!(&b[8..12], &[198, 18, 1, 2]);
    assert_eq!(&b[24..28], &[198, 18, 3, 2]);
    assert_eq!(size_of::<FlowKey>(), 40);
    // A v4-mapped v6 address is the v4 flow.
    let m = flow_key(
        "[::ffff:198.18.1.2]:40000".parse().unwrap(),
        "198.18.3.2:4433".parse().unwrap(),
    )
    .unwrap();
    assert_eq!(m.as_bytes(), b);
    assert!(flow_key(
        "[2001:db8::1]:1".parse().unwrap(),
        "198.18.3.2:4433".parse().unwrap()
    )
    .is_err());
}

#[test]
fn records_decode_flags() {
    let f = Flow {
        flags: F_REQUESTED | F_CONSENTED | F_LOCAL_KEY,
        pad: 0,
        local_key: [1; 8],
        remote_key: [2; 8],
        born: 0,
    };
    let r = FlowRecord::from_flow(&f);
    assert!(r.requested && r.consented && !r.mark_failed && !r.confirmed);
    assert!(
        !format!("{r:?}").contains("1, 1"),
        "no key bytes in Debug: {r:?}"
    );
    assert_eq!(r.local_key, Some([1; 8]));
    assert_eq!(r.remote_key, None);
    assert!(!r.has_keys());
}
