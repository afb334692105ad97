#!/bin/bash
# Issue 40 item 5, by hand: nena perf through a WLAN that strips MPTCP options (both links given)
# against the trusted link alone, both links 100 Mbit/s, alternating, 3 rounds of SECS (default 5).
# Usage, as root from the repository after `cargo build --release`:
#   PM="--pm userspace" SECS=15 bash docs/investigations/stripping-wlan/speed.sh
# (PM empty: the lab's default, the in-kernel PM). Prints each run's goodput.
set -u
N=${NENA:-target/release/nena}
export XDG_STATE_HOME=$(mktemp -d)
P=nstrip
$N lab up --prefix $P --untrusted-strip-mptcp ${PM:-} --trusted-rate 100mbit --untrusted-rate 100mbit >/dev/null
trap "kill %1 2>/dev/null; $N lab down --prefix $P >/dev/null" EXIT
D=$(mktemp -d)
$N lab exec --prefix $P server -- $N serve --listen 0.0.0.0:7777 --dir $D > /tmp/strip-serve.log 2>&1 &
for i in $(seq 100); do $N lab exec --prefix $P server -- ss -ltn | grep -q 7777 && break; sleep 0.1; done
for r in 1 2 3; do
  for v in both trusted; do
    if [ $v = both ]; then extra="--untrusted untrusted"; else extra=""; fi
    $N lab exec --prefix $P client -- $N perf --to 198.18.3.2:7777 --time ${SECS:-5} --trusted trusted $extra --json 2>/tmp/strip-$v-$r.err > /tmp/strip-$v-$r.json
    python3 -c 'import json,sys; j=json.load(open("/tmp/strip-'$v'-'$r'.json")); print("'$v' r'$r'", {k:v for k,v in j.items() if "mbit" in k})'
  done
done
