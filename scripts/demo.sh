#!/usr/bin/env bash
# `make demo`: the papers' experiment on this machine.
#   1. the lab: a client with a trusted and an untrusted link to a server (network namespaces)
#   2. a text file sent with nena `plain`, then with nena `kato` (the papers' scrambling),
#      while the untrusted link is captured
#   3. what an eavesdropper on the untrusted link sees, both runs side by side, and whether
#      any 16-byte run of the file crossed that link
#   4. both files verified on the server, the lab torn down
#   5. the papers' codec overhead table, measured here
set -euo pipefail
cd "$(dirname "$0")/.."
NENA=$PWD/target/release/nena
PREFIX=nenademo
OUT=${DEMO_OUT:-$PWD/out/demo}
PORT=4433
SERVER=198.18.3.2
rm -rf "$OUT"; mkdir -p "$OUT/srv"

cleanup() { "$NENA" lab down --prefix "$PREFIX" >/dev/null 2>&1 || true; }
trap cleanup EXIT INT TERM
cleanup

hr() { printf '\n== %s\n' "$*"; }

hr "1. lab: client --trusted 20 Mbit/s--> router --> server, client --untrusted 20 Mbit/s--> router"
# Equal rates make the kernel's scheduler use both paths; --no-offload gives wire-sized
# segments, so the captures look like the papers' figures.
"$NENA" lab up --prefix "$PREFIX" --trusted-rate 20mbit --untrusted-rate 20mbit --no-offload >/dev/null
"$NENA" lab status --prefix "$PREFIX" | sed 's/^/   /'

# A text file an eavesdropper would love to read (about 1 MiB of readable lines).
TEXT="$OUT/letter.txt"
for i in $(seq 1 9000); do
  printf 'line %05d: Dear Bob, the meeting moves to Thursday; the door code is 4711. -- Alice\n' "$i"
done >"$TEXT"
echo "   file: $TEXT ($(stat -c %s "$TEXT") bytes)"

"$NENA" lab exec --prefix "$PREFIX" server -- "$NENA" serve --listen "$SERVER:$PORT" --dir "$OUT/srv" \
  --mode kato,plain >"$OUT/serve.log" 2>&1 &
for _ in $(seq 50); do
  "$NENA" lab exec --prefix "$PREFIX" server -- ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q . && break
  sleep 0.1
done

run() { # mode
  local mode=$1 cap="$OUT/untrusted-$1.pcap"
  "$NENA" lab capture --prefix "$PREFIX" untrusted "$cap" --filter tcp --background >/dev/null 2>&1
  sleep 0.3
  "$NENA" lab exec --prefix "$PREFIX" client -- "$NENA" send "$TEXT" --name "letter-$mode.txt" \
    --to "$SERVER:$PORT" --trusted trusted --untrusted untrusted --mode "$mode" --no-progress \
    --json >"$OUT/send-$mode.json"
  "$NENA" lab capture-stop --prefix "$PREFIX" untrusted >/dev/null
  python3 - "$OUT/send-$mode.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = d["paths"]
print(f"   {d['mode']:5}: {d['bytes']} bytes in {d['seconds']:.2f} s, verified={d['verified']}, "
      f"multipath={p['multipath']}")
for s in p["subflows"]:
    print(f"          subflow {s['local']:>18} ({s['trust']:9}) sent {s['bytes_sent']:>8} bytes")
PY
}

hr "2. the file sent with mode plain, then with mode kato (untrusted link captured)"
run plain
run kato

hr "3. what the eavesdropper on the untrusted link sees (first segments; left: plain, right: kato)"
"$NENA" eavesdrop "$OUT/untrusted-plain.pcap" --max 6 --bytes 256 --width 56 >"$OUT/view-plain.txt"
"$NENA" eavesdrop "$OUT/untrusted-kato.pcap" --max 6 --bytes 256 --width 56 >"$OUT/view-kato.txt"
pr -m -t -w 150 "$OUT/view-plain.txt" "$OUT/view-kato.txt" | head -60
echo
echo "   Note the repeating patterns on the right: each scrambled byte is the XOR of the last 65"
echo "   plaintext bytes, so repeated text gives repeated output. The scrambling hides the text"
echo "   from a one-path observer, but it is not encryption: 65 known plaintext bytes reveal the"
echo "   rest of an observed run (docs/PROTOCOL.md)."

echo
for mode in plain kato; do
  printf '   %-5s ' "$mode:"
  "$NENA" eavesdrop "$OUT/untrusted-$mode.pcap" --known "$TEXT" --summary | grep -iE 'leak|no 16-byte' | head -1
done

hr "4. verified on the server"
for mode in plain kato; do
  if cmp -s "$TEXT" "$OUT/srv/letter-$mode.txt"; then
    echo "   letter-$mode.txt: identical to the original (SHA-256 checked end to end by nena too)"
  else
    echo "   letter-$mode.txt: MISSING OR DIFFERENT"; exit 1
  fi
done
"$NENA" lab down --prefix "$PREFIX" >/dev/null
trap - EXIT INT TERM
echo "   lab removed; captures and views kept in $OUT"

hr "5. the papers' Table II, measured on this machine (quick run)"
"$NENA" bench codec --quick --no-check
