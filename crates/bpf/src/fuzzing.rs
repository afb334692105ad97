//! The body of the `policy_spec` fuzz target (`fuzz/fuzz_targets/policy_spec.rs`), shared with
//! the regression run on stable (`tests/spec_fuzz.rs`): pure, no BPF, built without clang
//! (`default-features = false`).

use crate::chains::spec::{parse, ChainSpec};

/// Any bytes as a policy file: an error or a policy, never a panic; every chain of a policy
/// that parses converts to its map form and back.
pub fn policy_spec(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse(text) {
        Ok(spec) => {
            for c in &spec.chains {
                let abi = c.to_abi(1);
                let back = ChainSpec::from_abi(&abi, &c.dev, c.hook);
                assert_eq!(back.links, c.links, "{c:?}");
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}
