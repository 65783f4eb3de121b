"""The ``diversify`` stage proper (polars side): shapes aimed at a runtime band on a GPU.

Reads ``OUT/dedup`` (or ``source``), writes ``OUT/diversify``. Each problem is planned by
:func:`curate.diversify.plan.plan_task` in a sandboxed process on the CPU (the mined inputs
run for real; larger shapes are priced on the ``meta`` device against a roofline of the
target GPU); on a GPU (``device="cuda"``) the planned shapes are then timed and moved into
the band by :func:`curate.diversify.calibrate.calibrate_problem` in a persistent GPU worker.
Without a GPU the estimates alone set the shapes (``shape_source = "estimated"``);
``curate measure`` on the GPU confirms them or rejects them (``out_of_band``).

Output rows, one per in-band shape (the primary is variant 0):

==================  ==============================================================
variant             int, 0 for the primary shape
base_problem_id     str, the input row's ``problem_id``
problem_id          str, the base id for variant 0, ``<base>~v<n>`` otherwise
input_spec          str, JSON input spec of this shape
init_args           str, JSON constructor arguments (a ``width`` shape grows them)
code                str, the problem with ``get_inputs()`` / ``get_init_inputs()`` for it
shape_role          str, ``primary`` or ``spread``
shape_family        str, the axes grown: ``batch``, ``mixed``, ``space``, ``width``, ``mined``
shape_source        str, ``estimated`` (roofline only), ``calibrated`` (timed on a GPU by
                    this stage) or ``mined`` (code without curate's inputs marker: as mined)
target_gpu          str, the GPU the band is for (``h100``)
band_lo_ms          float, band_hi_ms: the eager band (ms) ``measure`` holds the row to
est_ms              float, roofline estimate of the eager forward on ``target_gpu`` (ms)
calib_ms            float, eager median timed by this stage on the GPU (ms; null on a CPU)
est_flops           int, FLOPs of one forward (torch's flop counter; 0 when none counted)
est_bytes           int, input + output bytes of one forward
est_peak_mb         float, MiB the forward needs: parameters, inputs, peak activations
                    (the CUDA allocator's peak when calibrated)
mined_input_spec    str, JSON: the mined inputs (small; a CPU runs checks at this size)
mined_init_args     str, JSON: the mined constructor arguments
mined_calib_ms      float, the mined shape's eager median timed by this stage (ms; GPU only)
shape_variants      str, JSON list of ``{"input_spec", "init_args", "heldout"}``: every
                    in-band shape of the base problem and the held-out verification shape
                    (odd, not power-of-two sizes), which no row's prompt shows
dtype               str, the precision the row runs in (``float32``, ``bfloat16``,
                    ``float16``): its model and floating inputs are cast to it; rows of
                    other precisions than float32 have ids ``<base>~bf16``, ``<base>~bf16~v1``
input_repairs       str, comma-separated repairs of the mined inputs a constant answer would
                    otherwise pass on (``singletons``, ``targets``, ``draw_scale``,
                    :mod:`curate.sensitivity`); null when none
==================  ==============================================================

Each problem is planned in every precision of ``dtypes`` (default float32 on the CPU,
float32 and bfloat16 on a GPU): a variant that cannot run in one (the reference fails, or
returns another dtype) is a rejected row of that variant, with the conformance reason.
The planner also judges whether the problem's output depends on its inputs by the verifier's
own test, at the mined shape and, predicted, at the planned ones
(:mod:`curate.diversify.judge`), and repairs the inputs where that makes it so.

Reject reasons: ``original_fails`` (the mined inputs do not run), the reasons of
:mod:`curate.conform` (a KernelBench-style harness cannot run the mined problem, in the
variant's precision), ``input_insensitive`` (a constant answer passes the verifier's check,
whatever repair), ``launch_bound`` (no
shape within the size and memory limits reaches the band: the detail gives the best time),
``over_memory`` (the memory budget is reached below the band), ``no_estimate`` (the
forward could not be priced at any other size), ``no_heldout_shape``, ``too_few_shapes``
(fewer in-band shapes than ``variants``), and on a GPU ``calibrate_failed`` (the problem
crashed or hung there) and ``out_of_band`` (timed outside the band after correction).
Accountability: ``in`` = problems read x precisions = kept variants + rejected; ``rows_out``
counts rows.
The stage resumes from ``OUT/diversify/_journal.jsonl`` when restarted with equal settings.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import polars as pl

from curate.diversify.calibrate_pool import calibrate_many, default_calibrate_workers
from curate.conform import passed_here
from curate.cost import gpu_profile
from curate.diversify.plan import plan_task
from curate.journal import content_key
from curate.problem import (DTYPE_SHORT, INPUTS_MARKER, RUN_DTYPES, dumps, mined_inputs, replace_inputs,
                            spec_in_dtype)
from curate.harness.stage import StageRun, stage
from curate.table import Rejections, read_problems

#: Share of ``timeout_s`` after which planning starts no further estimate.
DEADLINE_SHARE = 0.7
NEW_COLUMNS = {"variant": pl.Int64, "base_problem_id": pl.String, "shape_role": pl.String,
               "shape_family": pl.String, "shape_source": pl.String, "target_gpu": pl.String,
               "band_lo_ms": pl.Float64, "band_hi_ms": pl.Float64, "est_ms": pl.Float64,
               "calib_ms": pl.Float64, "est_flops": pl.Int64, "est_bytes": pl.Int64,
               "est_peak_mb": pl.Float64, "mined_input_spec": pl.String, "mined_init_args": pl.String,
               "mined_calib_ms": pl.Float64,
               "shape_variants": pl.String, "dtype": pl.String, "input_repairs": pl.String}


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when available, else ``cpu``.

    Raises:
        ValueError: an unknown device, or CUDA asked for and absent.
    """
    if device not in ("auto", "cpu") and not device.startswith("cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    if device == "cpu":
        return device
    import torch

    if torch.cuda.is_available():
        return "cuda" if device == "auto" else device
    if device == "auto":
        return "cpu"
    raise ValueError(f"device {device!r} requested but CUDA is not available")


#: The precisions problems are made in by default: float32 on the CPU (which times nothing at
#: a GPU's sizes), float32 and bfloat16 on a GPU (training precision; KernelBench evaluates
#: its problems in fp16 and bf16 too).
CPU_DTYPES, GPU_DTYPES = "float32", "float32,bfloat16"


def resolve_dtypes(dtypes: str | list[str] | None, device: str) -> list[str]:
    """The precisions to make variants in, as torch names, float32 first when asked for.

    Args:
        dtypes: comma-separated names (``fp32,bf16``), a list of them, or None: ``float32``
            on the CPU, ``float32`` and ``bfloat16`` on a GPU.
        device: the resolved device (``cpu``, ``cuda[:n]``).
    Raises:
        ValueError: an unknown name, or none given.
    """
    from curate.verify.verifier import dtype_name

    if dtypes is None:
        dtypes = GPU_DTYPES if device.startswith("cuda") else CPU_DTYPES
    items = dtypes.split(",") if isinstance(dtypes, str) else list(dtypes)
    names = [dtype_name(x.strip()) for x in items if str(x).strip()]
    if not names:
        raise ValueError(f"dtypes must name at least one of {', '.join(RUN_DTYPES)}, got {dtypes!r}")
    return sorted(set(names), key=RUN_DTYPES.index)


def variant_id(base: str, dtype: str, n: int) -> str:
    """The ``problem_id`` of shape ``n`` of a base problem's ``dtype`` variant: the float32
    ones keep the ids they always had (``base``, ``base~v1``), the others carry the
    precision's short name (``base~bf16``, ``base~bf16~v1``)."""
    stem = base if dtype == "float32" else f"{base}~{DTYPE_SHORT[dtype]}"
    return stem if n == 0 else f"{stem}~v{n}"


@stage("diversify")
def run(sr: StageRun, variants: int, band_ms: tuple[float, float], target_gpu: str,
        mem_budget_mb: int, device: str, workers: int | None, calibrate_workers: int | None,
        dtypes: str | None, timeout_s: float, mem_mb: int | None, executor: str,
        ray_address: str | None) -> dict[str, Any]:
    """Plan (and on a GPU, calibrate) in-band shapes for ``OUT/dedup`` into ``OUT/diversify``.

    Options (:class:`curate.diversify.options.DiversifyOptions`):
        variants: in-band shapes wanted per problem (the primary and ``variants - 1`` more,
            spread across the band); a held-out odd-size shape comes on top.
        band_ms: ``(lo, hi)``: the eager median wanted on ``target_gpu`` (ms).
        target_gpu: the GPU the band is for (``h100``, ``h200``, ``a100``).
        mem_budget_mb: most MiB one forward may need (parameters, inputs, outputs and peak
            activations).
        device: ``cpu`` (estimates only), ``cuda`` (estimates, then timed on the GPU) or
            ``auto``.
        workers: concurrent planning processes (default: CPU count).
        calibrate_workers: GPU calibration processes (default
            :func:`curate.diversify.calibrate_pool.default_calibrate_workers`); several share
            the GPU through a lock and time each probe alone.
        dtypes: the precisions to make a variant in (:func:`resolve_dtypes`): each problem
            is planned, conformance-checked and calibrated in each, its model and floating
            inputs cast to it; a variant that cannot run in one is a rejected row of that
            variant, with the reason.
        timeout_s: wall-clock seconds to plan one problem (and to calibrate it on a GPU).
        mem_mb: address-space budget of a planning process (MiB); default 8192.
        executor: ``local`` (sandboxed processes here) or ``ray`` (a sandboxed Ray task per
            problem, :mod:`curate.executor`); calibration on a GPU runs on this host.
        ray_address: the Ray cluster to join (``executor="ray"``; None starts a local one).
    Returns:
        The stage stats (:func:`curate.table.write_stage`: ``in`` counts a problem once per
        precision, ``kept`` the variants kept) with ``rows_out``, ``band_ms``,
        ``target_gpu``, ``device``, ``dtypes``, ``problems_in``, ``kept_by_dtype``,
        ``input_repairs``, ``families``, ``shapes_histogram`` and ``before_est_ms``.
    Raises:
        FileNotFoundError: no input table. ValueError: a bad band, variant count or GPU.
    """
    lo, hi = float(band_ms[0]), float(band_ms[1])
    if not 0 < lo < hi:
        raise ValueError(f"band_ms must be 0 < LO < HI, got {band_ms}")
    if variants < 1:
        raise ValueError("variants must be >= 1")
    gpu_profile(target_gpu)
    dev = resolve_device(device)
    names = resolve_dtypes(dtypes, dev)
    df = read_problems(sr.input)
    rows = df.to_dicts()
    rejects = Rejections("diversify")
    budget = int(mem_budget_mb * 2**20)
    settings = {"variants": variants, "band": [lo, hi], "gpu": target_gpu, "mem_budget_mb": mem_budget_mb,
                "timeout_s": timeout_s, "device": dev.split(":")[0], "plan": 3, "dtypes": names}
    journal = sr.journal(settings)

    # a work item is one problem in one precision: (row index, dtype)
    parsed: dict[int, tuple[list, list]] = {}
    plans: dict[tuple[int, str], dict[str, Any]] = {}
    jobs: list[tuple[tuple[int, str], str, tuple, dict]] = []
    for i, row in enumerate(rows):
        try:
            spec = json.loads(row["input_spec"])
            init = json.loads(row["init_args"]) if row.get("init_args") else []
            if not isinstance(spec, list) or not isinstance(init, list):
                raise ValueError("input_spec and init_args must be JSON lists")
            # a KernelBench-format file's own sizes can take gigabytes: planning runs the
            # problem for real on the CPU, so it starts from the file's CPU shape
            small = mined_inputs(row) if row.get("shape_source") == "source" else None
            if small is not None:
                spec, init = small
                row = rows[i] = {**row, "code": replace_inputs(row["code"], spec, init)}
        except (TypeError, ValueError, KeyError) as exc:
            for d in names:
                rejects.add(_variant_of(row, d), "bad_input_spec", str(exc))
            continue
        parsed[i] = (spec, init)
        ours = INPUTS_MARKER in (row.get("code") or "")
        for d in names:
            run_dtype = None if d == "float32" else d
            spec_d = spec_in_dtype(spec, run_dtype)
            key = content_key("plan", row.get("problem_id"), row.get("code"), spec_d, init, run_dtype)
            if key in journal:
                plans[i, d] = journal.get(key)
                continue
            args = (row.get("code") or "", init, spec_d, (lo, hi), target_gpu, budget, variants,
                    timeout_s * DEADLINE_SHARE)
            # curate mine ran this very program as a KernelBench-style harness does, with this torch
            conformed = run_dtype is None and small is None and passed_here(row.get("checked_torch"))
            jobs.append(((i, d), key, args, {"dtype": run_dtype, "repair_inputs": ours,
                                             "conformed": conformed}))

    stream = sr.sandboxed(plan_task, [(a, kw) for _, _, a, kw in jobs], timeout_s=timeout_s,
                          mem_mb=mem_mb or 8192)
    for j, outcome in sr.progress(stream, len(jobs), "plan"):
        item, key, _, _ = jobs[j]
        res = outcome.value if outcome.ok else {"ok": False, "detail": f"{outcome.status}: {outcome.error}"}
        plans[item] = res
        journal.add(key, res)

    calib: dict[tuple[int, str], dict[str, Any]] = {}
    if dev.startswith("cuda"):
        calib = _calibrate(sr, rows, parsed, plans, dev, (lo, hi), mem_budget_mb, timeout_s, journal,
                           calibrate_workers or default_calibrate_workers())
    mined_ms = sorted(c["mined"]["ms"] for (_, d), c in calib.items()
                      if d == names[0] and (c.get("mined") or {}).get("ms") is not None)

    kept: list[dict[str, Any]] = []
    hist: Counter = Counter()
    fams: Counter = Counter()
    by_dtype: Counter = Counter()
    repairs: Counter = Counter()
    before: list[float] = []
    kept_in = 0
    for i, row in enumerate(rows):
        if i not in parsed:
            continue
        for d in names:
            plan = plans[i, d]
            if not plan.get("ok"):
                rejects.add(_variant_of(row, d), plan.get("reason") or "original_fails", plan.get("detail", ""))
                continue
            if d == names[0] and plan.get("original", {}).get("est_ms") is not None:
                before.append(plan["original"]["est_ms"])
            spec, init = parsed[i]
            spec = plan.get("input_spec") or spec_in_dtype(spec, None if d == "float32" else d)
            if INPUTS_MARKER not in (row.get("code") or ""):
                if plan.get("reject") and plan["reject"][0] == "input_insensitive":
                    rejects.add(_variant_of(row, d), *plan["reject"])
                    continue
                kept.append(_mined_row(row, spec, init, plan, (lo, hi), target_gpu, d))
                kept_in += 1
                by_dtype[d] += 1
                continue
            shapes, reason = _final_shapes(plan, calib.get((i, d)), variants, (lo, hi))
            if reason:
                rejects.add(_variant_of(row, d), reason[0], reason[1])
                continue
            new = _rows(row, spec, init, shapes, (lo, hi), target_gpu, calib.get((i, d)), d,
                        plan.get("input_repairs") or [])
            kept.extend(new)
            kept_in += 1
            by_dtype[d] += 1
            repairs.update(plan.get("input_repairs") or [])
            if d == names[0]:
                hist[len(new)] += 1
                fams[new[0]["shape_family"]] += 1

    kept_df = _frame(kept, df)
    rej_df = rejects.frame(df)
    if "dtype" in rej_df.columns:
        rej_df = rej_df.with_columns(pl.col("dtype").cast(pl.String))
    before.sort()
    return sr.write(kept_df, rej_df, len(rows) * len(names), kept_in=kept_in,
                    extra={"variants_requested": variants, "band_ms": [lo, hi], "target_gpu": target_gpu,
                           "device": dev, "mem_budget_mb": mem_budget_mb, "dtypes": names,
                           "problems_in": len(rows), "kept_by_dtype": dict(by_dtype),
                           "input_repairs": dict(repairs.most_common()),
                           "shapes_histogram": {str(k): v for k, v in sorted(hist.items())},
                           "primary_families": dict(fams.most_common()),
                           "before_est_ms": _quantiles(before), "before_calib_ms": _quantiles(mined_ms),
                           "gpu": next((c.get("gpu") for c in calib.values() if c.get("gpu")), None)})


def _variant_of(row: dict[str, Any], dtype: str) -> dict[str, Any]:
    """A row standing for ``row``'s ``dtype`` variant (for its rejection): its id, base id
    and precision."""
    base = row.get("problem_id") or ""
    return {**row, "problem_id": variant_id(base, dtype, 0), "base_problem_id": base, "dtype": dtype}


def _calibrate(sr: StageRun, rows, parsed, plans, dev, band, mem_budget_mb, timeout_s,
               journal, workers: int = 1) -> dict[tuple[int, str], dict]:
    """Time each planned problem variant's shapes on the GPU, in its precision (``workers``
    persistent workers sharing it, :mod:`curate.diversify.calibrate_pool`; a crash or hang
    ends that variant only)."""
    todo, out = [], {}
    for (i, d), plan in plans.items():
        if not plan.get("ok"):
            continue  # a rejected plan is still timed at its mined shape (the "before")
        if INPUTS_MARKER not in (rows[i].get("code") or ""):
            continue
        run_dtype = None if d == "float32" else d
        spec = plan.get("input_spec") or spec_in_dtype(parsed[i][0], run_dtype)
        init = parsed[i][1]
        key = content_key("calibrate", rows[i].get("problem_id"), rows[i].get("code"), plan.get("shapes"),
                          run_dtype)
        if key in journal:
            out[i, d] = journal.get(key)
            continue
        todo.append(((i, d), key, {"code": rows[i]["code"], "init_args": init, "input_spec": spec,
                                   "shapes": [] if plan.get("reject") else plan.get("shapes") or [],
                                   "band": list(band), "mem_budget_mb": mem_budget_mb,
                                   "deadline_s": timeout_s * DEADLINE_SHARE, "trials": 5, "warmup": 1,
                                   "max_probes": 3, "dtype": run_dtype}))
    if not todo:
        return out
    results = calibrate_many(todo, dev, timeout_s, workers)
    for i, key, res in sr.progress(results, len(todo), "calibrate on GPU"):
        out[i] = res
        journal.add(key, res)
    return out


def _timed_label(shape: dict, band: tuple[float, float]) -> str:
    """A calibrated shape's time for a reject detail; one inside the band that calibration did not
    count as in band went past the memory budget, and says so."""
    ms = shape["ms"]
    over = band[0] <= ms <= band[1] and not shape.get("in_band")
    return f"{ms:.3g} ms" + (f" (over the memory budget: {shape.get('peak_mb') or 0:.0f} MiB)" if over else "")


def _final_shapes(plan: dict, cal: dict | None, variants: int,
                  band: tuple[float, float]) -> tuple[list[dict], list[str] | None]:
    """The shapes to keep (in-band ones first, then the held-out one), or a reject reason."""
    if plan.get("reject"):
        return [], plan["reject"]
    shapes = plan["shapes"]
    if cal is not None:
        if not cal.get("ok"):
            return [], ["calibrate_failed", str(cal.get("detail", ""))[:500]]
        shapes = cal["shapes"]
        inband = [s for s in shapes if s["role"] != "heldout" and s.get("in_band")]
        held = [s for s in shapes if s["role"] == "heldout" and s.get("ms") is not None]
        if not inband or inband[0]["role"] != "primary":
            return [], ["out_of_band", f"timed {', '.join(_timed_label(s, band) for s in shapes if s.get('ms') is not None) or 'nothing'} "
                        f"for a band of {band[0]}-{band[1]} ms"]
    else:
        inband = [s for s in shapes if s["role"] != "heldout" and band[0] <= s["est_ms"] <= band[1]]
        held = [s for s in shapes if s["role"] == "heldout"]
    if not held:
        return [], ["no_heldout_shape", "the held-out odd-size shape did not run"]
    if len(inband) < variants:
        return [], ["too_few_shapes", f"{len(inband)} in-band shapes of {variants} wanted"]
    return inband[:variants] + held[:1], None


def _rows(row, spec0, init0, shapes, band, gpu, cal: dict | None, dtype: str = "float32",
          repairs: list[str] | None = None) -> list[dict[str, Any]]:
    calibrated = cal is not None
    base = row["problem_id"]
    variants = dumps([{"input_spec": s["spec"], "init_args": s["init"], "heldout": s["role"] == "heldout"}
                      for s in shapes])
    out = []
    for n, s in enumerate(x for x in shapes if x["role"] != "heldout"):
        peak = s.get("peak_mb") if calibrated and s.get("peak_mb") is not None else s["peak_bytes"] / 2**20
        out.append({**row, "variant": n, "base_problem_id": base,
                    "problem_id": variant_id(base, dtype, n), "dtype": dtype,
                    "input_repairs": ",".join(repairs or []) or None,
                    "input_spec": dumps(s["spec"]), "init_args": dumps(s["init"]),
                    "code": replace_inputs(row["code"], s["spec"], s["init"]),
                    "shape_role": s["role"], "shape_family": s["family"]["name"],
                    "shape_source": "calibrated" if calibrated else "estimated", "target_gpu": gpu,
                    "band_lo_ms": band[0], "band_hi_ms": band[1], "est_ms": s["est_ms"],
                    "calib_ms": s.get("ms") if calibrated else None, "est_flops": int(s["flops"]),
                    "est_bytes": int(s["bytes"]), "est_peak_mb": float(peak),
                    "mined_input_spec": dumps(spec0), "mined_init_args": dumps(init0),
                    "mined_calib_ms": (cal.get("mined") or {}).get("ms") if calibrated else None,
                    "shape_variants": variants})
    return out


def _mined_row(row, spec, init, plan, band, gpu, dtype: str = "float32") -> dict[str, Any]:
    orig = plan.get("original", {})
    return {**row, "variant": 0, "base_problem_id": row["problem_id"], "shape_role": "primary",
            "problem_id": variant_id(row["problem_id"], dtype, 0), "dtype": dtype, "input_repairs": None,
            "shape_family": "mined", "shape_source": "mined", "target_gpu": gpu, "band_lo_ms": band[0],
            "band_hi_ms": band[1], "est_ms": orig.get("est_ms"), "calib_ms": None,
            "est_flops": int(orig.get("flops") or 0), "est_bytes": int(orig.get("bytes") or 0),
            "est_peak_mb": (orig.get("peak_bytes") or 0) / 2**20, "mined_input_spec": dumps(spec),
            "mined_init_args": dumps(init), "mined_calib_ms": None, "shape_variants": dumps([])}


def _quantiles(xs: list[float]) -> dict[str, float] | None:
    if not xs:
        return None
    q = lambda f: xs[min(len(xs) - 1, int(f * len(xs)))]  # noqa: E731
    return {"p10": q(0.1), "median": q(0.5), "p90": q(0.9), "n": len(xs)}


def _frame(rows: list[dict[str, Any]], like: pl.DataFrame) -> pl.DataFrame:
    if not rows:
        schema = dict(like.schema)
        schema.update(NEW_COLUMNS)
        return pl.DataFrame(schema=schema)
    df = pl.DataFrame(rows, infer_schema_length=None)
    return df.with_columns([pl.col(c).cast(t) for c, t in NEW_COLUMNS.items()])
