#!/usr/bin/env bash
# Run every cargo-fuzz target for N seconds (default 60). Needs the nightly toolchain;
# installs cargo-fuzz from crates.io if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
export PATH="$HOME/.cargo/bin:$PATH"
rustup toolchain list | grep -q nightly || { echo "fuzz: needs the nightly toolchain (rustup toolchain install nightly)" >&2; exit 1; }
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
for t in fuzz/fuzz_targets/*.rs; do
  name=$(basename "$t" .rs)
  echo "== fuzz $name for ${secs}s"
  (cd fuzz && cargo +nightly fuzz run "$name" -- -max_total_time="$secs" -rss_limit_mb=2048)
done
