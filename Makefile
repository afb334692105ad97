# nena: `make demo` runs the main job on this machine, `make test` runs every test.
# Both install what they need first (Debian packages, Rust components); run them as root.

SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo
NENA := target/release/nena

.PHONY: all deps build demo test unit lint fuzz bench peers man deb clean

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	$(CARGO) build --release --workspace

demo: build
	@bash scripts/demo.sh

# Every test: unit, property and known-answer tests, the fuzz targets' regression runs,
# and (as root) the namespace/MPTCP/BPF integration tests, each cleaning up after itself.
# Those need root: they are behind each crate's cargo feature `netns`, which scripts/test.sh
# turns on (a plain `cargo test --workspace` lists them as ignored and runs the rest).
# scripts/test.sh ends with a table per crate (run, failed, skipped by name) and fails on a
# failed test, a suite that ran nothing or crashed, or a skip not in scripts/allowed-skips.txt.
test: deps
	$(CARGO) build --release --workspace
	@bash scripts/test.sh target

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --workspace --all-targets --features netns -- -D warnings

# Coverage-guided fuzzing (needs the nightly toolchain and cargo-fuzz); SECONDS per target.
FUZZ_SECONDS ?= 60
fuzz:
	@bash scripts/fuzz.sh $(FUZZ_SECONDS)

# Every benchmark, with its targets checked (each exits 1 on a missed target). Long: the
# transfer bench runs 9 repetitions of 10 s per variant and setting (then 9 transfers of
# 2 MiB and of 100 MiB per variant on the veth, for the path split), the fairness bench six
# 30 s runs. Statistical claims live here; `make test` checks the same code deterministically.
bench: build peers
	$(NENA) bench codec
	$(NENA) bench handshake --flows 1000
	$(NENA) bench policy --batches 31
	$(NENA) bench transfer --reps 9
	$(NENA) bench transfer --reps 9 --setting veth --bytes 2M
	$(NENA) bench transfer --reps 9 --setting veth --bytes 100M
	$(NENA) bench aggregation
	$(NENA) bench emulation
	$(NENA) bench rate-limit
	$(NENA) bench fairness
	$(NENA) bench outage
	$(NENA) bench metered
	$(NENA) bench sessions
	$(NENA) bench sessions --against proxy --at-most-the-limit
	$(NENA) bench peers $(PEERS)
	$(NENA) bench page
	$(NENA) bench realtime

# The tunnels `nena bench peers` compares nena with, pinned (shadowsocks-rust built into
# target/peers/bin, Debian's stunnel4): scripts/install-peers.sh.
PEERS := --sslocal target/peers/bin/sslocal --ssserver target/peers/bin/ssserver
peers: deps
	@bash scripts/install-peers.sh

# Man pages generated from the clap definitions the binary parses: out/man/nena.1 and one
# page per subcommand (nena-serve.1, nena-proxy-server.1, ...). Read one with `man -l`.
man:
	$(CARGO) build --release -p nena
	$(NENA) man --out-dir out/man

# The Debian package: target/debian/nena_VERSION-1_ARCH.deb (binary, man pages, completions,
# systemd units installed disabled, example configs in /etc/nena). `dpkg -i` it.
deb: deps
	@bash scripts/build-deb.sh

clean:
	$(CARGO) clean
