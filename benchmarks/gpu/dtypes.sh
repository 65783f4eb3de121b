#!/usr/bin/env bash
# Precision variants on one GPU (issue 36), one device call of about 7 minutes:
#   bash benchmarks/gpu/dtypes.sh [RUN]
# RUN (default runs/gpu-dtypes) holds the sample's dedup stage, made on the CPU machine by
# `python benchmarks/gpu/dtypes.py prepare runs/default/dedup runs/gpu-dtypes 36` and carried
# with .whl (the wheels benchmarks/gpu/env.sh installs: polars). Figures go to $OUT
# (dtypes-summary.json, candidates.json, rows.parquet, diversify-rejected.parquet, run.log);
# benchmarks/h200-dtypes.md is the report they fill.
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/gpu/env.sh
OUT=${OUT:-out-gpu}; export OUT; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/run.log" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUT/run.log" 2>&1
python3 benchmarks/gpu/dtypes.py run "${1:-runs/gpu-dtypes}" >> "$OUT/run.log" 2>&1
echo "exit $?"
grep -v -E ": [0-9]+/[0-9]+$" "$OUT/run.log" | tail -60
