#!/usr/bin/env bash
# Build the Debian package of nena from this workspace: target/debian/nena_VERSION-1_ARCH.deb.
# Usage: scripts/build-deb.sh [--no-build]   (--no-build: package target/release/nena as is)
# The binary, man pages and completions generated from it, the systemd units of
# contrib/systemd (installed disabled) and the example configs as conffiles in /etc/nena;
# the metadata is [package.metadata.deb] in crates/cli/Cargo.toml. Needs cargo-deb
# (scripts/install-deps.sh installs it). Prints the package's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

build=1
case "${1:-}" in
  --no-build) build= ;;
  "") ;;
  *) echo "usage: $0 [--no-build]" >&2; exit 2 ;;
esac

command -v cargo-deb >/dev/null || { echo "build-deb: cargo-deb not found (run scripts/install-deps.sh)" >&2; exit 1; }
target=${CARGO_TARGET_DIR:-target}
[ -z "$build" ] || cargo build --release -p nena
[ -x "$target/release/nena" ] || { echo "build-deb: $target/release/nena not built" >&2; exit 1; }

# Generated from the binary's own clap definitions, so they match the packaged binary.
assets="$target/release/deb"
rm -rf "$assets"
mkdir -p "$assets/completions"
"$target/release/nena" man --out-dir "$assets/man" >/dev/null
gzip -9n "$assets"/man/*.1
"$target/release/nena" completions bash > "$assets/completions/nena.bash"
"$target/release/nena" completions zsh > "$assets/completions/_nena"
"$target/release/nena" completions fish > "$assets/completions/nena.fish"

# --strip: the release profile keeps line tables (debug = 1), which a package does not need.
cargo deb -p nena --no-build --strip --output "$target/debian/"
