"""Apply :mod:`curate.export.prune` to a problem table, each pruned program proven in a sandbox.

Variants of one base problem share the module body before the inputs marker, so the body is
pruned once per distinct body, in a sandboxed process (:func:`curate.export.prune_usage.prune_task`)
at the mined inputs of one representative row (the base problem's variant 0 when present),
with the body's other programs (every row's own inputs, every shape variant) traced on the
``meta`` device: first with unreached constructor branches and unused methods removed
(:mod:`curate.export.prune_cover`) and the lookup-table entries no run used deleted
(:mod:`curate.export.prune_usage`), then with the table entries alone, then by the static
pass alone, the first that proves out winning. A pruned program is proven by
running it and the original with the same seed (:func:`curate.export.prune.check_task`);
only when outputs and parameters are identical does every row with that body get the
pruned body (and keep its own inputs block). Otherwise, and when the original itself fails
or times out here, the rows keep their code: pruning never loses a row.

Proven results are cached in ``<cache>`` (JSON lines keyed by the original program and
:data:`curate.export.prune.PRUNE_VERSION`), so exporting the same run again (another
``--max-prompt-tokens``, say) does not run the programs again.
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import polars as pl

from curate.export.prune import PRUNE_VERSION
from curate.export.prune_usage import prune_task
from curate.journal import content_key
from curate.problem import INPUTS_MARKER, mined_inputs, replace_inputs
from curate.progress import progress


def _load_cache(path: Path) -> dict[str, dict[str, Any]]:
    cache: dict[str, dict[str, Any]] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                item = json.loads(line)
                cache[item["key"]] = item["value"]
            except (json.JSONDecodeError, KeyError, TypeError):
                continue  # a line cut short by a kill
    return cache


def prune_codes(df: pl.DataFrame, cache: Path | None = None, workers: int | None = None,
                timeout_s: float = 60.0, mem_mb: int = 4096, seed: int = 0,
                executor: Any = None, progress: Callable = progress
                ) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Prune the ``code`` column of ``df`` (rows with non-empty code).

    Args:
        df: problem rows with ``problem_id``, ``code`` and, when present, ``base_problem_id``
            and ``variant`` (which row represents a body).
        cache: JSON-lines file of proven results (created; None: no cache).
        workers: sandbox processes (default: CPU count).
        executor: a :class:`curate.executor.Executor` (Ray) whose sandboxed tasks prove the
            bodies instead of the local sandbox processes; the result is the same.
        progress: ``progress(items, total, label)`` showing the proofs (the stage's
            :meth:`~curate.harness.stage.StageRun.progress`).
        timeout_s: seconds to run both programs of one body.
        mem_mb: address-space budget of a check process (MiB).
        seed: the seed both programs run with.
    Returns:
        ``(table, stats)``: ``table`` has the pruned ``code`` and two more columns,
        ``pruned`` (bool) and ``code_chars_unpruned`` (int); ``stats`` counts bodies
        ``checked``, ``pruned``, ``by_usage`` (pruned with unused table entries deleted),
        ``by_coverage`` (pruned with unreached constructor branches or unused methods
        removed, :mod:`curate.export.prune_cover`),
        ``kept_by_reason`` (``unchanged``, ``outputs differ``, ``pruned program failed``,
        ``original failed``, ``timeout`` ...) and ``chars_before``/``chars_after`` summed
        over rows.
    """
    from curate.executor import sandboxed_map

    codes = df["code"].to_list()
    heads = [c.partition(INPUTS_MARKER)[0] for c in codes]
    # the proof runs both programs at the mined inputs when the rows have them: pruning
    # changes only the module body, and shapes sized for a GPU take seconds a forward here
    rows = df.select([c for c in ("mined_input_spec", "mined_init_args") if c in df.columns]).to_dicts() \
        if "mined_input_spec" in df.columns else [{}] * len(codes)

    def at_mined(code: str, i: int) -> str:
        try:
            small = mined_inputs(rows[i], estimated_only=False)
            return code if small is None else replace_inputs(code, *small)
        except ValueError:
            return code

    variants = df["variant"].to_list() if "variant" in df.columns else [None] * len(codes)
    order = sorted(range(len(codes)), key=lambda i: (str(variants[i]) not in ("0", "None"), i))
    rep: dict[str, int] = {}
    for i in order:
        rep.setdefault(heads[i], i)
    # every other program of a body (rows' own inputs, their shape variants, held-out ones
    # included): usage and coverage pruning trace their constructors and forwards on meta
    others: dict[str, dict[str, None]] = {}
    shape_variants = df["shape_variants"].to_list() if "shape_variants" in df.columns else [None] * len(codes)
    for i, code in enumerate(codes):
        mine = others.setdefault(heads[i], {})
        mine[code] = None
        for spec, init in _shape_variants(shape_variants[i]):
            try:
                mine[replace_inputs(code, spec, init)] = None
            except ValueError:
                continue
    done = _load_cache(cache) if cache else {}
    new_head: dict[str, str] = {}
    kept = Counter()
    todo: list[tuple[str, str, str, list[str], int]] = []  # (head, key, original, variants, row)
    for head, i in rep.items():
        try:
            ast.parse(codes[i])
        except SyntaxError:
            kept["unchanged"] += 1
            continue
        proof = at_mined(codes[i], i)
        variants = [c for c in others[head] if c != proof]
        key = content_key("prune", PRUNE_VERSION, seed, proof, variants)
        if key in done:
            _apply(done[key], head, new_head, kept)
        else:
            todo.append((head, key, proof, variants, i))
    if todo:
        out = open(cache, "a") if cache else None
        try:
            calls = [((proof, variants, seed), {}) for _, _, proof, variants, _ in todo]
            stream = sandboxed_map(prune_task, calls, executor=executor, workers=workers,
                                   timeout_s=timeout_s, mem_mb=mem_mb, guard=True)
            for j, outcome in progress(stream, len(calls), "prune check"):
                head, key = todo[j][:2]
                value = (outcome.value if outcome.ok else
                         {"same": False, "pruned": None, "tables": [],
                          "detail": f"original failed: {outcome.status}: "
                                    f"{outcome.error.splitlines()[0] if outcome.error else ''}"[:300]})
                value = {"same": value["same"], "detail": value["detail"], "tables": value["tables"],
                         "cover": value.get("cover", {}),
                         "pruned_head": value["pruned"].partition(INPUTS_MARKER)[0] if value["same"] else None}
                if out and (outcome.ok or outcome.status == "error"):  # not a timeout of a busy machine
                    out.write(json.dumps({"key": key, "value": value}) + "\n")
                    out.flush()
                _apply(value, head, new_head, kept)
        finally:
            if out:
                out.close()
    new_codes, flags = [], []
    for code, head in zip(codes, heads):
        if head in new_head:
            new_codes.append(new_head[head] + code[len(head):])
            flags.append(True)
        else:
            new_codes.append(code)
            flags.append(False)
    table = df.with_columns(pl.Series("code", new_codes, dtype=pl.String),
                            pl.Series("pruned", flags, dtype=pl.Boolean),
                            pl.Series("code_chars_unpruned", [len(c) for c in codes], dtype=pl.Int64))
    by_usage = kept.pop("by_usage", 0)
    by_coverage = kept.pop("by_coverage", 0)
    stats = {"bodies": len(rep), "checked": len(todo), "pruned": len(new_head), "by_usage": by_usage,
             "by_coverage": by_coverage,
             "rows_pruned": sum(flags), "kept_by_reason": dict(kept),
             "chars_before": sum(len(c) for c in codes), "chars_after": sum(len(c) for c in new_codes)}
    return table, stats


def _shape_variants(value: Any) -> list[tuple[list, list]]:
    """``(input_spec, init_args)`` of a row's ``shape_variants`` (a JSON list of
    ``{"input_spec", "init_args", ...}``, or the list itself); malformed entries are skipped."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return []
    out = []
    for v in value if isinstance(value, list) else []:
        if isinstance(v, dict) and isinstance(v.get("input_spec"), list):
            init = v.get("init_args", [])
            if isinstance(init, str):
                try:
                    init = json.loads(init)
                except json.JSONDecodeError:
                    continue
            out.append((v["input_spec"], init if isinstance(init, list) else []))
    return out


def _apply(value: dict[str, Any], head: str, new_head: dict[str, str], kept: Counter) -> None:
    if value["same"]:
        new_head[head] = value["pruned_head"]
        if value.get("tables"):
            kept["by_usage"] += 1  # not a reason to keep: pruned, table entries included
        if value.get("cover", {}).get("branches") or value.get("cover", {}).get("methods"):
            kept["by_coverage"] += 1
    else:
        kept[value["detail"].split(":")[0] or "outputs differ"] += 1
