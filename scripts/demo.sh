#!/usr/bin/env bash
# The main job on this machine. Until the transport lands this shows the codec:
# a text scrambled, what an eavesdropper sees, the text descrambled back, and the
# papers' overhead table measured here.
set -euo pipefail
cd "$(dirname "$0")/.."
NENA=target/release/nena
KEY=0123456789abcdef
TEXT="Not every path is one you trust. nena scrambles what crosses the others."

echo "== plaintext"
printf '%s' "$TEXT"; echo
echo "== what an eavesdropper on an untrusted path sees (kato scrambling, key $KEY)"
printf '%s' "$TEXT" | $NENA codec scramble --key $KEY | od -A d -t x1z | head -8
echo "== descrambled with the same key"
printf '%s' "$TEXT" | $NENA codec scramble --key $KEY | $NENA codec descramble --key $KEY; echo
echo "== the papers' Table II, measured on this machine"
$NENA bench codec
