#!/usr/bin/env bash
# Builds and runs the __mptcp_finish_join probe (see probe.bpf.c and docs/investigations/kernel-41-bytes/README.md):
# one JSON line of counters a second until Ctrl-C. Needs root, clang, gcc, libbpf-dev, bpftool
# and a kernel with BTF that allows fentry programs. Run the proxy stress test or
# docs/investigations/kernel-41-bytes/mptcp-41-repro.py beside it; a non-zero "mapping_moved" confirms the mechanism.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bpftool btf dump file /sys/kernel/btf/vmlinux format c >"$out/vmlinux.h"
clang -O2 -g -target bpf -I"$out" -c "$here/probe.bpf.c" -o "$out/probe.bpf.o"
gcc -O2 -Wall "$here/load.c" -o "$out/load" -lbpf
"$out/load" "$out/probe.bpf.o"
