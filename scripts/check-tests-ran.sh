#!/usr/bin/env bash
# Fail unless the cargo test log shows tests that ran and none that failed.
# "No tests ran" counts as a failure.
set -euo pipefail
log=${1:?usage: check-tests-ran.sh LOG}
read -r passed failed < <(awk '/^test result:/ {
    for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i }
  } END { print p+0, f+0 }' "$log")
echo "${passed} passed, ${failed} failed"
if [ "$failed" -ne 0 ]; then exit 1; fi
if [ "$passed" -eq 0 ]; then echo "check-tests-ran: no tests ran" >&2; exit 1; fi
