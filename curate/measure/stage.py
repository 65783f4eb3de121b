"""The ``measure`` stage: time every problem variant and drop the ones unfit for RL.

Reads ``OUT/diversify`` (or ``source``), writes ``OUT/measure``. Every row is measured by
:func:`curate.measure.core.measure_problem` in an isolated process:

- on CUDA, by persistent workers (:mod:`curate.measure.worker`), one per visible GPU unless
  ``workers`` says otherwise (a row whose worker died is measured again on another GPU,
  once), or, with ``executor="ray"``, by one GPU actor per GPU of every node of a Ray
  cluster (:mod:`curate.measure.cluster`); Inductor is timed by default and a compile failure rejects
  the row (``compile_error``), since the Inductor baseline is part of a problem's metadata;
- on the CPU, by a :class:`curate.sandbox.Sandbox` child per row, one at a time by default
  (two timers on a 2-core machine disturb each other; the sandbox runs torch on one
  thread, so CPU timings are single-threaded); Inductor only with
  ``inductor=True``, and a compile failure there is recorded in ``compile_error`` without
  rejecting the row (a CPU run is a trial run; the CPU compiler toolchain is not the
  problem's fault).

Columns added (times in ms): ``eager_ms`` (median), ``eager_mean_ms``, ``eager_std_ms``,
``eager_p10_ms``, ``eager_p90_ms``, ``compile_ms`` (Inductor median, null when not run),
``compile_std_ms``, ``compile_s`` (first compiled call, s), ``inductor_speedup``
(``eager_ms / compile_ms``), ``compile_error``, ``gpu``, ``device``, ``torch_version``,
``peak_mem_mb`` (MiB above the process's baseline: CUDA allocator peak on the GPU, resident
set high-water mark on the CPU), ``trials`` (timed eager trials), ``measure_s``,
``eager_cv`` and ``compile_cv`` (coefficients of variation of the trials),
``eager_graph_ms``/``compile_graph_ms`` (CUDA-graph replay medians, for launch-bound
problems), ``library_share`` (share of one forward's GPU time in cuBLAS/cuDNN/CUTLASS-style
library kernels, from the profiler), ``kernels`` (GPU kernels one eager forward runs),
``gpu_busy_share`` (the profiled forward's kernel time over the eager median, at most 1: under
about 0.5 the row is host-bound, its time mostly Python and kernel launches, and such rows'
medians move most from run to run: a median 41% against 3.5% for rows over 0.8, two runs on
one H100, ``benchmarks/h100-measure-throughput.md``),
``constant_margin`` (how far the best constant answer is from passing the verifier's
correctness check on fresh draws of weights and inputs, as a ratio to its tolerance: at most
1 is rejected ``input_insensitive``; :func:`curate.checks.constant_answer`),
``compile_cache_hit`` (the measure worker's compile was an Inductor cache hit, thanks to
compile-ahead) and ``measure_notes`` (comma-separated labels that reject nothing:
``retimed``, ``suspicious_speedup``, ``graph_capture_failed``).

Before timing, each row runs as a KernelBench-style harness runs it, on the measure device
(:mod:`curate.conform`: plain ``exec``, two seeded builds, one output tensor); its reasons
(``exec_fails``, ``non_tensor_output``, ``seed_unstable``, ...) reject the row, and a pass
appends ``<torch version>@<device>`` to ``checked_torch``. On the CPU, a row timed at its mined
shape whose ``checked_torch`` already lists this torch on the CPU (``curate mine`` checked that
very program) is not checked again: for a whole model that is seconds a forward, four times. A
row of a precision variant
(``dtype`` other than float32, ``curate diversify --dtypes``) is checked and timed in that
precision: its model and floating-point inputs cast to it.

Reject reasons: see :mod:`curate.measure.core` (``cuda_error`` for an illegal address or a
device-side assert, ``memory`` past the worker's memory limit ...), plus ``timeout``/
``crash`` from the isolating process (a hang, a segfault) and ``bad_input_spec`` when
``input_spec``/``init_args`` are not JSON lists. On CUDA, compile-ahead workers
(:mod:`curate.measure.compile_ahead`) compile the next problems on the spare cores while the
measure worker times alone.
The stage resumes from ``OUT/measure/_journal.jsonl`` when restarted with equal settings.
"""

from __future__ import annotations

