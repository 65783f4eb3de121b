"""The ``diversify`` stage proper (polars side): validated input-shape variants of each problem.

Reads ``OUT/dedup`` (or ``source``), writes ``OUT/diversify``. For every problem the
candidate shapes of :mod:`curate.diversify.shapes` (batch, sequence and spatial sizes
scaled x2, x1/2, then x4, x1/4; likely constructor-tied dims last) are validated by
:func:`curate.diversify.validate.validate_task` in a sandboxed process, and the first
``variants`` valid ones are kept besides the original.

Output rows, one per variant (the original is variant 0):

==================  ==============================================================
variant             int, 0 for the original
base_problem_id     str, the input row's ``problem_id``
problem_id          str, the base id for variant 0, ``<base>~v<n>`` otherwise
input_spec          str, JSON input spec of this variant
code                str, the problem with ``get_inputs()`` rendered for this variant
est_flops           int, FLOPs of one forward (FlopCounterMode; 0 when unknown)
est_bytes           int, input + output bytes of one forward
shape_variants      str, JSON list of every kept input spec of the base problem
==================  ==============================================================

A problem whose original does not run is rejected (``original_fails``, or the reason of
:mod:`curate.conform` when a KernelBench-style harness cannot run it); one that has
fewer valid variants than asked keeps those found (``problems_with_fewer`` in the stats).
The original is kept even when over the memory budget (it is the mined shape); the budget
bounds the variants. Code without curate's inputs marker (not written by ``mine``) cannot
have its inputs replaced: such a problem keeps only its original (``no_inputs_marker``).
Accountability: ``in`` = problems read = kept problems + rejected; ``rows_out`` counts variants.
The stage resumes from ``OUT/diversify/_journal.jsonl`` when restarted with equal settings.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl

from curate.diversify.shapes import candidates as shape_candidates
from curate.diversify.validate import validate_task
from curate.journal import Journal, content_key
from curate.problem import INPUTS_MARKER, dumps, replace_inputs
from curate.progress import progress
from curate.sandbox import Sandbox
from curate.table import Rejections, read_problems, stage_dir, write_stage

#: Share of ``timeout_s`` after which a problem's validation starts no further candidate.
DEADLINE_SHARE = 0.7
NEW_COLUMNS = {"variant": pl.Int64, "base_problem_id": pl.String, "est_flops": pl.Int64,
               "est_bytes": pl.Int64, "shape_variants": pl.String}


def _variant_rows(row: dict[str, Any], spec: list, init: list, res: dict[str, Any]) -> list[dict[str, Any]]:
    base = row["problem_id"]
    specs = [spec] + [v["spec"] for v in res["variants"]]
    shape_variants = dumps(specs)
    orig = res["original"]
    out = [{**row, "variant": 0, "base_problem_id": base, "est_flops": int(orig["flops"]),
            "est_bytes": int(orig["bytes"]), "shape_variants": shape_variants}]
    for n, v in enumerate(res["variants"], 1):
        out.append({**row, "variant": n, "base_problem_id": base, "problem_id": f"{base}~v{n}",
                    "input_spec": dumps(v["spec"]), "code": replace_inputs(row["code"], v["spec"], init),
                    "est_flops": int(v["flops"]), "est_bytes": int(v["bytes"]),
                    "shape_variants": shape_variants})
    return out


def run(out: Path | str, source: Path | str | None = None, variants: int = 3,
        mem_budget_mb: int = 1024, workers: int | None = None, timeout_s: float = 60.0,
        mem_mb: int | None = None) -> dict[str, Any]:
    """Add shape variants to ``OUT/dedup`` (or ``source``) into ``OUT/diversify``.

    Args:
        variants: valid variants wanted per problem besides the original.
        mem_budget_mb: largest input + output size of a variant (MiB).
        workers: concurrent validation processes (default: CPU count).
        timeout_s: wall-clock seconds to validate one problem (original and candidates).
        mem_mb: address-space budget of a validation process (MiB); default
            ``max(4096, 4 * mem_budget_mb)`` (intermediates exceed inputs + output).
    Returns:
        The stage stats (:func:`curate.table.write_stage`) with ``rows_out``,
        ``problems_with_fewer``, ``variants_histogram`` and ``candidate_verdicts``.
    Raises:
        FileNotFoundError: no input table.
    """
    t0 = time.monotonic()
    if variants < 0:
        raise ValueError("variants must be >= 0")
    df = read_problems(Path(source) if source else stage_dir(out, "dedup"))
    rows = df.to_dicts()
    rejects = Rejections("diversify")
    budget = int(mem_budget_mb * 2**20)
    journal = Journal(stage_dir(out, "diversify") / "_journal.jsonl",
                      {"variants": variants, "mem_budget_mb": mem_budget_mb, "timeout_s": timeout_s})

    parsed: dict[int, tuple[list, list]] = {}
    results: dict[int, dict[str, Any]] = {}
    jobs: list[tuple[int, str, tuple]] = []
    for i, row in enumerate(rows):
        try:
            spec = json.loads(row["input_spec"])
            init = json.loads(row["init_args"]) if row.get("init_args") else []
            if not isinstance(spec, list) or not isinstance(init, list):
                raise ValueError("input_spec and init_args must be JSON lists")
        except (TypeError, ValueError, KeyError) as exc:
            rejects.add(row, "bad_input_spec", str(exc))
            continue
        parsed[i] = (spec, init)
        has_marker = INPUTS_MARKER in (row.get("code") or "")
        cands = [(c.label, c.spec) for c in shape_candidates(spec)] if has_marker and variants else []
        key = content_key(row.get("problem_id"), row.get("code"), spec, init)
        if key in journal:
            results[i] = journal.get(key)
            continue
        args = (row.get("code") or "", init, spec, cands, variants, budget, timeout_s * DEADLINE_SHARE)
        jobs.append((i, key, args))

    sandbox = Sandbox(workers=workers, timeout_s=timeout_s, mem_mb=mem_mb or max(4096, 4 * mem_budget_mb))
    calls = [(args, {}) for _, _, args in jobs]
    for j, outcome in progress(sandbox.map(validate_task, calls), len(calls), "diversify"):
        i, key, _ = jobs[j]
        if outcome.ok:
            res = outcome.value
        else:
            res = {"ok": False, "detail": f"{outcome.status}: {outcome.error}"}
        results[i] = res
        journal.add(key, res)

    kept: list[dict[str, Any]] = []
    fewer = 0
    no_marker = 0
    hist: Counter = Counter()
    verdicts: Counter = Counter()
    kept_in = 0
    for i, row in enumerate(rows):
        if i not in parsed:
            continue
        res = results[i]
        if not res.get("ok"):
            rejects.add(row, res.get("reason") or "original_fails", res.get("detail", ""))
            continue
        spec, init = parsed[i]
        kept.extend(_variant_rows(row, spec, init, res))
        kept_in += 1
        n = len(res["variants"])
        hist[n] += 1
        fewer += n < variants
        no_marker += INPUTS_MARKER not in (row.get("code") or "")
        verdicts.update(v if not v.startswith("error") else "error" for _, v in res["tried"])

    kept_df = _frame(kept, df)
    stats = write_stage(out, "diversify", kept_df, rejects.frame(df), rows_in=len(rows),
                        seconds=time.monotonic() - t0, kept_in=kept_in,
                        extra={"variants_requested": variants, "mem_budget_mb": mem_budget_mb,
                               "problems_with_fewer": fewer, "no_inputs_marker": no_marker,
                               "variants_histogram": {str(k): v for k, v in sorted(hist.items())},
                               "candidate_verdicts": dict(verdicts.most_common()),
                               "resumed": journal.resumed})
    journal.remove()
    return stats


def _frame(rows: list[dict[str, Any]], like: pl.DataFrame) -> pl.DataFrame:
    if not rows:
        schema = dict(like.schema)
        schema.update(NEW_COLUMNS)
        return pl.DataFrame(schema=schema)
    df = pl.DataFrame(rows, infer_schema_length=None)
    return df.with_columns([pl.col(c).cast(t) for c, t in NEW_COLUMNS.items()])
