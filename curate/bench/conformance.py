"""Check a problem table the way a KernelBench-style harness would run it, independently of
the pipeline's own check (:mod:`curate.conform`).

For each row, in a worker process (:class:`curate.sandbox.Sandbox`: time limit, crash
isolation): ``exec(code, {})``; ``torch.manual_seed(seed)`` and ``Model(*get_init_inputs())``
(the reference), the same again (an identity ``ModelNew``); both moved to the device; then for
each trial ``torch.manual_seed``, ``get_inputs()``, floating-point tensors cast to float32
(``--cast-all``: every tensor, as a harness that casts all inputs does), inputs moved to the
device, both forwards under ``torch.no_grad()``, and the outputs, which must be one tensor
each, compared exactly. Failure reasons: ``exec_fails``, ``missing_names``, ``init_fails``,
``inputs_fail``, ``forward_fails``, ``non_tensor_output``, ``mismatch`` (the two builds
disagree), and ``timeout``/``memory``/``crash`` from the worker.

Usage::

    python -m curate.bench.conformance --from RUN[/STAGE] [--device cuda] [--trials 5]
        [--workers N] [--timeout-s 120] [--limit N] [--sample N] [--json results.json]

``--from`` takes a run folder (its ``export`` stage, else its latest stage with problems), a
stage folder, a ``problems`` folder or one parquet file. Prints the torch version, the number
of rows that pass and the failures by reason (with a few names each); exits 0. Imports only
torch, numpy-free standard library code, and polars or pyarrow to read the table: it runs
where curate's other dependencies (datasets, libcst, datasketch) are absent.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

STAGE_ORDER = ("export", "rank", "measure", "diversify", "dedup", "mine")


def parquet_files(path: Path) -> list[Path]:
    """The problem parquet files under ``path`` (see the module docstring).

    Raises:
        FileNotFoundError: none there.
    """
    if path.is_file():
        return [path]
    for stage in STAGE_ORDER:  # a run folder
        files = sorted((path / stage / "problems").glob("*.parquet"))
        if files:
            return files
    for d in (path / "problems", path):
        files = sorted(d.glob("*.parquet"))
        if files:
            return files
    raise FileNotFoundError(f"no problems parquet under {path}")


def read_rows(files: list[Path]) -> list[dict[str, Any]]:
    """``problem_id``, ``name`` and ``code`` of every row (polars when present, else pyarrow)."""
    cols = ["problem_id", "name", "code"]
    rows: list[dict[str, Any]] = []
    try:
        import polars as pl

        for f in files:
            rows += pl.read_parquet(f, columns=cols).to_dicts()
    except ImportError:
        import pyarrow.parquet as pq

        for f in files:
            rows += pq.read_table(f, columns=cols).to_pylist()
    return rows


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def harness_task(code: str, device: str = "cpu", trials: int = 5, seed: int = 42,
                 cast_all: bool = False) -> dict[str, Any]:
    """Run one problem as a KernelBench-style harness; ``{"reason": None | str, "detail",
    "torch"}``. Never raises for bad code."""
    import torch

    def fail(reason: str, detail: str = "") -> dict[str, Any]:
        return {"reason": reason, "detail": detail, "torch": torch.__version__}

    context: dict[str, Any] = {}
    try:
        exec(code, context)
    except BaseException as exc:
        return fail("exec_fails", _err(exc))
    names = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in context]
    if names:
        return fail("missing_names", ", ".join(names))
    dev = torch.device(device)
    try:
        with torch.no_grad():
            init = context["get_init_inputs"]()
            torch.manual_seed(seed)
            reference = context["Model"](*init).to(dev)
            torch.manual_seed(seed)
            model_new = context["Model"](*init).to(dev)
    except BaseException as exc:
        return fail("init_fails", _err(exc))
    for trial in range(trials):
        try:
            torch.manual_seed(seed + 1000 + trial)
            inputs = []
            for x in context["get_inputs"]():
                if isinstance(x, torch.Tensor):
                    if cast_all or x.is_floating_point():
                        x = x.float()
                    x = x.to(dev)
                inputs.append(x)
        except BaseException as exc:
            return fail("inputs_fail", _err(exc))
        try:
            with torch.no_grad():
                expected = reference(*inputs)
                got = model_new(*inputs)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
        except BaseException as exc:
            return fail("forward_fails", _err(exc))
        if not (isinstance(expected, torch.Tensor) and isinstance(got, torch.Tensor)):
            return fail("non_tensor_output", type(expected).__name__)
        if expected.shape != got.shape or not torch.equal(expected, got):
            return fail("mismatch", f"trial {trial}")
    return {"reason": None, "detail": "", "torch": torch.__version__}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="source", required=True, help="run, stage or problems folder, or a parquet file")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--workers", type=int, default=None, help="worker processes (default: 2, 1 on CUDA)")
    ap.add_argument("--timeout-s", type=float, default=120.0)
    ap.add_argument("--limit", type=int, default=None, help="check only the first N rows")
    ap.add_argument("--sample", type=int, default=None, help="check a seeded random sample of N rows")
    ap.add_argument("--cast-all", action="store_true", help="cast every tensor input to float32")
    ap.add_argument("--json", default=None, help="write per-row results here")
    args = ap.parse_args(argv)

    # by its module name, so the task pickles as curate.bench.conformance.harness_task even
    # when this file runs as __main__
    from curate.bench.conformance import harness_task as task
    from curate.sandbox import Sandbox

    rows = read_rows(parquet_files(Path(args.source)))
    if args.sample is not None and args.sample < len(rows):
        rows = random.Random(0).sample(rows, args.sample)
    if args.limit is not None:
        rows = rows[: args.limit]
    cuda = args.device.startswith("cuda")
    sandbox = Sandbox(workers=args.workers or (1 if cuda else 2), timeout_s=args.timeout_s,
                      mem_mb=None if cuda else 16384)
    calls = [((r["code"] or "",), {"device": args.device, "trials": args.trials, "seed": args.seed,
                                    "cast_all": args.cast_all}) for r in rows]
    t0 = time.monotonic()
    results: list[dict[str, Any]] = [{} for _ in rows]
    versions: set[str] = set()
    for i, out in sandbox.map(task, calls):
        res = out.value if out.ok else {"reason": out.status, "detail": out.error[:500], "torch": None}
        versions.add(res.get("torch") or "")
        results[i] = {"problem_id": rows[i]["problem_id"], "name": rows[i]["name"], **res}
    seconds = time.monotonic() - t0
    passed = sum(1 for r in results if r["reason"] is None)
    by_reason: dict[str, list[str]] = defaultdict(list)
    for r in results:
        if r["reason"]:
            by_reason[r["reason"]].append(r["name"])
    print(f"torch {', '.join(sorted(v for v in versions if v))} on {args.device}: "
          f"{passed}/{len(rows)} rows pass ({100.0 * passed / max(1, len(rows)):.1f}%) in {seconds:.0f} s")
    for reason, n in Counter({k: len(v) for k, v in by_reason.items()}).most_common():
        print(f"  {reason}: {n}  e.g. {', '.join(sorted(set(by_reason[reason]))[:5])}")
    if args.json:
        Path(args.json).write_text(json.dumps({"source": args.source, "device": args.device, "rows": len(rows),
                                               "passed": passed, "seconds": round(seconds, 1),
                                               "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
