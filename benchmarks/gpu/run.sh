#!/usr/bin/env bash
# The GPU runs behind benchmarks/h100-measure.md, one phase per device call (each must end
# within the call's 10 minutes). Run from the repository root on the GPU machine, carrying
# .whl (polars wheels, for the stage tables) and .carry (KernelBench, loop results, mined
# problems). Results go to $OUT (the device tool's folder that comes back), else ./out-gpu.
#
#   bash benchmarks/gpu/run.sh tests|tests-a|tests-b
#                                                 GPU tests: all (~8 min), or in two halves
#   bash benchmarks/gpu/run.sh loop SKIP LIMIT [--gpu-inputs]
#                                                 plain KernelBench-style loop over level 1
#   bash benchmarks/gpu/run.sh ours               curate's engine on level 1, cold caches,
#                                                 compared with .carry/loop/*.jsonl
#   bash benchmarks/gpu/run.sh mined              `curate measure` on .carry/mined/diversify
#                                                 (a diversify stage folder of mined problems)
#   bash benchmarks/gpu/run.sh multigpu PHASES LIMIT
#                                                 many GPUs (curate.bench.multigpu): PHASES of
#                                                 scale,medians,kill on LIMIT KernelBench rows
#   bash benchmarks/gpu/run.sh corpus LIMIT       public model-written kernels through the reward
#                                                 and KernelBench's evaluator (.kb/src: a KernelBench
#                                                 checkout's src, carried; earlier results in
#                                                 .carry/mk are continued), then the same kernels
#                                                 again with the build cache warm
#   bash benchmarks/gpu/run.sh reward             python -m curate.bench.reward
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/gpu/env.sh
OUT=${OUT:-out-gpu}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" | tee -a "$OUT/gpu.txt"
case "${1:-}" in
  tests)
    # every test that needs a GPU (~8 min on an H100: split across two device calls with
    # "tests-a" and "tests-b" when a call is limited to 10 minutes)
    python3 -m pytest -q -p no:cacheprovider tests/test_timing.py tests/test_gpu_lock.py \
      tests/test_measure_faults.py tests/test_verifier.py tests/test_measure_multigpu.py \
      tests/test_verify_multigpu.py tests/test_sandbox_server_warmup.py tests/test_measure_dynamic.py \
      tests/test_measure_autotune.py tests/test_extensions.py 2>&1 | tee "$OUT/pytest-gpu.txt" | tail -40 ;;
  tests-a)
    python3 -m pytest -q -p no:cacheprovider tests/test_measure_faults.py tests/test_gpu_lock.py \
      tests/test_measure_autotune.py 2>&1 | tee "$OUT/pytest-gpu-a.txt" | tail -40 ;;
  tests-b)
    python3 -m pytest -q -p no:cacheprovider tests/test_timing.py tests/test_verifier.py \
      tests/test_measure_multigpu.py tests/test_verify_multigpu.py tests/test_sandbox_server_warmup.py \
      tests/test_measure_dynamic.py tests/test_extensions.py 2>&1 | tee "$OUT/pytest-gpu-b.txt" | tail -40 ;;
  loop)
    python3 -m curate.bench.kernelbench_loop --kernelbench "$CURATE_KERNELBENCH" --level 1 \
      --skip "${2:-0}" --limit "${3:-34}" ${4:-} --out "$OUT/loop" 2>&1 | tail -5
    cp "$OUT/loop/results.jsonl" "$OUT/loop-${2:-0}.jsonl" ;;
  ours)
    loops=$(ls .carry/loop/*.jsonl 2>/dev/null | paste -sd, -)
    python3 -m curate.bench.measure --kernelbench "$CURATE_KERNELBENCH" --baseline "$KB_BASELINE" \
      --level 1 --fresh-cache ${loops:+--loop "$loops"} --out "$OUT/ours" --quiet 2>&1 | tail -60 ;;
  mined)
    python3 -m curate.cli measure --from .carry/mined/diversify --out "$OUT/mined" --device cuda \
      --inductor-cache /tmp/curate-fresh-cache 2>&1 | tail -5
    python3 - "$OUT/mined" <<'PY'
import json, sys
s = json.load(open(f"{sys.argv[1]}/measure/stats.json"))
print(json.dumps({k: s.get(k) for k in ("in", "kept", "rejected", "seconds", "rejected_by_reason",
                                         "compile_workers", "compile_ahead", "compile_cache_hits")}, indent=1))
print("rows per hour:", round(3600 * s["in"] / s["seconds"]))
PY
    ;;
  multigpu)
    nvidia-smi -L | tee -a "$OUT/gpu.txt"
    python3 -m curate.bench.multigpu --kernelbench "$CURATE_KERNELBENCH" --level 1 \
      --phase "${2:-scale,kill}" --limit "${3:-40}" --medians-limit "${3:-40}" \
      --out "$OUT/multigpu" 2>&1 | tail -40 ;;
  corpus)
    mkdir -p "$OUT/mk" && cp .carry/mk/ours.jsonl .carry/mk/kb.jsonl "$OUT/mk/" 2>/dev/null
    TORCH_CUDA_ARCH_LIST=9.0 CURATE_REWARD_WORKERS=${WORKERS:-6} python3 benchmarks/model_kernels.py \
      --kb-src .kb/src --out "$OUT/mk" --limit "${2:-110}" --kb-concurrency 4 --warm-into "$OUT/mk/warm" \
      2>&1 | tail -30 ;;
  reward)
    python3 -m curate.bench.reward --out "$OUT/reward.json" 2>&1 | tail -30 ;;
  *) sed -n 2,23p "$0"; exit 2 ;;
esac
