"""The reward's verification workers on one GPU when two large problems meet: two correct
candidates for KernelBench's 19_ReLU at a large input verified at once on one GPU by two
workers, without and with the retry alone (:class:`curate.verify.pool.VerifierPool`
``memory_alone``), beside the same two verified one after the other by one worker (whether the
problem fits the GPU at all). Then, per ``--peaks`` size, one worker verifies the same
candidate three times in turn, timed as the reward times it, and each call's
``details["gpu_peak_bytes"]`` is kept (does a worker's peak change after its first call?).

    python benchmarks/gpu/reward_memory_alone.py --gib 6,9,10 --peaks 2,6 --out OUT/memory-alone.json

Prints and writes, per input size (GiB of float32 input) and setting: the verdicts, the retries,
the seconds. A correct candidate refused for memory that another worker held is a wrong reward.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from curate.data import kernelbench_problems  # noqa: E402
from curate.verify import make_config  # noqa: E402
from curate.verify.pool import VerifierPool  # noqa: E402

CANDIDATE = Path(__file__).resolve().parents[2] / "tests" / "candidates" / "relu_triton.py"


def relu_spec(gib: float) -> list[dict]:
    """A float32 input of about ``gib`` GiB for 19_ReLU, 4096 wide."""
    return [{"kind": "tensor", "shape": [int(gib * 2**30 / 4) // 4096, 4096], "dtype": "float32"}]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", default="6,9,10", help="comma-separated input sizes in GiB (float32)")
    ap.add_argument("--out", default="memory-alone.json")
    ap.add_argument("--peaks", default="2,6", help="comma-separated input sizes (GiB) for the peak-memory calls")
    args = ap.parse_args()
    ref = next(p["code"] for p in kernelbench_problems() if p["level"] == 1 and p["name"] == "19_ReLU")
    cand = CANDIDATE.read_text()
    rows = []
    for gib in (float(g) for g in args.gib.split(",")):
        spec = relu_spec(gib)
        for workers, alone in ((1, False), (2, False), (2, True)):
            pool = VerifierPool(workers=workers, device="cuda", slots=[{}], memory_alone=alone)
            t = time.monotonic()
            try:
                with ThreadPoolExecutor(2) as ex:
                    res = list(ex.map(lambda _: pool.verify(ref, cand, make_config(input_spec=spec, device="cuda",
                                                                                   time_it=False), 600, "relu"),
                                      range(2)))
            finally:
                pool.close()
            row = {"gib": gib, "workers": workers, "memory_alone": alone, "correct": [r.correct for r in res],
                   "reasons": [r.reason[:160] for r in res], "memory_retried": pool.memory_retried,
                   "seconds": round(time.monotonic() - t, 1)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    for gib in (float(g) for g in args.peaks.split(",") if g):
        spec = relu_spec(gib)
        pool = VerifierPool(workers=1, device="cuda", slots=[{}])
        try:
            res = [pool.verify(ref, cand, make_config(input_spec=spec, device="cuda", time_it=True), 600, "relu")
                   for _ in range(3)]
        finally:
            pool.close()
        row = {"gib": gib, "workers": 1, "calls_in_turn": 3, "correct": [r.correct for r in res],
               "gpu_peak_gib": [round(r.details.get("gpu_peak_bytes", 0) / 2**30, 2) for r in res],
               "seconds": [r.details.get("seconds") for r in res]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
