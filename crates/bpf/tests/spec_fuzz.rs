//! Runs the `policy_spec` fuzz target's body (`nena_bpf::fuzzing::policy_spec`) on stable:
//! pseudo-random bytes, and the shipped example policy with bytes changed and cut (the
//! coverage-guided run needs nightly: `cd fuzz && cargo +nightly fuzz run policy_spec`). No
//! root, no BPF.

use nena_bpf::fuzzing::policy_spec;

const EXAMPLE: &str = include_str!("../examples/tenants.toml");

#[test]
fn the_example_parses_and_its_chains_round_trip() {
    assert!(nena_bpf::chains::spec::parse(EXAMPLE).is_ok());
    policy_spec(EXAMPLE.as_bytes());
}

#[test]
fn random_bytes_never_panic_the_parser() {
    let mut rng = nena_testkit::Prng::new(0x005e_ed0f_c4a1_9e57);
    policy_spec(&[]);
    policy_spec(b"[[chain]]");
    policy_spec(b"[[chain]]\nlinks = [{}]\n");
    for i in 0..3000 {
        let len = (rng.next_u64() % if i % 10 == 0 { 2000 } else { 300 }) as usize;
        let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        policy_spec(&data);
    }
}

#[test]
fn a_mutated_example_never_panics_the_parser() {
    let mut rng = nena_testkit::Prng::new(0x007e_4a47_0c0f_fee5);
    let base = EXAMPLE.as_bytes();
    for _ in 0..3000 {
        let mut data = base.to_vec();
        for _ in 0..1 + rng.next_u64() % 4 {
            let i = (rng.next_u64() as usize) % data.len();
            data[i] = match rng.next_u64() % 4 {
                0 => rng.next_u64() as u8,
                1 => b'"',
                2 => b'9',
                _ => b'\n',
            };
        }
        let cut = (rng.next_u64() as usize) % (data.len() + 1);
        if rng.next_u64().is_multiple_of(3) {
            data.truncate(cut);
        }
        policy_spec(&data);
    }
}
