"""A plain KernelBench-style timing loop: the baseline curate's measure engine is held to.

What a harness written the way KernelBench times its baselines does, one problem at a time
in one process: execute the problem's source, build ``Model(*get_init_inputs())`` on the
CPU and move it to the GPU, build the inputs with ``get_inputs()`` on the CPU and move them
with ``.cuda()``, then time the forward with CUDA events: 3 warm-up calls, 100 trials, a
256 MB buffer overwritten before each trial to flush the L2 cache, the end event recorded
right after the call and the device synchronized after it. No checks, no TorchInductor,
no worker processes. (Written for this comparison from KernelBench's described protocol,
ScalingIntelligence/KernelBench; none of its code is used.)

Usage (on a GPU machine)::

    python -m curate.bench.kernelbench_loop --kernelbench problems.jsonl --level 1 \\
        --out runs/loop-l1 [--skip N --limit M]

Writes ``results.jsonl`` (one line per problem: ``name``, ``mean_ms``, ``median_ms``,
``std_ms``, ``trials``, ``wall_seconds`` (the whole problem: load, inputs, timing) and
``error``, ``gpu_inputs``) and prints a one-line summary. Imports only torch and the standard library.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

FLUSH_BYTES = 256 * 1024 * 1024


def time_problem(code: str, name: str, warmup: int = 3, trials: int = 100,
                 gpu_inputs: bool = False) -> dict[str, Any]:
    """Load, build and time one problem the plain way; return its record (see the module).

    ``gpu_inputs`` runs ``get_inputs()`` under ``torch.device("cuda")`` so its tensors are
    made on the GPU: the timed region and protocol are unchanged, only the CPU-side input
    building (most of the loop's wall time) is skipped.
    """
    import torch

    t0 = time.perf_counter()
    rec: dict[str, Any] = {"name": name, "error": None, "gpu_inputs": gpu_inputs}
    try:
        ns: dict[str, Any] = {"__name__": f"kernelbench_loop_{name}"}
        exec(compile(code, f"<{name}>", "exec"), ns)
        model = ns["Model"](*ns["get_init_inputs"]()).cuda()
        if gpu_inputs:
            with torch.device("cuda"):
                raw = ns["get_inputs"]()
        else:
            raw = ns["get_inputs"]()
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in raw]
        flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
        times = []
        with torch.no_grad():
            for _ in range(warmup):
                model(*inputs)
            torch.cuda.synchronize()
            for _ in range(trials):
                flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                model(*inputs)
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
        rec.update(mean_ms=statistics.fmean(times), median_ms=statistics.median(times),
                   std_ms=statistics.pstdev(times), trials=len(times))
        del model, inputs, flush
    except Exception as exc:  # a broken problem is a row, not the end of the loop
        rec["error"] = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        ns = {}
        torch.cuda.empty_cache()
    rec["wall_seconds"] = time.perf_counter() - t0
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m curate.bench.kernelbench_loop",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench", type=Path, required=True, help="KernelBench problems.jsonl")
    ap.add_argument("--level", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--skip", type=int, default=0, help="skip the first N problems (to split a run)")
    ap.add_argument("--limit", type=int, default=None, help="at most N problems (after --skip)")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--gpu-inputs", action="store_true",
                    help="build inputs on the GPU (same timing; the loop's wall time is then not "
                         "KernelBench's)")
    args = ap.parse_args(argv)

    rows = [json.loads(line) for line in args.kernelbench.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if int(r["level"]) == args.level][args.skip:]
    if args.limit is not None:
        rows = rows[: args.limit]
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with (args.out / "results.jsonl").open("a") as f:
        for k, r in enumerate(rows, 1):
            rec = time_problem(r["code"], r["name"], args.warmup, args.trials, args.gpu_inputs)
            f.write(json.dumps(rec) + "\n")
            f.flush()
            print(f"[{k}/{len(rows)}] {r['name']}: median {rec.get('median_ms', float('nan')):.3f} ms "
                  f"({rec['wall_seconds']:.1f} s){' ' + rec['error'] if rec['error'] else ''}",
                  file=sys.stderr, flush=True)
    wall = time.perf_counter() - t0
    print(json.dumps({"problems": len(rows), "wall_seconds": wall,
                      "seconds_per_problem": wall / max(1, len(rows))}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
