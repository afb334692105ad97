//! nena-bench: the benchmarks behind `nena bench ...`. A small measurement harness
//! (`harness`), the codec overhead table of issue 2 (`codec_table`, the papers' Table II
//! with OpenSSL baselines and memcpy, plus the papers' own Figure 14 C code in `paper_c`),
//! the comparison of crypto primitives from ring, aws-lc-rs, RustCrypto and OpenSSL
//! (`primitives`, run by the `primitives` example), and a progress indicator for terminals.

pub mod ciphers;
pub mod codec_table;
pub mod harness;
pub mod kato;
pub mod paper_c;
pub mod primitives;
pub mod progress;
pub mod session;
pub mod subject;

pub use codec_table::{render_text, run as run_codec, CodecBenchConfig, Report, NAMES};
pub use harness::{HarnessConfig, Stats};
