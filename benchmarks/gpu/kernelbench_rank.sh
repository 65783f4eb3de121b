#!/usr/bin/env bash
# KernelBench's 250 problems (the copy in curate/data/kernelbench, their current sizes) as a
# `kernelbench` source through curate mine -> measure -> rank on the GPU, with the difficulty
# columns checked against the published per-problem results in curate/data/passrates (the
# predictor's training data: a fit check; the rank table comes back for held-out checks).
# Run from the repository root on the GPU machine, carrying .whl (the polars, libcst and
# PyYAML wheels for Python 3.12 that mine and the stage tables need; the image lacks them).
#
#   bash benchmarks/gpu/kernelbench_rank.sh pipeline [2024]
#                                                         mine, measure (TorchInductor too),
#                                                         rank, score: ~6-8 min on one H200
#                                                         (2024: the files at their 2024 sizes)
#   bash benchmarks/gpu/kernelbench_rank.sh completions [N]
#                                                         mine, then `rank --solver completions`
#                                                         on N published kernels (default 96,
#                                                         CUDA and Triton) beside their verdicts
#                                                         (KB_VERIFY_WORKERS: verify workers, 12)
#   bash benchmarks/gpu/kernelbench_rank.sh kernels FILE.jsonl
#                                                         mine, then verify every kernel of FILE
#                                                         (the format of kernels.jsonl, publisher's
#                                                         verdict or not), one rank run per model
#                                                         and backend (KB_BACKENDS, cuda,triton);
#                                                         the verification cache comes back as
#                                                         verify-cache.tgz: put it in runs/ and
#                                                         carry runs/verify-cache.tgz to resume
#
# Results in $OUT: gpu.txt, <phase>.log, difficulty-check.json (pipeline), stats of each stage
# (<stage>-stats.json), rank.parquet (the ranked rows: difficulty_score, speedup_headroom,
# level, category, the source path naming the KernelBench file), completions-check.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/gpu/env.sh
OUT=${OUT:-out-gpu}
mkdir -p "$OUT"
RUN=${KB_RUN:-/tmp/kb-run}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" | tee -a "$OUT/gpu.txt"
python3 -c "import polars, libcst, yaml" || { echo "carry .whl (polars, polars-runtime-32, libcst, pyyaml)"; exit 2; }
keep() {
  for s in mine measure rank completions/rank; do
    [ -f "$RUN/$s/stats.json" ] && cp "$RUN/$s/stats.json" "$OUT/$(echo "$s" | tr / -)-stats.json"
  done
  python3 - "$RUN" "$OUT" <<'PY'
import sys
from pathlib import Path
import polars as pl
run, out = Path(sys.argv[1]), Path(sys.argv[2])
for stage, name in (("rank", "rank.parquet"), ("completions/rank", "completions-rank.parquet")):
    files = sorted((run / stage / "problems").glob("*.parquet"))
    if files:
        df = pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed")
        df.drop([c for c in ("code", "shape_variants") if c in df.columns]).write_parquet(out / name)
PY
  cp "$RUN"/difficulty-check.json "$RUN"/completions-check.json "$RUN"/pipeline-seconds.json "$OUT"/ 2>/dev/null
}
case "${1:-}" in
  pipeline)
    # "2024": KernelBench's files at their 2024 sizes (benchmarks/data/kernelbench-2024.jsonl)
    if [ "${2:-current}" = 2024 ]; then RUN=$RUN-2024; PROBLEMS="--problems benchmarks/data/kernelbench-2024.jsonl"; fi
    # a call cut by the timeout leaves the stages' journals in $RUN: the next call on the same
    # (warm) machine resumes there
    timeout 450 python3 benchmarks/kernelbench_pipeline.py run --out "$RUN" --device cuda ${PROBLEMS:-} \
      > "$OUT/pipeline.log" 2>&1
    echo "exit $?"
    python3 benchmarks/kernelbench_pipeline.py score --out "$RUN" > "$OUT/score.log" 2>&1
    ;;
  completions)
    [ -d "$RUN/mine/problems" ] || python3 benchmarks/kernelbench_pipeline.py run --out "$RUN" --device cuda \
      --mine-only > "$OUT/mine.log" 2>&1
    timeout 480 python3 benchmarks/kernelbench_pipeline.py completions --out "$RUN" --device cuda \
      --backends cuda,triton --max-kernels "${2:-96}" --verify-workers "${KB_VERIFY_WORKERS:-12}" > "$OUT/completions.log" 2>&1
    echo "exit $?"
    ;;
  kernels)
    [ -d "$RUN/mine/problems" ] || python3 benchmarks/kernelbench_pipeline.py run --out "$RUN" --device cuda \
      --mine-only > "$OUT/mine.log" 2>&1
    if [ -f runs/verify-cache.tgz ] && [ ! -d "$RUN/completions/cache" ]; then
      mkdir -p "$RUN/completions" && tar xzf runs/verify-cache.tgz -C "$RUN/completions"
    fi
    timeout "${KB_TIMEOUT:-480}" python3 benchmarks/kernelbench_pipeline.py completions --out "$RUN" --device cuda \
      --kernels "$2" --unpublished --per-model --backends "${KB_BACKENDS:-cuda,triton}" \
      --verify-workers "${KB_VERIFY_WORKERS:-12}" > "$OUT/completions.log" 2>&1
    echo "exit $?"
    tar czf "$OUT/verify-cache.tgz" -C "$RUN/completions" cache
    ;;
  *) echo "usage: $0 pipeline [2024] | completions [N] | kernels FILE.jsonl"; exit 2 ;;
esac
keep
grep -v -E ": [0-9]+/[0-9]+$" "$OUT"/*.log | tail -25
