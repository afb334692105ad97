#!/usr/bin/env bash
# Install everything nena needs to build, test and run its demo on a fresh Debian machine
# (run as root). Idempotent: packages already present are not fetched again.
set -euo pipefail

PKGS=(
  build-essential pkg-config
  clang llvm libbpf-dev linux-libc-dev libelf-dev zlib1g-dev  # BPF programs (C, UAPI headers) and their loader
  bpftool                                               # tests check that programs are unloaded
  libssl-dev                                            # OpenSSL baselines in `nena bench codec`
  iproute2 tcpdump ethtool procps                       # the lab: namespaces, veth, qdiscs, captures
  tshark                                                # `nena analyze` is checked against it; the lab tests read TCP options with it
  curl ncat                                             # SOCKS5 clients of the proxy tests
  nftables                                              # the lab's fleet balancer, NAT and MPTCP-option stripping; tests drop a lossy start's first segments
  chromium                                              # the real browser of the gateway and nena run tests (headless, in lab namespaces)
  dnsmasq-base                                          # the resolvers of the name-resolution and `nena run` DNS tests (run in lab namespaces only)
  fonts-dejavu-core                                     # the font `nena analyze --plot` draws text with
  prometheus                                            # scrapes `--metrics` in the metrics test (never started as a service)
  stunnel4 openssl                                      # the TLS 1.3 peer of `nena bench peers` (its test runs nena beside it)
  iperf3                                                # the UDP stream through the gateway in `nena bench peers`
  debootstrap systemd-container                         # the package test: a clean Debian root, booted under systemd-nspawn
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # tshark: do not ask whether non-root users may capture (no setuid dumpcap).
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  # iperf3: no daemon (the bench starts its own server in a lab namespace).
  echo "iperf3 iperf3/start_daemon boolean false" | debconf-set-selections
  apt-get update -qq
  # No package's service is started by the install (prometheus would listen on :9090 in
  # the host): a policy-rc.d that denies starts, for this install only, unless one exists.
  own_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && own_policy=1
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  [ -z "$own_policy" ] || rm -f /usr/sbin/policy-rc.d
fi

# `nena run`'s resolver test (crates/cli/tests/cli/transfer_run_resolvers.rs): systemd's
# nss-resolve module, as Fedora's glibc asks systemd-resolved for names. Unpacked into a cache
# directory, never installed: the host's nsswitch.conf and libraries stay as they are, and the
# test loads the module with LD_LIBRARY_PATH in a mount namespace of its own.
NSS_RESOLVE_DIR=/var/cache/nena/libnss-resolve
if [ ! -e "$NSS_RESOLVE_DIR/libnss_resolve.so.2" ]; then
  echo "install-deps: unpacking libnss-resolve into $NSS_RESOLVE_DIR" >&2
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download -qq libnss-resolve >/dev/null 2>&1 \
     || { apt-get update -qq && apt-get download -qq libnss-resolve; })
  dpkg-deb -x "$tmp"/libnss-resolve_*.deb "$tmp/x"
  mkdir -p "$NSS_RESOLVE_DIR"
  cp "$(find "$tmp/x" -name libnss_resolve.so.2 | head -n1)" "$NSS_RESOLVE_DIR/"
  rm -rf "$tmp"
fi

# Rust: stable toolchain with clippy and rustfmt (rustup is on the machine).
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
command -v cargo >/dev/null 2>&1 || { echo "install-deps: cargo not found (install rustup)" >&2; exit 1; }
if command -v rustup >/dev/null 2>&1; then
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt
fi

# cargo-deb builds the Debian package (`make deb`, scripts/build-deb.sh); pinned, from crates.io.
CARGO_DEB_VERSION=3.8.0
if ! cargo deb --version 2>/dev/null | grep -qxF "cargo-deb $CARGO_DEB_VERSION"; then
  echo "install-deps: installing cargo-deb $CARGO_DEB_VERSION" >&2
  cargo install --quiet --locked cargo-deb --version "$CARGO_DEB_VERSION"
fi

# Kernel settings the lab and transport rely on.
sysctl -qw net.mptcp.enabled=1 || true
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf || true
