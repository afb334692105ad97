#!/usr/bin/env bash
# Run every test of the workspace (`make test`): build the test binaries once, note which
# package each belongs to, run them all (no fail-fast), then let check-tests-ran.sh judge
# the log. Usage: scripts/test.sh [OUTDIR] (default target/). Exit status: check-tests-ran's.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
out=${1:-target}
mkdir -p "$out"
log="$out/test.log"
suites="$out/test-suites.txt"
# The tests that need root (namespaces, MPTCP in a namespace, BPF, cgroups) are ignored
# unless their crate's feature `netns` is on; --workspace turns it on in every crate that
# has it. The same flags in both cargo commands below, so the run builds nothing anew.
features=(--features netns)

# 1. Build every test binary; map each executable to its package (from the manifest of
#    the package it was built for), so the per-crate report can tell apart two crates'
#    tests/netns.rs.
if ! cargo test --release --workspace "${features[@]}" --no-run \
    --message-format=json-render-diagnostics >"$out/test-build.json"; then
  echo "test.sh: building the tests failed" >&2
  exit 1
fi
: >"$suites"
grep '"executable":"' "$out/test-build.json" | while IFS= read -r line; do
  exe=$(sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' <<<"$line")
  manifest=$(sed -n 's/.*"manifest_path":"\([^"]*\)".*/\1/p' <<<"$line")
  [ -n "$exe" ] && [ -n "$manifest" ] || continue
  pkg=$(sed -n 's/^name *= *"\([^"]*\)".*/\1/p' "$manifest" | head -1)
  echo "$(basename "$exe") $pkg"
done >"$suites"

# Server keys and pinned keys (known_servers) of this run only: every test server shares
# one fresh key file, every client one fresh known_servers, nothing of the user's is read
# or left behind (tests of pinning pass their own files).
XDG_STATE_HOME=$(mktemp -d /tmp/nena-test-state.XXXXXX)
export XDG_STATE_HOME
trap 'rm -rf "$XDG_STATE_HOME"' EXIT

# 2. Run them. A crashing binary does not stop the others (--no-fail-fast); the check
#    script notices a suite that started and never reported.
cargo test --release --workspace "${features[@]}" --no-fail-fast 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
echo "cargo test exit status: $status" >>"$log"

# 3. Judge: per-crate counts, failures, empty suites, unexpected skips.
bash scripts/check-tests-ran.sh "$log" "$suites"
check=$?
if [ "$check" -eq 0 ] && [ "$status" -ne 0 ]; then
  echo "check-tests-ran: cargo test exited with $status although every suite reported success" >&2
  exit 1
fi
exit "$check"
