"""Reward throughput and latency from one process: ``python -m curate.bench.reward``.

What an RL trainer's reward worker sees: :func:`curate.reward.compute_score` called from
``--concurrency`` threads of one long-lived process on honest Triton candidates (the repo's
``tests/candidates/relu_triton.py`` and ``matmul_triton.py``) against three problems
(ReLU on two shapes, a square fp32 matmul), with the full reward (5 fresh input sets,
timing against eager). Each candidate's kernels get a unique no-op statement, so Triton
compiles every one afresh as it would a new model reply (``--same-source`` turns this off).

Prints, and writes as JSON (``--out``): the first call's latency (sandbox server, worker,
CUDA context, reference, compile, timing: everything a cold trainer pays), a syntax-error
reply's latency (scored without any worker), and candidates per hour at steady state.
Targets on an H100: at least 10,000 an hour with 8 concurrent calls, first call at most
10 s, a syntax error at most 0.5 s. Imports only torch, triton, numpy, the standard
library and curate.
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

RELU = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
"""

MATMUL = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


N = {n}


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
"""

# (name, reference, candidate file) on the GPU and on the CPU (Triton interpreter: small)
PROBLEMS = {
    "cuda": [("relu_2d", RELU.format(shape="4096, 8192"), "relu_triton"),
             ("relu_3d", RELU.format(shape="64, 512, 1024"), "relu_triton"),
             ("matmul", MATMUL.format(n=2048), "matmul_triton")],
    "cpu": [("relu_2d", RELU.format(shape="16, 250"), "relu_triton"),
            ("relu_3d", RELU.format(shape="4, 8, 100"), "relu_triton"),
            ("matmul", MATMUL.format(n=64), "matmul_triton")],
}
SYNTAX_ERROR = "```python\nclass ModelNew(nn.Module:\n    pass\n```"


def fresh_kernels(code: str, nonce: int) -> str:
    """``code`` with a no-op assignment at the top of every ``@triton.jit`` function, so
    Triton's caches (keyed on the kernel's source) miss, as for a new model reply."""
    lines = code.splitlines()
    inserts = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            first = node.body[0]
            inserts.append((first.lineno - 1, " " * first.col_offset + f"curate_nonce = {nonce}"))
    for lineno, text in sorted(inserts, reverse=True):
        lines.insert(lineno, text)
    return "\n".join(lines) + "\n"


def _reply(code: str) -> str:
    return f"Here is the kernel.\n\n```python\n{code}```\n"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto", help="auto (CUDA when present), cuda or cpu")
    ap.add_argument("--concurrency", type=int, default=8, help="concurrent compute_score calls")
    ap.add_argument("--n", type=int, default=400, help="candidates in the steady-state phase")
    ap.add_argument("--candidates", default=None, help="folder of candidate files (default: the repo's tests/candidates)")
    ap.add_argument("--same-source", action="store_true", help="do not make each candidate's kernels new")
    ap.add_argument("--out", default="reward-bench.json", help="JSON report path")
    args = ap.parse_args(argv)

    import torch

    from curate.reward import compute_score
    from curate.verify import resolve_device

    from curate.verify import pool as pool_module

    details: list[dict] = []  # every verification's details, in the order they finish
    plain_verify = pool_module.VerifierPool.verify

    def recorded(self, *a, **k):
        result = plain_verify(self, *a, **k)
        details.append(result.details)
        return result

    pool_module.VerifierPool.verify = recorded  # the bench looks inside; scoring is unchanged

    device = resolve_device(args.device)
    kind = "cuda" if device.startswith("cuda") else "cpu"
    folder = Path(args.candidates) if args.candidates else Path(__file__).resolve().parents[2] / "tests" / "candidates"
    sources = {p: (folder / f"{p}.py").read_text() for p in ("relu_triton", "matmul_triton")}
    problems = PROBLEMS[kind]
    settings = {"device": device, "workers": args.concurrency}
    counter = iter(range(10**9))

    def one(i: int) -> tuple[float, dict]:
        name, reference, cand = problems[i % len(problems)]
        code = sources[cand] if args.same_source else fresh_kernels(sources[cand], next(counter))
        t = time.monotonic()
        out = compute_score("curate/bench", _reply(code), reference, None, **settings)
        return time.monotonic() - t, dict(out, problem=name)

    gpu = torch.cuda.get_device_name() if kind == "cuda" else "cpu"
    print(f"device: {gpu}; torch {torch.__version__}; python {sys.version.split()[0]}", flush=True)

    first_s, first = one(0)
    from curate import sandbox

    server_start_s = round(sandbox._SERVER.start_s, 3) if sandbox._SERVER is not None else None
    startup = details[-1].get("worker_startup") if details else None
    print(f"first call: {first_s:.2f} s ({first['reason']}); sandbox server start {server_start_s} s; "
          f"worker start {startup}; verification {details[-1].get('phase_s') if details else None}",
          flush=True)
    syntax = []
    for _ in range(5):
        t = time.monotonic()
        r = compute_score("curate/bench", SYNTAX_ERROR, problems[0][1], None, **settings)
        syntax.append(time.monotonic() - t)
    print(f"syntax error: {max(syntax) * 1000:.1f} ms at most ({r['reason'][:60]})", flush=True)

    # warm: every worker holds every problem once, then the measured phase
    with ThreadPoolExecutor(args.concurrency) as ex:
        warm = list(ex.map(one, range(1, 1 + args.concurrency * len(problems))))
        t0 = time.monotonic()
        mark = len(details)
        results = list(ex.map(one, range(args.n)))
        wall = time.monotonic() - t0
    steady = details[mark:]
    phases = sorted({k for d in steady for k in (d.get("phase_s") or {})})
    phase_median = {k: round(statistics.median([d["phase_s"][k] for d in steady if k in (d.get("phase_s") or {})]), 4)
                    for k in phases}
    correct = sum(r["correct"] for _, r in results)
    latencies = [s for s, _ in results]
    per_hour = args.n / wall * 3600
    report = {
        "device": gpu, "torch": torch.__version__, "concurrency": args.concurrency, "n": args.n,
        "first_call_s": round(first_s, 3), "first_call_correct": bool(first["correct"]),
        "syntax_error_max_s": round(max(syntax), 4),
        "steady_wall_s": round(wall, 2), "candidates_per_hour": round(per_hour),
        "latency_median_s": round(statistics.median(latencies), 3),
        "latency_max_s": round(max(latencies), 3),
        "correct": correct, "warm_correct": sum(r["correct"] for _, r in warm),
        "speedups": {p[0]: round(statistics.median([r["speedup_vs_eager"] for _, r in results
                                                    if r["problem"] == p[0]] or [0.0]), 3) for p in problems},
        "failures": sorted({r["reason"][:120] for _, r in results if not r["correct"]})[:5],
        "fresh_kernels": not args.same_source,
        "first_call_phase_s": (details[0].get("phase_s") if details else None),
        "first_call_server_start_s": server_start_s,
        "first_call_worker_startup_s": startup,
        "steady_phase_median_s": phase_median,
        "steady_fresh_workers": sum(d.get("worker_call") == 1 for d in steady),
        "steady_retired_workers": sum(bool(d.get("worker_retired")) for d in steady),
        "targets": {"candidates_per_hour": 10000, "first_call_s": 10, "syntax_error_s": 0.5},
    }
    print(f"steady state: {args.n} candidates in {wall:.1f} s from {args.concurrency} threads = "
          f"{per_hour:,.0f} an hour; median latency {report['latency_median_s']} s; "
          f"{correct}/{args.n} correct", flush=True)
    print(f"inside the worker, median seconds: {phase_median}; calls that started a worker: "
          f"{report['steady_fresh_workers']}, retired one: {report['steady_retired_workers']}", flush=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    return report


if __name__ == "__main__":
    main()
