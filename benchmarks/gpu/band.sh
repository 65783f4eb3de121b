#!/usr/bin/env bash
# One device call of the band measurements, resumable: bash benchmarks/gpu/band.sh PHASE SECONDS SET...
# PHASE is diversify or measure (see band.py). A stage's journal carried in .carry/gpu/ is put
# back before the stage starts, and copied to $OUT when the time is up, so the next call goes
# on where this one stopped.
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/gpu/env.sh
OUT=${OUT:-out-gpu}; mkdir -p "$OUT"
phase=$1; secs=$2; shift 2
stage=$phase
for name in "$@"; do
  mkdir -p "/tmp/band/$name/$stage"
  j=".carry/gpu/$name-$phase-journal.jsonl"
  [ -f "$j" ] && cp "$j" "/tmp/band/$name/$stage/_journal.jsonl"
done
BAND_DIV_DIR=${BAND_DIV_DIR:-.carry/gpu} timeout "$secs" python3 benchmarks/gpu/band.py "$phase" "$@" \
  > "$OUT/$phase.log" 2>&1
echo "exit $?"
for name in "$@"; do
  j="/tmp/band/$name/$stage/_journal.jsonl"
  [ -f "$j" ] && cp "$j" "$OUT/$name-$phase-journal.jsonl" && echo "$name: $(wc -l < "$j") journal lines kept"
done
grep -v -E ": [0-9]+/[0-9]+$" "$OUT/$phase.log" | tail -15
