#!/usr/bin/env bash
# Pieces of the scale sample side by side, one per GPU, each confined to its GPU's share of the
# host's cores (taskset), so each runs as it would alone on a one-GPU host with that many cores.
# Run from the repository root on the GPU machine, carrying the polars wheels and the pieces.
#
#   bash benchmarks/gpu/scale_multi.sh LIMIT_S STATE PIECE.parquet[,PIECE.parquet...]...
#
# Each argument is one GPU's work: its pieces run in turn until LIMIT_S seconds have passed.
#
# STATE: a folder holding, per piece, the folder the previous call returned (STATE/NAME, NAME the
# piece's file name without .parquet); a piece without one starts from STATE itself (a shared
# diversify journal, or an empty folder). Everything comes back in $OUT/pieces.tar.xz.* (parts
# to join with cat; the device tool returns at most 8 files, each of limited size): per piece NAME/ (scale_piece.py's --out) and NAME.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/gpu/env.sh
OUT=${OUT:-out-gpu}
limit=$1; state=$2; shift 2
mkdir -p "$OUT/work"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | tee "$OUT/work/gpus.txt"
gpus=$(nvidia-smi -L | wc -l)
per=$(( $(nproc --all) / gpus ))
run_piece() {  # GPU, cores, piece, seconds left
  local name st
  name=$(basename "$3" .parquet)
  st="$state/$name"; [ -d "$st" ] || st="$state"
  CUDA_VISIBLE_DEVICES=$1 taskset -c "$2" \
    python3 benchmarks/gpu/scale_piece.py "$3" --state "$st" --out "$OUT/work/$name" \
    --limit-s "$4" --run "/tmp/curate-scale-$name" >"$OUT/work/$name.json" 2>&1
}
t0=$(date +%s)
g=0
for group in "$@"; do  # a group (A.parquet,B.parquet) runs in turn on one GPU
  (
    for piece in ${group//,/ }; do
      left=$(( limit - ($(date +%s) - t0) ))
      [ "$left" -gt 30 ] || break
      run_piece "$g" "$((g * per))-$((g * per + per - 1))" "$piece" "$left"
    done
  ) &
  g=$(( (g + 1) % gpus ))
done
wait
tail -n 3 "$OUT"/work/*.json
# files over a device call's size limit do not come back: compressed, in 7 MB parts
tar -C "$OUT/work" -cf - . | xz -6 -T0 | split -b 7M - "$OUT/pieces.tar.xz." && rm -rf "$OUT/work"
