"""The ``rank`` stage itself: see :mod:`curate.rank` for what it writes, and
:class:`curate.rank.options.RankOptions` for its options."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl

from curate.cpus import cpu_count
from curate.rank.difficulty import DifficultyRule, difficulty, measured_score, static_score
from curate.rank.difficulty import on_gpu as row_on_gpu
from curate.rank import predict
from curate.rank.levels import structures
from curate.rank.passk import pass_at_k
from curate.rank.solvers import Solver, SolverError, make_solver
from curate.harness.stage import StageRun, stage
from curate.table import Rejections, latest_input, read_problems
from curate.problem import mined_inputs
from curate.verify import VerifyResult, make_config, resolve_device, verify_many

__all__ = ["run", "default_source"]

RANK_COLUMNS = {
    "pass_rate": pl.Float64, "pass_at_k": pl.Float64, "n_candidates": pl.Int64,
    "n_correct": pl.Int64, "best_speedup": pl.Float64, "difficulty": pl.String,
    "difficulty_score": pl.Float64, "difficulty_signal": pl.String, "predicted_pass_rate": pl.Float64,
    "speedup_headroom": pl.Float64, "headroom_signal": pl.String, "level": pl.Int64,
    "category": pl.String, "solver": pl.String, "rank_error": pl.String, "verify_reasons": pl.String,
}


def default_source(out: Path | str) -> Path:
    """``OUT/measure``, or the latest earlier stage folder holding problems if measure was skipped.

    Raises:
        FileNotFoundError: no stage before rank has written problems under ``out``.
    """
    return latest_input(out, "rank")


def _json_list(value: Any) -> list | None:
    """A JSON-list column value (None when absent); raises ValueError when malformed."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    parsed = json.loads(value) if isinstance(value, str) else value
    if not isinstance(parsed, list):
        raise ValueError(f"expected a JSON list, got {type(parsed).__name__}")
    return parsed