import json
import math
from typing import Any

import polars as pl

from curate.cpus import cpu_count
from curate.conform import checked_torch, passed_here
from curate.problem import mined_inputs, replace_inputs
from curate.measure.core import measure_problem
from curate.measure.variants import dynamic_dims_by_row
from curate.journal import Journal, content_key
from curate.harness.stage import StageRun, stage
from curate.table import Rejections, read_problems

FLOAT_COLUMNS = ("eager_ms", "eager_mean_ms", "eager_std_ms", "eager_p10_ms", "eager_p90_ms",
                 "compile_ms", "compile_std_ms", "compile_s", "inductor_speedup",
                 "peak_mem_mb", "measure_s", "eager_cv", "compile_cv", "eager_graph_ms",
                 "compile_graph_ms", "library_share", "gpu_busy_share", "constant_margin")
STRING_COLUMNS = ("compile_error", "gpu", "device", "torch_version", "measure_notes", "checked_torch")
INT_COLUMNS = ("trials", "kernels")


#: Seconds of timed trials per callable on CUDA by default. On an H100 with 14 shared
#: workers: KernelBench level-1 eager medians within 1.0% of a plain 100-trial loop (median
#: over 35 problems, 33 within 5%), and on 371 mined band rows eager and Inductor medians
#: equal to those at 0.1 s (median ratios 1.002 and 1.004) at 1.38x the rows an hour.
STAGE_CUDA_BUDGET_S = 0.05


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when available else ``cpu``.

    Raises:
        ValueError: an unknown device, or CUDA asked for but not available.
    """
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return device
    if device == "cuda" or device.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} requested but CUDA is not available")
        return device
    raise ValueError(f"unknown device {device!r}: use 'auto', 'cpu', 'cuda' or 'cuda:N'")


def result_columns(res: dict[str, Any]) -> dict[str, Any]:
    """The columns this stage adds, from a :func:`measure_problem` result."""
    eager, comp = res.get("eager") or {}, res.get("compile") or {}
    e_ms, c_ms = eager.get("median_ms"), comp.get("median_ms")
    prof = res.get("profile") or {}
    cache = res.get("compile_cache") or {}
    return {
        "eager_ms": e_ms, "eager_mean_ms": eager.get("mean_ms"), "eager_std_ms": eager.get("std_ms"),
        "eager_p10_ms": eager.get("p10_ms"), "eager_p90_ms": eager.get("p90_ms"),
        "compile_ms": c_ms, "compile_std_ms": comp.get("std_ms"),
        "compile_s": res.get("compile_s"),
        "inductor_speedup": (e_ms / c_ms) if e_ms and c_ms else None,
        "compile_error": (res.get("compile_error") or None) and res["compile_error"][:2000],
        "gpu": res.get("gpu"), "device": res.get("device"), "torch_version": res.get("torch_version"),
        "peak_mem_mb": res.get("peak_mem_mb"), "constant_margin": res.get("constant_margin"),
        "trials": int(eager["n"]) if eager.get("n") is not None else None,
        "measure_s": res.get("wall_s", sum((res.get("seconds") or {}).values())),
        "eager_cv": eager.get("cv"), "compile_cv": comp.get("cv"),
        "eager_graph_ms": (res.get("eager_graph") or {}).get("median_ms"),
        "compile_graph_ms": (res.get("compile_graph") or {}).get("median_ms"),
        "library_share": prof.get("library_share"), "kernels": prof.get("kernels"),
        "gpu_busy_share": _busy_share(prof.get("gpu_us"), e_ms),
        "compile_cache_hit": (cache.get("hit", 0) > 0) if cache else None,
        "measure_notes": ",".join(res.get("notes") or []) or None,
    }


def _busy_share(gpu_us: Any, eager_ms: Any) -> float | None:
    """Kernel time of one profiled forward (us) over the eager median (ms), capped at 1 (the
    timed trials flush L2, the profiled call does not); None without both."""
    if not isinstance(gpu_us, (int, float)) or not isinstance(eager_ms, (int, float)) or eager_ms <= 0:
        return None
    return min(1.0, max(0.0, gpu_us / 1e3 / eager_ms))


def _typed(rows: list[dict[str, Any]], like: pl.DataFrame) -> pl.DataFrame:
    if not rows:
        schema = dict(like.schema)
        schema.update({c: pl.Float64 for c in FLOAT_COLUMNS})
        schema.update({c: pl.String for c in STRING_COLUMNS})
        schema.update({c: pl.Int64 for c in INT_COLUMNS})
        schema["compile_cache_hit"] = pl.Boolean
        return pl.DataFrame(schema=schema)
    df = pl.DataFrame(rows, infer_schema_length=None)
    casts = [pl.col(c).cast(pl.Float64) for c in FLOAT_COLUMNS if c in df.columns]
    casts += [pl.col(c).cast(pl.String) for c in STRING_COLUMNS if c in df.columns]
    casts += [pl.col(c).cast(pl.Int64) for c in INT_COLUMNS if c in df.columns]
    casts += [pl.col("compile_cache_hit").cast(pl.Boolean)] if "compile_cache_hit" in df.columns else []
    return df.with_columns(casts)


@stage("measure")
def run(sr: StageRun, device: str, inductor: bool | None, min_ms: float, max_ms: float,
        trials: int, warmup: int, timeout_s: float, workers: int | None,
        budget_s: float | None, mem_mb: int, compile_workers: int | None,
        gpu_mem_fraction: float | None, cuda_graph: str, profile: bool | None,
        inductor_cache: str | None, band: bool, conform: bool, min_shapes: int, executor: str,
        ray_address: str | None, dynamic_shapes: bool, autotune_ms: float | None) -> dict[str, Any]:
    """Measure ``OUT/diversify`` (or ``source``) into ``OUT/measure``; return the stage stats.

    Options (:class:`curate.measure.options.MeasureOptions`):
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
        inductor: time TorchInductor too (default: on CUDA yes, on CPU no).
        min_ms, max_ms: eager median band (ms); outside it a row is ``too_fast``/``too_slow``.
        trials, warmup: timed trials and warm-ups per timed callable; trials are cut to fit
            ``budget_s`` seconds (default :data:`STAGE_CUDA_BUDGET_S` on CUDA, 1 s on the CPU), but never below 10
            on CUDA (3 on the CPU); a timing whose interquartile spread exceeds 0.1 of its
            median is repeated once (CUDA).
        timeout_s: wall-clock seconds per row (all checks, timings and the compile).
        workers: CUDA: measure workers in all (default one per GPU), GPUs taken in turn.
            Several on one GPU share it through its lock: each builds, checks and compiles
            its own problem while another times, only timed trials hold the GPU alone, and
            each may allocate 0.85 / (workers on its GPU) of the GPU's memory (past it a row
            is ``memory``); compile-ahead is then off. CPU: concurrent sandboxed measurements
            (default 1, for timing fidelity).
        mem_mb: address-space budget of a CPU measurement process (MiB).
        compile_workers: CUDA: compile-ahead workers per GPU (default: none when several
            measure workers share a GPU, which compile their own problems; else the spare
            cores, at most 8; 0 turns compile-ahead off).
        gpu_mem_fraction: CUDA: share of the GPU's memory the measure worker may allocate
            (default 0.5 beside compile-ahead workers, else 0.9); past it a row is ``memory``.
        cuda_graph: CUDA: ``auto`` also times CUDA-graph replays of launch-bound problems
            (eager median under 0.1 ms), ``on`` of every problem, ``off`` of none.
        profile: CUDA: profile one forward for ``library_share`` (default on).
        inductor_cache: folder for Inductor's and Triton's caches (default torch's own).
        band: on a GPU, hold each row to the band diversify aimed it at (``band_lo_ms``,
            ``band_hi_ms`` for ``target_gpu``): a row measured on that GPU kind outside it is
            rejected ``out_of_band``. On the CPU, rows whose shapes were only estimated for a
            GPU (``shape_source = "estimated"``) are checked and timed at their mined inputs
            (``mined_input_spec``; note ``timed_at_mined_shape``): a CPU cannot run a GPU's
            sizes in minutes. The shape variants of one base problem are then one program at
            one shape: it is measured once and every variant row gets that result
            (``rows_sharing_a_measurement`` in ``stats.json``).
        min_shapes: a base problem whose shapes diversify aimed at a band (``shape_role``)
            keeps its rows only while its primary row and at least this many rows (or all it
            was given, if fewer) are kept; the rest are rejected ``too_few_shapes``. Each
            precision variant (``dtype``) is held so on its own.
        conform: run each problem as a KernelBench-style harness does first, on the measure
            device (:mod:`curate.conform`); a failure rejects the row with its reason, a pass
            appends ``<torch version>@<device>`` to ``checked_torch``.
        executor: ``local`` (this host: one measure worker per GPU) or ``ray`` (one GPU actor
            per GPU of every node of a Ray cluster, :mod:`curate.measure.cluster`; on the
            CPU device too, one actor per GPU resource, else one). Either way a row whose
            worker died is measured again on another GPU, once.
        ray_address: the Ray cluster to join (``auto``, ``ray://head:10001``); None starts a
            local Ray instance for the run (``executor="ray"`` only).
        dynamic_shapes: CUDA: TorchInductor compiles a row of a base problem with the input
            dimensions its shape variants differ in marked dynamic
            (:func:`curate.measure.variants.dynamic_dims_by_row`,
            :func:`curate.measure.core.mark_dynamic`), so the variants share one graph through
            Inductor's FX-graph cache instead of each compiling its own;
            ``compile_dynamic`` says per row whether the timed graph had symbolic sizes. Rows
            are measured primaries first, so the variants find their graph compiled.
        autotune_ms: CUDA, with Inductor: cap on the benchmark of each configuration when
            TorchInductor autotunes a kernel (:mod:`curate.measure.autotune`); None or 0:
            Inductor's own.
    Raises:
        ValueError: bad ``device`` (see :func:`resolve_device`), ``executor`` or
            ``autotune_ms`` (negative); a CUDA run
            on a Ray cluster without GPUs.
        RuntimeError: ``executor="ray"`` without the ray package.
        FileNotFoundError: no input table.
    """
    dev = resolve_device(device)
    cuda = dev.startswith("cuda")
    inductor = cuda if inductor is None else bool(inductor)
    if budget_s is None and cuda:
        budget_s = STAGE_CUDA_BUDGET_S
    df = read_problems(sr.input)
    rows = df.to_dicts()
    rejects = Rejections("measure")

    if executor not in ("local", "ray"):
        raise ValueError(f"executor must be 'local' or 'ray', got {executor!r}")
    if cuda_graph not in ("auto", "on", "off"):
        raise ValueError(f"cuda_graph must be 'auto', 'on' or 'off', got {cuda_graph!r}")
    if gpu_mem_fraction is not None and not 0.0 < gpu_mem_fraction <= 1.0:
        raise ValueError(f"gpu_mem_fraction must be in (0, 1], got {gpu_mem_fraction}")
    settings = {"device": dev, "inductor": inductor, "min_ms": min_ms, "max_ms": max_ms,
                "trials": trials, "warmup": warmup, "budget_s": budget_s, "timeout_s": timeout_s,
                "cuda_graph": cuda_graph, "profile": profile, "gpu_mem_fraction": gpu_mem_fraction,
                "conform": conform, "dynamic_shapes": dynamic_shapes,
                # the constant-answer test's version: a journal of the former 1e-2 test's
                # verdicts (input_insensitive, no constant_margin) is not resumed
                "constant_test": 2}
    if autotune_ms is not None and autotune_ms < 0:
        raise ValueError(f"autotune_ms must be positive, or 0 for Inductor's own, got {autotune_ms}")
    # where it applies (CUDA with Inductor; 0: Inductor's own benchmarks)
    autotune_cap = (autotune_ms or None) if cuda and inductor else None
    if autotune_cap is not None:
        # a setting only then: CPU journals, and those written before the option, stay valid
        settings["autotune_ms"] = autotune_cap
    journal = sr.journal(settings)
    jobs: list[tuple[int, str, dict[str, Any]]] = []  # row index, journal key, task
    dynamic = dynamic_dims_by_row(rows) if dynamic_shapes and cuda and inductor else {}
    tagged: dict[int, list[str]] = {}  # row index -> notes the stage adds
    results: dict[int, dict[str, Any]] = {}
    leaders: dict[str, int] = {}  # measurement key -> the row measured for it
    followers: dict[str, list[int]] = {}  # measurement key -> rows that share its result
    for i, row in enumerate(rows):
        try:
            spec = json.loads(row["input_spec"]) if row.get("input_spec") else None
            init = json.loads(row["init_args"]) if row.get("init_args") else None
            if spec is not None and not isinstance(spec, list):
                raise ValueError("input_spec is not a JSON list")
            if init is not None and not isinstance(init, list):
                raise ValueError("init_args is not a JSON list")
        except (ValueError, TypeError) as exc:
            results[i] = {"reason": "bad_input_spec", "detail": f"input_spec/init_args: {exc}"}
            continue
        code = row.get("code") or ""
        small = None if cuda else mined_inputs(row)
        if small is not None:
            spec, init = small
            tagged[i] = ["timed_at_mined_shape"]
            try:  # the conformance check runs the code's own get_inputs(): at the mined size too
                code = replace_inputs(code, spec, init)
            except ValueError:
                pass
        dtype_key = [row["dtype"]] if row.get("dtype") not in (None, "float32") else []
        if small is not None:
            # the shape variants of one base problem, all at its mined shape: one measurement
            key = content_key("at_mined_shape", code, spec, init, *dtype_key)
            if key in leaders:
                followers.setdefault(key, []).append(i)
                continue
            leaders[key] = i
        else:
            key = content_key(row.get("problem_id"), code, spec, init, *dtype_key)
        if key in journal:
            results[i] = journal.get(key)
            continue
        checked_here = small is not None and row.get("dtype") in (None, "float32") and \
            passed_here(row.get("checked_torch"))
        task = dict(code=code, input_spec=spec, init_args=init,
                    device="cuda" if cuda else "cpu", inductor=inductor, trials=trials,
                    warmup=warmup, min_ms=min_ms, max_ms=max_ms, budget_s=budget_s,
                    cuda_graph=cuda_graph, profile=profile, name=str(row.get("problem_id") or i),
                    conform=conform and not checked_here, autotune_ms=autotune_cap)
        if row.get("dtype") not in (None, "float32"):  # a precision variant (diversify --dtypes)
            task["dtype"] = row["dtype"]
        if i in dynamic:
            task["dynamic_dims"] = dynamic[i]
        jobs.append((i, key, task))
    # primaries first: a variant measured later finds its base problem's graph in the cache
    jobs.sort(key=lambda job: rows[job[0]].get("shape_role") not in (None, "primary"))

    extra: dict[str, Any] = {"device": dev, "inductor": inductor, "band_ms": [min_ms, max_ms],
                             "trials": trials, "warmup": warmup}
    extra["executor"] = executor
    if jobs:
        pool_opts = {"compile_workers": compile_workers, "gpu_mem_fraction": gpu_mem_fraction,
                     "inductor_cache": inductor_cache, "warm_inductor": inductor}
        if executor == "ray":
            _measure_ray(sr, jobs, dev, workers, timeout_s, journal, results, extra, pool_opts, ray_address)
        elif cuda:
            envs, pool_device = _gpu_workers(dev, workers)
            _measure_gpu(sr, jobs, envs, pool_device, timeout_s, journal, results, extra, pool_opts)
        else:
            _measure_cpu(sr, jobs, workers, timeout_s, mem_mb, journal, results)
    for key, rows_sharing in followers.items():
        for i in rows_sharing:
            results[i] = results[leaders[key]]
    if followers:
        extra["rows_sharing_a_measurement"] = sum(map(len, followers.values()))

    kept: list[dict[str, Any]] = []
    for i, row in enumerate(rows):
        res = results[i]
        if i in tagged:
            res = {**res, "notes": list(res.get("notes") or []) + tagged[i]}
        if band and cuda and not res.get("reason"):
            res = _hold_to_band(row, res)
        if res.get("reason"):
            cols = result_columns(res) if "eager" in res else {}
            rejects.add({**row, **cols}, res["reason"], res.get("detail", ""))
        else:
            conf = [res["conformance"]] if res.get("conformance") else []
            kept.append({**row, **result_columns(res),
                         "checked_torch": checked_torch(conf, row.get("checked_torch")) or None})
    kept = _hold_to_shapes(kept, rows, rejects, min_shapes)
    kept_df = _typed(kept, df)
    rej_df = rejects.frame(kept_df)
    if rej_df.height:
        rej_df = rej_df.with_columns([pl.col(c).cast(pl.Float64) for c in FLOAT_COLUMNS
                                      if c in rej_df.columns])
    if kept:
        extra.update(runtime_distribution(kept_df))
        speedups = kept_df["inductor_speedup"].drop_nulls()
        if speedups.len():
            extra["inductor_speedup_geomean"] = math.exp(speedups.log().mean())
    return sr.write(kept_df, rej_df, len(rows), extra)


def _hold_to_shapes(kept: list[dict[str, Any]], rows: list[dict[str, Any]], rejects: Rejections,
                    min_shapes: int) -> list[dict[str, Any]]:
    """``kept`` without the rows of base problems left with no primary shape or fewer than
    ``min_shapes`` shapes (those rows go to ``rejects`` as ``too_few_shapes``)."""
    given: dict[tuple, int] = {}
    for r in rows:
        if r.get("shape_role") and r.get("base_problem_id"):
            given[_group(r)] = given.get(_group(r), 0) + 1
    if not given:
        return kept
    have: dict[tuple, list[dict[str, Any]]] = {}
    for r in kept:
        if _group(r) in given and r.get("shape_role"):
            have.setdefault(_group(r), []).append(r)
    out = []
    for r in kept:
        base = _group(r)
        if base not in given or not r.get("shape_role"):
            out.append(r)
            continue
        mine = have.get(base, [])
        need = min(min_shapes, given[base])
        if len(mine) >= need and any(x.get("shape_role") == "primary" for x in mine):
            out.append(r)
        else:
            rejects.add(r, "too_few_shapes", f"{len(mine)} of the base problem's {given[base]} shapes kept "
                        f"({need} and the primary needed)")
    return out


def _group(row: dict[str, Any]) -> tuple:
    """The shapes held together: a base problem's rows in one precision (each precision
    variant stands or falls on its own)."""
    return row.get("base_problem_id"), row.get("dtype") or "float32"


def _hold_to_band(row: dict[str, Any], res: dict[str, Any]) -> dict[str, Any]:
    """``res`` rejected ``out_of_band`` when measured on the row's target GPU kind outside
    the row's band; a row measured on another GPU kind keeps a ``band_other_gpu`` note."""
    lo, hi, target = row.get("band_lo_ms"), row.get("band_hi_ms"), row.get("target_gpu")
    e_ms = (res.get("eager") or {}).get("median_ms")
    if lo is None or hi is None or e_ms is None:
        return res
    gpu = (res.get("gpu") or "").lower().replace(" ", "")
    if target and target.lower() not in gpu:
        return {**res, "notes": list(res.get("notes") or []) + ["band_other_gpu"]}
    if lo <= e_ms <= hi:
        return res
    return {**res, "reason": "out_of_band",
            "detail": f"eager {e_ms:.4g} ms outside {lo}-{hi} ms on {res.get('gpu')}"}


def runtime_distribution(kept: pl.DataFrame) -> dict[str, Any]:
    """Eager-time figures for ``stats.json``: quantiles (ms), the share of rows inside
    their band, and the same per GPU (or device)."""
    def figures(df: pl.DataFrame) -> dict[str, Any]:
        e = df["eager_ms"].drop_nulls()
        out: dict[str, Any] = {"rows": df.height, "timed": e.len()}
        if e.len():
            out["eager_ms_quantiles"] = {str(q): e.quantile(q) for q in (0.1, 0.25, 0.5, 0.75, 0.9)}
        if {"band_lo_ms", "band_hi_ms"} <= set(df.columns) and e.len():
            inside = df.filter(pl.col("eager_ms").is_not_null() & pl.col("band_lo_ms").is_not_null())
            if inside.height:
                ok = inside.filter((pl.col("eager_ms") >= pl.col("band_lo_ms"))
                                   & (pl.col("eager_ms") <= pl.col("band_hi_ms"))).height
                out["share_in_band"] = ok / inside.height
        return out

    res = figures(kept)
    key = "gpu" if "gpu" in kept.columns else None
    if key:
        res["per_gpu"] = {str(g or "cpu"): figures(part) for (g,), part in kept.group_by(key)}
    return res


def _record(journal: Journal, results: dict, i: int, key: str, res: dict[str, Any]) -> None:
    results[i] = res
    journal.add(key, res)


def _measure_cpu(sr: StageRun, jobs, workers, timeout_s, mem_mb, journal, results) -> None:
    # one timing at a time by default: two timers on a small machine disturb each other
    calls = [((), task) for _, _, task in jobs]
    stream = sr.sandboxed(measure_problem, calls, timeout_s=timeout_s, mem_mb=mem_mb, workers=workers or 1)
    for j, outcome in sr.progress(stream, len(calls)):
        i, key, _ = jobs[j]
        if outcome.ok:
            res = outcome.value
            res["wall_s"] = outcome.seconds
        else:
            reason = outcome.status if outcome.status in ("timeout", "memory", "crash") else "crash"
            res = {"reason": reason, "detail": outcome.error}
        _record(journal, results, i, key, res)


def _gpu_workers(dev: str, workers: int | None) -> tuple[list[dict[str, str]], str]:
    """The measure workers' environments (one ``CUDA_VISIBLE_DEVICES`` each, GPUs taken in
    turn) and device: ``workers`` in all, one per GPU by default."""
    from curate.measure.worker import gpu_slots

    gpus = [gpu_slots(None)[int(dev.split(":")[1])]] if ":" in dev else gpu_slots(None)
    n = workers or len(gpus) * default_workers_per_gpu(len(gpus))
    return [gpus[k % len(gpus)] for k in range(n)], "cuda"


def default_workers_per_gpu(gpus: int, cores: int | None = None) -> int:
    """Measure workers per GPU by default: on a host with at least 8 cores per GPU, all of a
    GPU's cores but two (kept for the timed trials, :mod:`curate.measure.gpu_lock`), each
    worker compiling its own rows; else one. On an H100 host with 16 cores this measured
    7,848 rows an hour against 2,527 with one timing worker and compile-ahead, eager and
    Inductor medians unchanged (median ratio 1.000 and 0.998 over 255 rows)."""
    per = (cores or cpu_count()) // max(1, gpus)
    return per - 2 if per >= 8 else 1


def _measure_gpu(sr: StageRun, jobs, envs, device, timeout_s, journal, results, extra, pool_opts) -> None:
    from curate.measure.worker import WorkerPool

    pool = WorkerPool(envs, device=device, timeout_s=timeout_s, **pool_opts)
    try:
        if pool.shares_gpus and jobs:
            pool.start_workers(keep_alive=True)  # all at once, and up for the second pass
        tasks = [{**task, "device": device} for _, _, task in jobs]
        for j, res in sr.progress(pool.map_memory_alone(tasks), len(tasks)):
            i, key, _ = jobs[j]
            _record(journal, results, i, key, res)
    finally:
        pool.close()
    extra["memory_retried_alone"] = pool.memory_retried
    extra["workers"] = len(envs)
    extra["gpus"] = sorted({r["gpu"] for r in results.values() if r.get("gpu")})
    extra["rows_per_worker"] = list(pool.per_worker)
    extra["retried_after_worker_death"] = pool.retried
    extra["worker_start_seconds"] = [round(s, 2) for s in pool.start_seconds]
    extra["compile_workers"] = sum(len(c) for c in pool.compilers)
    extra["compile_ahead"] = dict(pool.compile_ahead)
    extra["compile_cache_hits"] = sum(1 for r in results.values()
                                      if (r.get("compile_cache") or {}).get("hit"))


def _measure_ray(sr: StageRun, jobs, dev, workers, timeout_s, journal, results, extra, pool_opts,
                 ray_address) -> None:
    from curate.executor import RayExecutor
    from curate.measure.cluster import measure_on_ray

    device = "cuda" if dev.startswith("cuda") else "cpu"
    if not device.startswith("cuda"):
        pool_opts = {**pool_opts, "compile_workers": 0}
    info: dict[str, Any] = {}
    with RayExecutor(address=ray_address):  # joins a running instance, else starts (and ends) one
        tasks = [{**task, "device": device} for _, _, task in jobs]
        for j, res in sr.progress(measure_on_ray(tasks, device, timeout_s, pool_opts, actors=workers,
                                                 stats=info), len(tasks)):
            i, key, _ = jobs[j]
            _record(journal, results, i, key, res)
    extra["ray_nodes"] = len({a.get("node") for a in info.get("actors", []) if a.get("node")})
    extra["workers"] = len(info.get("actors", []))
    extra["actors"] = info.get("actors", [])
    extra["retried_after_worker_death"] = info.get("retried", 0)
    extra["actors_lost"] = info.get("actors_lost", 0)
    extra["gpus"] = sorted({r["gpu"] for r in results.values() if r.get("gpu")})
