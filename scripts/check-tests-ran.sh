#!/usr/bin/env bash
# Judge a `cargo test --workspace` log (scripts/test.sh writes one):
# - per crate: tests run, passed, failed, skipped (by name, with nena_testkit::skip!), ignored;
# - fails when a test failed, when no test ran, when a test binary started and never
#   reported (it crashed), when a whole suite (test binary) ran no test unless it is listed
#   in scripts/allowed-empty-suites.txt, and when a test skipped that is not listed in
#   scripts/allowed-skips.txt (the skipped list may shrink on a better host, never grow),
#   and when a root test was ignored (its crate's feature `netns` was off: `make test`
#   turns it on, so all of them run).
# Usage: check-tests-ran.sh LOG [SUITES]   (SUITES: "binary-name package" lines; without
# it, binaries are attributed by their file name only).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
log=${1:?usage: check-tests-ran.sh LOG [SUITES]}
suites=${2:-/dev/null}
allowed_skips="$here/allowed-skips.txt"
allowed_empty="$here/allowed-empty-suites.txt"
strip() { sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' "$1" 2>/dev/null || true; }

awk -v suites="$suites" -v skips_file=<(strip "$allowed_skips") \
    -v empty_file=<(strip "$allowed_empty") '
function pkg_of_bin(bin,   b) {
  b = bin; sub(/^.*\//, "", b)
  if (b in pkg) return pkg[b]
  sub(/-[0-9a-f]+$/, "", b); gsub(/_/, "-", b)
  return b
}
function close_suite() {
  if (cur != "" && !reported) { crashed[++ncrashed] = cur_name " (" cur_pkg ")" }
  cur = ""
}
BEGIN {
  while ((getline l < suites) > 0) { split(l, f, " "); pkg[f[1]] = f[2] }
  # "CRATE REST": the rest is a test name (skips) or a suite name with spaces (empty suites)
  while ((getline l < skips_file) > 0) { split(l, f, " "); allow_skip[f[1] " " f[2]] = 1 }
  while ((getline l < empty_file) > 0) {
    k = l; sub(/ .*$/, "", k); r = substr(l, length(k) + 2); sub(/^ +/, "", r)
    allow_empty[k " " r] = 1
  }
}
/^ *Running / {
  close_suite()
  # "Running tests/netns.rs (target/release/deps/netns-0123abcd)"
  #  or "Running unittests src/lib.rs (target/release/deps/nena_codec-0123abcd)"
  line = $0; sub(/^ *Running /, "", line)
  bin = line; sub(/^.*\(/, "", bin); sub(/\).*$/, "", bin)
  name = line; sub(/ \(.*$/, "", name)
  cur = bin; cur_pkg = pkg_of_bin(bin); cur_name = name; reported = 0
  pkgs[cur_pkg] = 1; nsuites[cur_pkg]++
  next
}
/^ *Doc-tests / {
  close_suite()
  d = $2; gsub(/_/, "-", d)
  cur = "doc"; cur_pkg = d; cur_name = "doc-tests"; reported = 0; doc = 1
  pkgs[cur_pkg] = 1
  next
}
/^running [0-9]+ tests?$/ { running = $2 }
/^test result:/ {
  np = 0; nf = 0; ni = 0
  for (i = 1; i <= NF; i++) {
    if ($(i+1) ~ /^passed/) np = $i
    if ($(i+1) ~ /^failed/) nf = $i
    if ($(i+1) ~ /^ignored/) ni = $i
  }
  passed[cur_pkg] += np; failed[cur_pkg] += nf; ignored[cur_pkg] += ni
  if (cur != "doc" && np + nf == 0 && !((cur_pkg " " cur_name) in allow_empty))
    empty[++nempty] = cur_name " (" cur_pkg ")"
  reported = 1
  next
}
/nena-test: SKIPPED / {
  s = $0; sub(/^.*nena-test: SKIPPED /, "", s)
  split(s, f, " "); k = f[1]; t = f[2]; sub(/:$/, "", t)
  reason = substr(s, length(k) + length(t) + 4)
  skipped[k]++
  skiplist[++nskip] = k " " t ": " reason
  if (!((k " " t) in allow_skip)) unexpected[++nunexp] = k " " t
  next
}
# "test NAME ... ignored, needs root: --features netns": the marker of a root test whose crate
# was built without the feature. make test runs every root test, so this is a failure.
/^test .* \.\.\. ignored, needs root/ {
  t = $2; rootless[++nroot] = cur_pkg " " t
  next
}
/^cargo test exit status:/ { close_suite() }
# The panic of a failed test and the lines after it (its message): printed after the table, so
# that a report that keeps only the end of the log still names the cause of each failure.
/^---- .* stdout ----$/ { failing = $2; cap = 0; next }
/^failures:$/ { failing = ""; cap = 0 }
failing != "" && /panicked at/ { cap = 12; digest[++ndig] = "== " failing ": " $0; next }
cap > 0 && /^stack backtrace:$/ { cap = 0 }
cap > 0 { cap--; if (NF > 0) digest[++ndig] = "   " substr($0, 1, 400) }
END {
  close_suite()
  printf "\n%-16s %7s %7s %7s %7s %7s\n", "crate", "suites", "passed", "failed", "skipped", "ignored"
  n = 0
  for (k in pkgs) names[++n] = k
  for (i = 2; i <= n; i++) {  # insertion sort: a handful of crates
    k = names[i]
    for (j = i - 1; j >= 1 && names[j] > k; j--) names[j + 1] = names[j]
    names[j + 1] = k
  }
  for (i = 1; i <= n; i++) {
    k = names[i]
    pp = passed[k] - skipped[k]
    printf "%-16s %7d %7d %7d %7d %7d\n", k, nsuites[k], pp, failed[k], skipped[k], ignored[k]
    tp += pp; tf += failed[k]; ts += skipped[k]
  }
  bad = 0
  for (i = 1; i <= nskip; i++) print "skipped: " skiplist[i]
  for (i = 1; i <= nunexp; i++) { print "check-tests-ran: unexpected skip (not in scripts/allowed-skips.txt): " unexpected[i] > "/dev/stderr"; bad = 1 }
  for (i = 1; i <= nempty; i++) { print "check-tests-ran: suite ran no test: " empty[i] > "/dev/stderr"; bad = 1 }
  for (i = 1; i <= ncrashed; i++) { print "check-tests-ran: suite never reported (crashed?): " crashed[i] > "/dev/stderr"; bad = 1 }
  for (i = 1; i <= nroot && i <= 20; i++) print "check-tests-ran: root test ignored (built without --features netns): " rootless[i] > "/dev/stderr"
  if (nroot > 0) { print "check-tests-ran: " nroot " root tests ignored; make test builds with --features netns" > "/dev/stderr"; bad = 1 }
  if (tp + tf == 0) { print "check-tests-ran: no tests ran" > "/dev/stderr"; bad = 1 }
  if (tf > 0) bad = 1
  printf "%d passed, %d failed, %d skipped\n", tp, tf, ts
  if (ndig > 0) print "\nwhy they failed (each panic, first lines):"
  for (i = 1; i <= ndig && i <= 80; i++) print digest[i]
  exit bad
}' "$log"