def _cache_key(reference: str, candidate: str, cfg: dict[str, Any]) -> str:
    """The verification cache's key: a hash of the reference, the candidate and the
    verifier's configuration.

    This cache is not a resume journal (:meth:`curate.harness.stage.StageRun.journal`), and
    stays a store of its own on purpose: a journal belongs to one run of the stage, starts
    over when the stage's settings change and is removed once the tables are written; this
    cache is keyed by content alone, lives in ``cache_dir`` (which several run folders may
    share) and outlives the run, so that ranking again with another solver, ``k`` or
    ``max_problems``, or another run holding the same problems, verifies only the
    candidates it has not seen. A killed run resumes from it as a side effect. Only
    finished verifications are stored (one atomically written file each)."""
    blob = json.dumps([reference, candidate, cfg], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _load_cached(path: Path) -> VerifyResult | None:
    try:
        return VerifyResult(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


@stage("rank")
def run(sr: StageRun, solver: str, k: int, completions: Path | str | None, base_url: str | None,
        model: str | None, api_key_env: str, temperature: float, concurrency: int,
        cache_dir: Path | str | None, max_problems: int | None, timeout_s: float, device: str,
        workers: int | None, n_trials: int, seed: int, time_it: bool, executor: str,
        ray_address: str | None) -> dict[str, Any]:
    """Rank problems by how well a baseline solver does on them.

    Options (:class:`curate.rank.options.RankOptions`):
        out: run folder; writes ``out/rank``.
        source: stage folder or parquet to read instead of :func:`default_source`.
        solver: ``"none"`` (the predicted difficulty, :mod:`.predict`), ``"inductor"``,
            ``"openai"`` or ``"completions"`` (see :mod:`.solvers`).
        k: samples per problem (openai) and the k of pass@k.
        completions: JSONL of ``{problem_id, completion}`` (solver=completions).
        base_url, model, api_key_env, temperature, concurrency: solver=openai settings.
        cache_dir: completion and verification cache (default ``out/rank/cache``).
        max_problems: rank only the first this many valid problems (table order); the rest
            keep the predicted difficulty (``rank_error`` says why the solver did not rank them).
        timeout_s: seconds allowed to verify one candidate (and to trace one problem's
            structure, at most 120).
        device: verifier device (``"auto"``: CUDA when present).
        workers: concurrent verifications (default 1 on CUDA so timings do not contend,
            all cores on CPU).
        n_trials, seed, time_it: verifier settings (see :func:`curate.verify.verify`).
        executor: ``local`` or ``ray``: where the sandboxed structure traces and verifications
            run (:mod:`curate.executor`; Ray: one sandboxed task each, CPU only).
        ray_address: the Ray cluster to join (``executor="ray"``; None starts a local one).
    Returns:
        The stats written to ``out/rank/stats.json``.
    Raises:
        ValueError: bad solver arguments or ``k < 1``; FileNotFoundError: no input table.
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    cache = Path(cache_dir) if cache_dir else sr.dir / "cache"
    the_solver: Solver | None = make_solver(solver, completions=completions, base_url=base_url,
                                     model=model, api_key_env=api_key_env, temperature=temperature,
                                     concurrency=concurrency, cache_dir=cache / "completions")
    df = read_problems(sr.input)
    device = resolve_device(device)
    on_gpu = device.startswith("cuda")
    workers = workers or (1 if on_gpu else cpu_count())
    rejections = Rejections("rank")

    valid: list[tuple[int, dict[str, Any], dict[str, Any]]] = []  # (row index, row, verify options)
    rejected_idx: set[int] = set()
    for i, row in enumerate(df.iter_rows(named=True)):
        if not isinstance(row.get("code"), str) or not row["code"].strip():
            rejections.add(row, "missing_code", "no reference code")
            rejected_idx.add(i)
            continue
        try:
            # a CPU cannot run shapes sized for a GPU in minutes: rows whose shapes were only
            # estimated are verified at their mined inputs there (see curate.measure)
            small = None if on_gpu else mined_inputs(row)
            opts = ({"init_args": small[1], "input_spec": small[0]} if small is not None else
                    {"init_args": _json_list(row.get("init_args")), "input_spec": _json_list(row.get("input_spec"))})
        except ValueError as exc:
            rejections.add(row, "bad_input_spec", f"init_args/input_spec: {exc}")
            rejected_idx.add(i)
            continue
        valid.append((i, row, opts))
    if on_gpu and executor == "ray":
        raise ValueError("rank --executor ray verifies on the CPU (--device cpu); GPU verification "
                         "on a Ray cluster is curate.verify.cluster")
    return _rank(sr, df, the_solver, valid, rejected_idx, rejections, cache, solver, k,
                 max_problems, timeout_s, device, on_gpu, workers, n_trials, seed, time_it)


def _rank(sr: StageRun, df: pl.DataFrame, the_solver: Solver | None, valid: list, rejected_idx: set[int],
          rejections: Rejections, cache: Path, solver: str, k: int,
          max_problems: int | None, timeout_s: float, device: str, on_gpu: bool, workers: int,
          n_trials: int, seed: int, time_it: bool) -> dict[str, Any]:
    """The stage after its input is read and checked: structures, candidates, verification,
    difficulty; the sandboxed work goes to ``sr.remote`` (Ray) when the stage runs there."""
    to_rank = [] if the_solver is None else valid if max_problems is None else valid[: max(0, max_problems)]
    shapes = structures([row for _, row, _ in valid], cache / "structure", workers=cpu_count(),
                        timeout_s=min(timeout_s, 120.0), executor=sr.remote, progress=sr.progress)
    structure = {i: st for (i, _, _), st in zip(valid, shapes)}

    rank: dict[int, dict[str, Any]] = {}
    if the_solver is not None and hasattr(the_solver, "prepare") and to_rank:
        the_solver.prepare([row for _, row, _ in to_rank], k)
    jobs, owners = [], []  # one job per candidate; owners[j] = row index
    for i, row, opts in to_rank:
        try:
            cands = the_solver.candidates(row, k)
        except SolverError as exc:
            rank[i] = {"rank_error": f"solver: {exc}"[:500]}
            continue
        if not cands:
            rank[i] = {"rank_error": "solver: no candidates"}
            continue
        rank[i] = {"results": []}
        for cand in cands:
            jobs.append((row["code"], cand, dict(opts, allow_compile=the_solver.allow_compile)))
            owners.append(i)

    common = dict(device=device, n_trials=n_trials, seed=seed, time_it=time_it, inductor=False)
    cache.mkdir(parents=True, exist_ok=True)
    pending, cached = [], 0
    for j, (ref, cand, opts) in enumerate(jobs):
        path = cache / "verify" / f"{_cache_key(ref, cand, make_config(**common, **opts))}.json"
        hit = _load_cached(path) if path.is_file() else None
        if hit is not None:
            rank[owners[j]]["results"].append(hit)
            cached += 1
        else:
            pending.append((j, path))
    reasons: Counter[str] = Counter()
    retried = 0
    stream = verify_many([jobs[j] for j, _ in pending], workers=workers, timeout_s=timeout_s,
                         executor=sr.remote, **common) if pending else iter(())
    for n, result in sr.progress(stream, len(pending), f"verify ({solver})"):
        j, path = pending[n]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(result.to_dict(), default=str))
        tmp.replace(path)
        rank[owners[j]]["results"].append(result)
        retried += "memory_retried_alone" in result.details

    kept_rows = []
    for i, row in enumerate(df.iter_rows(named=True)):
        if i in rejected_idx:
            continue
        info = rank.get(i)
        cols: dict[str, Any] = {c: None for c in RANK_COLUMNS}
        cols["solver"] = the_solver.name if the_solver is not None else "none"
        cols["difficulty"] = "unranked"
        if the_solver is None:
            pass
        elif info is None:
            cols["rank_error"] = "not ranked (max_problems)"
        elif "results" not in info:
            cols["rank_error"] = info["rank_error"]
        else:
            results: list[VerifyResult] = info["results"]
            broken = next((r for r in results if r.reference_error), None)
            if broken is not None:
                rejections.add(row, "reference_error", broken.reason)
                continue
            reasons.update(_reason_class(r.reason) for r in results)
            cols.update(_aggregate(results, k, the_solver.deterministic, on_gpu))
        st = structure.get(i) or {}
        if st.get("ok"):
            cols["level"], cols["category"] = st["level"], st["category"]
        llm = the_solver is not None and not the_solver.deterministic
        cols.update(_signal(row, cols, st, llm))
        kept_rows.append({**row, **cols})

    kept = _frame(kept_rows, df)
    rejected = rejections.frame(like=df)
    counts = Counter(kept["difficulty"].to_list()) if kept.height else Counter()
    extra = {"solver": the_solver.name if the_solver is not None else "none", "k": k, "device": device, "ranked": sum(
        1 for r in kept_rows if r["pass_rate"] is not None),
        "candidates_verified": len(jobs), "verifications_cached": cached,
        "difficulty": dict(counts.most_common()),
        "difficulty_signal": dict(Counter(r["difficulty_signal"] for r in kept_rows).most_common()),
        "headroom_signal": dict(Counter(r["headroom_signal"] for r in kept_rows).most_common()),
        "predicted_pass_rate_mean": _mean([r["predicted_pass_rate"] for r in kept_rows]),
        "level": {str(lv): n for lv, n in sorted(Counter(r["level"] for r in kept_rows).items(), key=str)},
        "category": dict(Counter(r["category"] for r in kept_rows).most_common()),
        "structure_errors": sum(1 for r in kept_rows if r["level"] is None),
        # why traces failed (their rows are predicted from the code alone): a stage that falls
        # back says why, not only how often
        "structure_error_reasons": dict(Counter((st.get("error") or "no trace")[:120]
                                                for i, st in structure.items()
                                                if not st.get("ok") and i not in rejected_idx).most_common(10)),
        "verify_reasons": dict(reasons.most_common(20)),
        # verdicts that ran out of memory beside other workers on the GPU, verified again alone
        "memory_retried_alone": retried}
    if hasattr(the_solver, "requests_sent"):
        extra["requests_sent"] = the_solver.requests_sent
    return sr.write(kept, rejected, df.height, extra)


def _aggregate(results: list[VerifyResult], k: int, deterministic: bool, on_gpu: bool) -> dict[str, Any]:
    n = len(results)
    c = sum(r.correct for r in results)
    rate = c / n if n else 0.0
    speedups = [r.speedup_vs_eager for r in results if r.correct and r.speedup_vs_eager]
    best = max(speedups) if speedups else None
    pak = rate if deterministic and n else pass_at_k(n, c, k)
    # why each candidate passed or failed, per row: a pass rate alone cannot be checked
    # against a publisher's verdicts kernel by kernel
    why = Counter(_reason_class(r.reason) for r in results)
    return {"pass_rate": rate, "pass_at_k": pak, "n_candidates": n, "n_correct": c,
            "best_speedup": best, "difficulty": difficulty(rate, c, best, on_gpu, DifficultyRule()),
            "verify_reasons": json.dumps(dict(why.most_common()))}


def _signal(row: dict[str, Any], cols: dict[str, Any], st: dict[str, Any], llm: bool) -> dict[str, Any]:
    """The difficulty columns (see :mod:`curate.rank`): ``difficulty_score``, the estimated
    probability that a baseline model's kernel is wrong, is ``1 - pass_rate`` where an LLM
    solver ranked the row, else ``1 -`` the predictor's pass rate (:mod:`.predict`: from the
    trace and the code, or the code alone where the trace failed), so no row is unranked;
    ``speedup_headroom``, how hard the compiler and the vendor libraries are to beat, comes
    from measure's GPU figures or the static trace (:mod:`.difficulty`)."""
    out: dict[str, Any] = {}
    predicted, how = predict.predict(row.get("code") or "", st)
    out["predicted_pass_rate"] = predicted
    if cols.get("pass_rate") is not None and llm:
        out.update(difficulty_score=1.0 - cols["pass_rate"], difficulty_signal="pass_rate")
    else:
        out.update(difficulty=predict.bucket(predicted, how), difficulty_score=1.0 - predicted,
                   difficulty_signal=how)
    measured = measured_score(row.get("inductor_speedup"), row.get("library_share"),
                              row.get("kernels")) if row_on_gpu(row) else None
    if measured is not None:
        out.update(speedup_headroom=measured[0], headroom_signal=measured[1])
    elif st.get("ok"):
        out.update(speedup_headroom=static_score(st["library_share"], st["kernels"]), headroom_signal="static")
    else:
        out.update(speedup_headroom=None, headroom_signal="none")
    return out


def _mean(xs: list[Any]) -> float | None:
    vals = [float(x) for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def _reason_class(reason: str) -> str:
    """A short category of a verifier reason for the stats (its text before any detail)."""
    for sep in (":", " ("):
        reason = reason.split(sep)[0]
    return reason.strip()[:80]


def _frame(rows: list[dict[str, Any]], like: pl.DataFrame) -> pl.DataFrame:
    if not rows:
        schema = dict(like.schema)
        schema.update(RANK_COLUMNS)
        return pl.DataFrame(schema=schema)
    frame = pl.DataFrame(rows, schema_overrides={**like.schema, **RANK_COLUMNS},
                         infer_schema_length=None)
    return frame
