//! The libraries compared, and a candidate primitive or why a build lacks it: what the
//! candidates (`aead`, `keystream`) and the runner (`mod.rs`) share.

use serde::Serialize;

/// Why a candidate is missing from a build without the feature.
pub const NEEDS_FEATURE: &str = "not built: needs `--features compare-crypto`";

/// A library that may provide a primitive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lib {
    /// OpenSSL 3 through the `openssl` crate: the reference.
    OpenSsl,
    /// ring 0.17.
    Ring,
    /// aws-lc-rs 1.x.
    AwsLcRs,
    /// AWS-LC's C API through `aws-lc-sys` (raw FFI; informative, for what aws-lc-rs lacks).
    AwsLcSys,
    /// RustCrypto, current generation (`cipher` 0.5 / `aead` 0.6).
    RustCrypto,
    /// RustCrypto, previous generation (`cipher` 0.4), as nena-proto uses it.
    RustCryptoPrev,
}

impl Lib {
    /// The name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Lib::OpenSsl => "openssl",
            Lib::Ring => "ring",
            Lib::AwsLcRs => "aws-lc-rs",
            Lib::AwsLcSys => "aws-lc-sys-ffi",
            Lib::RustCrypto => "rustcrypto",
            Lib::RustCryptoPrev => "rustcrypto-prev",
        }
    }

    /// The crates behind a row (major.minor as in Cargo.toml; Cargo.lock has the patch).
    pub fn crates(self, primitive: &str) -> &'static str {
        match (self, primitive) {
            (Lib::OpenSsl, _) => "openssl 0.10 (OpenSSL 3)",
            (Lib::Ring, _) => "ring 0.17",
            (Lib::AwsLcRs, _) => "aws-lc-rs 1.19",
            (Lib::AwsLcSys, _) => "aws-lc-sys 0.47 CRYPTO_chacha_20",
            (Lib::RustCrypto, "aes-128-gcm") => "aes-gcm 0.11 (aes 0.9)",
            (Lib::RustCrypto, "chacha20-poly1305") => "chacha20poly1305 0.11",
            (Lib::RustCrypto, "aes-128-ctr") => "aes 0.9 + ctr 0.10",
            (Lib::RustCrypto, _) => "chacha20 0.10",
            (Lib::RustCryptoPrev, "aes-128-ctr") => "aes 0.8 + ctr 0.9",
            (Lib::RustCryptoPrev, _) => "chacha20 0.9",
        }
    }
}

/// A candidate, or why it is not there.
pub enum Made<T> {
    Ready(T),
    Unavailable(String),
}
