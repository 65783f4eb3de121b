"""Where the reward's GPU memory goes: one verification of a correct candidate for KernelBench's
19_ReLU at a large float32 input, run in this process with torch's allocator history on, and
the moment its allocated bytes peak taken apart by the verifier's line that allocated each live
block (`torch.cuda.memory._record_memory_history`, replayed from the snapshot's trace).

    python benchmarks/gpu/reward_memory_peak.py --gib 2,6 --calls 2 --out OUT/memory-peak.json

Per input size and call (the first call of a worker also measures the reference's baseline and
its constant-answer margin; later calls reuse them), prints and writes: the verdict, the peak
in GiB and as a multiple of the input, and the live blocks at the peak grouped by the first
frame under ``curate/`` (their GiB). A verification whose peak is many times its input limits
how large a problem the reward can judge, and how many workers can share a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from curate.data import kernelbench_problems  # noqa: E402
from curate.verify import make_config  # noqa: E402
from curate.verify.worker import verify_task  # noqa: E402
from reward_memory_alone import CANDIDATE, relu_spec  # noqa: E402  (this script's folder)


def _site(frames: list[dict]) -> str:
    """The innermost frame in the project's verifier (else the innermost frame at all)."""
    for f in frames:
        if "/curate/" in f.get("filename", ""):
            return f"{f['filename'].rsplit('/curate/', 1)[1]}:{f.get('line')} {f.get('name')}"
    return f"{frames[0].get('filename', '?').rsplit('/', 1)[-1]}:{frames[0].get('line')}" if frames else "?"


def peak_breakdown(trace: list[dict]) -> tuple[int, dict[str, int]]:
    """Replay an allocator trace: the most bytes allocated at once and, at that moment, the
    live bytes per allocating site."""
    live: dict[int, tuple[int, str]] = {}
    now = peak = 0
    at_peak: dict[int, tuple[int, str]] = {}
    for e in trace:
        if e["action"] == "alloc":
            live[e["addr"]] = (e["size"], _site(e.get("frames", [])))
            now += e["size"]
            if now > peak:
                peak, at_peak = now, dict(live)
        elif e["action"] == "free_completed" and e["addr"] in live:
            now -= live.pop(e["addr"])[0]
    sites: Counter = Counter()
    for size, site in at_peak.values():
        sites[site] += size
    return peak, dict(sites.most_common(12))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", default="2,6", help="comma-separated input sizes in GiB (float32)")
    ap.add_argument("--calls", type=int, default=2, help="verifications per size in one process (cache kept)")
    ap.add_argument("--out", default="memory-peak.json")
    ap.add_argument("--wide-offsets", action="store_true",
                    help="index the candidate's kernel in int64 (inputs of 2**31 elements and more: 8 GiB of float32)")
    args = ap.parse_args()
    ref = next(p["code"] for p in kernelbench_problems() if p["level"] == 1 and p["name"] == "19_ReLU")
    cand = CANDIDATE.read_text()
    if args.wide_offsets:
        cand = cand.replace("pid * BLOCK", "pid.to(tl.int64) * BLOCK")
        assert "tl.int64" in cand
    rows = []
    for gib in (float(g) for g in args.gib.split(",")):
        cache: dict = {}
        for call in range(args.calls):
            torch.cuda.empty_cache()
            torch.cuda.memory._record_memory_history(max_entries=500_000, stacks="python")
            t = time.monotonic()
            try:
                res = verify_task(ref, cand, make_config(input_spec=relu_spec(gib), device="cuda"), cache)
            except Exception as exc:  # noqa: BLE001  the figure is the point, not the verdict
                res = {"correct": False, "reason": f"{type(exc).__name__}: {exc}"[:200], "details": {}}
            seconds = time.monotonic() - t
            snap = torch.cuda.memory._snapshot()
            torch.cuda.memory._record_memory_history(enabled=None)
            peak, sites = peak_breakdown(snap["device_traces"][torch.cuda.current_device()])
            row = {"gib": gib, "call": call, "correct": res["correct"], "reason": res["reason"][:160],
                   "peak_gib": round(peak / 2**30, 2), "peak_over_input": round(peak / (gib * 2**30), 2),
                   "max_allocated_gib": round(res["details"].get("gpu_peak_bytes", 0) / 2**30, 2),
                   "seconds": round(seconds, 1), "phase_s": res["details"].get("phase_s"),
                   "live_at_peak_gib": {k: round(v / 2**30, 2) for k, v in sites.items()}}
            rows.append(row)
            print(json.dumps(row), flush=True)
    Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
