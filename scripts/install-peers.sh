#!/usr/bin/env bash
# The tunnels `nena bench peers` measures nena against (docs/BENCHMARKS.md, "Peers"), pinned:
# shadowsocks-rust's sslocal and ssserver built from crates.io into target/peers/bin (only
# the features the bench uses: SOCKS5 local, server, the AEAD ciphers, the multi-threaded
# runtime of its default build). Debian's stunnel4 (and the openssl command for its
# certificate) come with scripts/install-deps.sh, as does the toolchain (shadowsocks-rust
# 1.25 needs Rust 1.91 or newer). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

SS_VERSION=1.25.0
SS_FEATURES=logging,local,server,multi-threaded,aead-cipher
ROOT=target/peers

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
have() { [ -x "$ROOT/bin/$1" ] && "$ROOT/bin/$1" --version 2>/dev/null | grep -qF " $SS_VERSION"; }
if ! have sslocal || ! have ssserver; then
  echo "install-peers: building shadowsocks-rust $SS_VERSION (a few minutes)" >&2
  cargo install --quiet --locked shadowsocks-rust --version "$SS_VERSION" \
    --no-default-features --features "$SS_FEATURES" --root "$ROOT" --bin sslocal --bin ssserver
fi
"$ROOT/bin/sslocal" --version
stunnel -version 2>&1 | head -1 || true
