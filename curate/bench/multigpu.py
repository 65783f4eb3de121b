"""Measure on every GPU of a host: scaling, per-GPU agreement with the plain loop, a killed worker.

Three phases (``--phase``, comma-separated; each fits one ~8-minute call with ``--limit``):

- ``scale``: the same rows measured with one GPU, then with all of them
  (:class:`curate.measure.worker.WorkerPool`, one measure worker per GPU); workers are
  started before the clock runs (their start is reported apart), so ``rows_per_hour`` is
  the measuring itself. ``ratio`` = rows/hour with N GPUs / rows/hour with one;
  ``efficiency`` = ratio / N (the acceptance bar is 0.8).
- ``medians``: KernelBench rows timed on each GPU by curate's engine (eager, the stage's
  checks) and by the plain KernelBench-style loop (:mod:`curate.bench.kernelbench_loop`,
  ``--gpu-inputs``, one process per GPU pinned by ``CUDA_VISIBLE_DEVICES``); per GPU the
  median |ours / loop - 1| and the share of problems within 5%. The loops run first, all
  GPUs at once, then the engine, all GPUs at once: a GPU never runs both together.
- ``kill``: all GPUs measure the rows; after ``--kill-after`` results one measure worker is
  SIGKILLed mid-row. Every result goes to a resume journal as the stage writes it; the
  check: each row has exactly one result (pool and journal), and the killed row was
  finished on another GPU (``died_on``).

Rows: ``--kernelbench problems.jsonl`` (level ``--level``, inputs from ``get_inputs()``) or
``--from DIR`` (a diversify stage folder: mined problems at their input specs; needs
polars). ``--device cpu --simulate-gpus N`` runs ``scale`` and ``kill`` with N fake GPU
slots whose workers time on the CPU (a dry run; ``medians`` needs CUDA).

Output: figures printed, ``--out``/multigpu.json (one key per phase; ``gpu_seconds`` =
wall seconds x GPUs held). Imports only torch (in the workers) and the standard library,
plus polars for ``--from``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from curate.journal import Journal, read_entries
from curate.measure.stats import median
from curate.measure.worker import WorkerPool, gpu_slots


def load_rows(kernelbench: Path | None, source: Path | None, level: int, limit: int | None,
              skip: int = 0) -> list[dict[str, Any]]:
    """``{name, code, input_spec, init_args}`` rows from KernelBench or a stage folder."""
    rows: list[dict[str, Any]] = []
    if kernelbench is not None:
        for line in Path(kernelbench).read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                if int(r["level"]) == level:
                    rows.append({"name": r["name"], "code": r["code"], "input_spec": None,
                                 "init_args": None})
    else:
        from curate.table import read_problems

        for r in read_problems(source).to_dicts():
            rows.append({"name": str(r.get("problem_id")), "code": r["code"],
                         "input_spec": json.loads(r["input_spec"]) if r.get("input_spec") else None,
                         "init_args": json.loads(r["init_args"]) if r.get("init_args") else None})
    rows = rows[skip:]
    return rows[:limit] if limit is not None else rows


def tasks_for(rows: list[dict[str, Any]], device: str, trials: int, warmup: int,
              inductor: bool, budget_s: float | None = None) -> list[dict[str, Any]]:
    """Measure tasks as the stage makes them (checks on, the stage's trial budget)."""
    return [dict(code=r["code"], input_spec=r["input_spec"], init_args=r["init_args"], device=device,
                 inductor=inductor, trials=trials, warmup=warmup, cuda_graph="off", profile=False,
                 name=r["name"], budget_s=budget_s) for r in rows]


def _slots(device: str, n: int | None, simulate: int | None) -> list[dict[str, str]]:
    if simulate:
        return [{"CUDA_VISIBLE_DEVICES": str(k)} for k in range(simulate)]
    return gpu_slots(n)


def _start_all(pool: WorkerPool) -> float:
    """Start every measure worker at once (kept until the pool closes); wall seconds taken."""
    return pool.start_workers(keep_alive=True)


def _timed_map(envs: list[dict[str, str]], device: str, tasks: list[dict[str, Any]], timeout_s: float,
               inductor: bool) -> dict[str, Any]:
    cache = tempfile.mkdtemp(prefix="curate-multigpu-cache-") if inductor else None
    pool = WorkerPool(envs, device=device, timeout_s=timeout_s, inductor_cache=cache,
                      warm_inductor=inductor, compile_workers=None if inductor else 0)
    try:
        start_s = _start_all(pool)
        t = time.monotonic()
        results = dict(pool.map(tasks))
        wall = time.monotonic() - t
    finally:
        pool.close()
    ok = sum(1 for r in results.values() if not r.get("reason"))
    return {"gpus": len(envs), "rows": len(tasks), "ok": ok, "seconds": round(wall, 2),
            "rows_per_hour": round(3600 * len(tasks) / wall, 1) if wall else None,
            "worker_start_seconds": round(start_s, 2), "rows_per_worker": list(pool.per_worker),
            "reasons": _count(r.get("reason") or "ok" for r in results.values()),
            "gpu_names": sorted({r["gpu"] for r in results.values() if r.get("gpu")})}


def phase_scale(rows, device, slots, trials, warmup, timeout_s, inductor) -> dict[str, Any]:
    tasks = tasks_for(rows, device, trials, warmup, inductor)
    one = _timed_map(slots[:1], device, tasks, timeout_s, inductor)
    print(f"scale: 1 GPU: {one['rows']} rows in {one['seconds']} s = {one['rows_per_hour']} rows/h",
          flush=True)
    many = _timed_map(slots, device, tasks, timeout_s, inductor)
    print(f"scale: {many['gpus']} GPUs: {many['rows']} rows in {many['seconds']} s = "
          f"{many['rows_per_hour']} rows/h (rows per worker {many['rows_per_worker']})", flush=True)
    ratio = many["rows_per_hour"] / one["rows_per_hour"] if one["rows_per_hour"] else None
    eff = ratio / len(slots) if ratio else None
    print(f"scale: ratio {ratio and round(ratio, 3)} with {len(slots)} GPUs, efficiency "
          f"{eff and round(eff, 3)} (bar 0.8)", flush=True)
    return {"one_gpu": one, "all_gpus": many, "ratio": ratio, "efficiency": eff,
            "meets_0_8": bool(eff is not None and eff >= 0.8),
            "gpu_seconds": round(one["seconds"] + one["worker_start_seconds"]
                                 + len(slots) * (many["seconds"] + many["worker_start_seconds"]), 1)}


def _loop_on_gpu(kernelbench: Path, level: int, skip: int, limit: int, gpu: str, out: Path,
                 trials: int, warmup: int) -> subprocess.Popen:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.jsonl").unlink(missing_ok=True)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu}
    return subprocess.Popen([sys.executable, "-m", "curate.bench.kernelbench_loop", "--kernelbench",
                             str(kernelbench), "--level", str(level), "--skip", str(skip), "--limit",
                             str(limit), "--trials", str(trials), "--warmup", str(warmup),
                             "--gpu-inputs", "--out", str(out)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def phase_medians(kernelbench: Path, level: int, skip: int, limit: int, slots, trials, warmup,
                  timeout_s, out: Path, per_gpu: int = 1, budget_s: float | None = None,
                  inductor: bool = False) -> dict[str, Any]:
    rows = load_rows(kernelbench, None, level, limit, skip)
    t0 = time.monotonic()
    procs = {s["CUDA_VISIBLE_DEVICES"]: _loop_on_gpu(kernelbench, level, skip, limit,
                                                     s["CUDA_VISIBLE_DEVICES"], out / f"loop-gpu{k}",
                                                     trials, warmup)
             for k, s in enumerate(slots)}
    for p in procs.values():
        p.wait()
    loop_s = time.monotonic() - t0
    print(f"medians: plain loop on {len(slots)} GPUs at once: {loop_s:.0f} s", flush=True)
    tasks = tasks_for(rows, "cuda", trials, warmup, inductor=inductor, budget_s=budget_s)
    ours: dict[int, dict[int, dict]] = {}

    def engine(k: int) -> None:
        # per_gpu > 1: the stage's default on a many-core host, measure workers sharing the GPU
        # (only timed trials hold it alone), with --inductor compiling beside the timing
        pool = WorkerPool([slots[k]] * per_gpu, device="cuda", timeout_s=timeout_s,
                          compile_workers=0)
        try:
            if per_gpu > 1:
                pool.start_workers(keep_alive=True)
            # as the stage does: a row refused memory beside the others is measured again alone
            ours[k] = dict(pool.map_memory_alone(tasks))
        finally:
            pool.close()

    t1 = time.monotonic()
    threads = [threading.Thread(target=engine, args=(k,)) for k in range(len(slots))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    ours_s = time.monotonic() - t1
    per_gpu = []
    for k, s in enumerate(slots):
        loop = {}
        path = out / f"loop-gpu{k}" / "results.jsonl"
        if path.exists():
            for line in path.read_text().splitlines():
                rec = json.loads(line)
                loop[rec["name"]] = rec
        ratios = []
        detail = []
        for j, r in enumerate(rows):
            res = ours.get(k, {}).get(j) or {}
            e = res.get("eager") or {}
            lp = loop.get(r["name"]) or {}
            detail.append({"name": r["name"], "loop_ms": lp.get("median_ms"),
                           "ours_ms": e.get("median_ms"), "reason": res.get("reason"),
                           "compile_ms": (res.get("compile") or {}).get("median_ms")})
            if e.get("median_ms") and lp.get("median_ms"):
                ratios.append(e["median_ms"] / lp["median_ms"])
        dev = [abs(x - 1.0) for x in ratios]
        gpu_name = next((x.get("gpu") for x in ours.get(k, {}).values() if x.get("gpu")), None)
        rec = {"gpu": s["CUDA_VISIBLE_DEVICES"], "gpu_name": gpu_name, "n": len(ratios),
               "median_abs_deviation": median(dev) if dev else None,
               "median_ratio": median(ratios) if ratios else None,
               "within_5pct": sum(1 for d in dev if d <= 0.05) / len(dev) if dev else None}
        rec["rows"] = detail
        rec["median_within_5pct"] = bool(rec["median_abs_deviation"] is not None
                                         and rec["median_abs_deviation"] <= 0.05)
        per_gpu.append(rec)
        print(f"medians: GPU {rec['gpu']} ({gpu_name}): {rec['n']} problems, median |ours/loop - 1| "
              f"{_pct(rec['median_abs_deviation'])}, median ratio {_r(rec['median_ratio'])}, "
              f"within 5%: {_pct(rec['within_5pct'])}", flush=True)
    return {"problems": len(rows), "per_gpu": per_gpu, "loop_seconds": round(loop_s, 1),
            "ours_seconds": round(ours_s, 1),
            "gpu_seconds": round(len(slots) * (loop_s + ours_s), 1)}


def phase_kill(rows, device, slots, trials, warmup, timeout_s, kill_after: int,
               out: Path) -> dict[str, Any]:
    tasks = tasks_for(rows, device, trials, warmup, inductor=False)
    journal = Journal(out / "kill_journal.jsonl", {"phase": "kill", "rows": len(rows)})
    if journal.resumed:  # a journal of an earlier run of this phase: start over
        journal.remove()
        journal = Journal(out / "kill_journal.jsonl", {"phase": "kill", "rows": len(rows)})
    pool = WorkerPool(slots, device=device, timeout_s=timeout_s, compile_workers=0)
    finished = [0]
    killed: list[dict[str, Any]] = []

    def kill_one() -> None:
        # from the loop that takes the results: once kill_after rows are in, the other
        # workers are mid-row (a thread polling for that missed every row under load)
        for g, (i, pid) in sorted(pool.running().items()):
            os.kill(pid, signal.SIGKILL)
            killed.append({"worker": g, "row": i, "pid": pid})
            return

    t0 = time.monotonic()
    got: list[tuple[int, dict]] = []
    try:
        _start_all(pool)
        for i, res in pool.map(tasks):
            got.append((i, res))
            journal.add(f"row{i}", {"reason": res.get("reason"), "worker": res.get("worker"),
                                    "died_on": res.get("died_on")})
            finished[0] += 1
            if not killed and finished[0] >= kill_after:
                kill_one()
    finally:
        pool.close()
    wall = time.monotonic() - t0
    indices = [i for i, _ in got]
    keys = [key for _, key, _ in read_entries(journal.path)]
    res = dict(got)
    rec: dict[str, Any] = {"rows": len(rows), "results": len(got), "killed": killed,
                           "each_row_once": sorted(indices) == list(range(len(rows))),
                           "journal_each_row_once": sorted(keys) == sorted(f"row{i}" for i in range(len(rows))),
                           "retried": pool.retried, "seconds": round(wall, 1),
                           "gpu_seconds": round(len(slots) * wall, 1)}
    # the row the kill landed on (the one named at the kill, or the next one on that worker
    # when the named row finished within the instant between the check and the signal)
    victims = {i: r for i, r in res.items() if r.get("died_on")}
    rec["killed_rows"] = {str(i): {"reason": r.get("reason"), "worker": r.get("worker"),
                                   "died_on": r.get("died_on"), "detail": (r.get("detail") or "")[:300]}
                          for i, r in victims.items()}
    if killed:
        g = killed[0]["worker"]
        rec["finished_elsewhere"] = bool(victims) and all(
            not r.get("reason") and r.get("worker") != g and r.get("died_on") == [g] for r in victims.values())
    print(f"kill: {len(got)} results for {len(rows)} rows; killed {killed}; each row once: "
          f"{rec['each_row_once']} (journal: {rec['journal_each_row_once']}); rows its worker died "
          f"on: {rec['killed_rows']}; finished on another GPU: {rec.get('finished_elsewhere')}", flush=True)
    journal.remove()
    return rec


def _count(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return out


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _r(x: float | None) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m curate.bench.multigpu", description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--kernelbench", type=Path, help="KernelBench problems.jsonl")
    src.add_argument("--from", dest="source", type=Path, help="a diversify stage folder (mined problems)")
    ap.add_argument("--level", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--phase", default="scale,medians,kill", help="comma-separated: scale, medians, kill")
    ap.add_argument("--limit", type=int, default=40, help="rows for scale and kill")
    ap.add_argument("--skip", type=int, default=0, help="skip the first N rows")
    ap.add_argument("--medians-limit", type=int, default=30, help="KernelBench problems for medians")
    ap.add_argument("--medians-skip", type=int, default=0)
    ap.add_argument("--gpus", type=int, default=None, help="GPUs to use (default: all visible)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--simulate-gpus", type=int, default=None,
                    help="with --device cpu: this many fake GPU slots (a dry run)")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--inductor", action="store_true", help="scale: time TorchInductor too (cold caches)")
    ap.add_argument("--workers-per-gpu", type=int, default=1,
                    help="medians: measure workers sharing each GPU (the stage's default is more)")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="medians: seconds of timed trials per callable (default: the timing default)")
    ap.add_argument("--kill-after", type=int, default=4, help="kill: results before the kill")
    ap.add_argument("--timeout-s", type=float, default=120.0)
    args = ap.parse_args(argv)
    if args.device == "cpu" and not args.simulate_gpus:
        ap.error("--device cpu needs --simulate-gpus N")
    phases = [p.strip() for p in args.phase.split(",") if p.strip()]
    if "medians" in phases and (args.device != "cuda" or args.kernelbench is None):
        ap.error("the medians phase needs --device cuda and --kernelbench")
    args.out.mkdir(parents=True, exist_ok=True)
    slots = _slots(args.device, args.gpus, args.simulate_gpus)
    report: dict[str, Any] = {"device": args.device, "gpus": len(slots), "slots": slots,
                              "simulated": bool(args.simulate_gpus), "phases": phases}
    try:
        import torch

        if args.device == "cuda":
            report["gpu_names"] = [torch.cuda.get_device_name(k) for k in range(torch.cuda.device_count())]
        report["torch_version"] = torch.__version__
    except Exception:
        pass
    rows = None
    if {"scale", "kill"} & set(phases):
        rows = load_rows(args.kernelbench, args.source, args.level, args.limit, args.skip)
        print(f"{len(rows)} rows, {len(slots)} GPU slots ({args.device})", flush=True)
    if "scale" in phases:
        report["scale"] = phase_scale(rows, args.device, slots, args.trials, args.warmup,
                                      args.timeout_s, args.inductor)
    if "medians" in phases:
        report["medians"] = phase_medians(args.kernelbench, args.level, args.medians_skip,
                                          args.medians_limit, slots, args.trials, args.warmup,
                                          args.timeout_s, args.out, args.workers_per_gpu,
                                          args.budget_s, args.inductor)
    if "kill" in phases:
        report["kill"] = phase_kill(rows, args.device, slots, args.trials, args.warmup, args.timeout_s,
                                    args.kill_after, args.out)
    report["gpu_seconds"] = round(sum(report[p].get("gpu_seconds", 0) for p in phases if p in report), 1)
    (args.out / "multigpu.json").write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps({p: {k: v for k, v in report[p].items() if not isinstance(v, (dict, list))}
                      for p in phases if p in report}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
