"""The rank stage's structure columns (``level``, ``category``) for a table of problems.

One sandboxed meta-device trace per base problem and precision
(:func:`curate.structure.structure_task`; all shape variants of a base problem share its code,
so they share its structure; a bf16 or fp16 variant is traced with its model and inputs cast
to that dtype, as it runs), cached under ``cache/structure`` keyed by code, inputs and dtype,
so a restarted run traces only what is left.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from curate.problem import mined_inputs
from curate.progress import progress
from curate.executor import Executor, sandboxed_map
from curate.structure import structure_task

#: Address-space budget of a tracing process (MiB): a meta trace allocates no tensor data.
TRACE_MEM_MB = 4096


#: Bumped when :func:`curate.structure.structure_task` records more: older cache entries lack it.
STRUCTURE_VERSION = 2


def _key(args: tuple) -> str:
    blob = json.dumps([STRUCTURE_VERSION, *args], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _task_args(row: dict[str, Any]) -> tuple:
    """``(code, init_args, input_spec, small_spec, small_init)`` for one row (ValueError:
    malformed JSON columns)."""
    init = json.loads(row["init_args"]) if row.get("init_args") else []
    spec = json.loads(row["input_spec"])
    small = mined_inputs(row, estimated_only=False)
    small_spec, small_init = (small if small is not None else (spec, init))
    return (row["code"], init, spec, small_spec, small_init)


def _precision(row: dict[str, Any]) -> str | None:
    """The dtype a precision variant runs in (``dtype`` column), None for float32 rows."""
    dtype = row.get("dtype")
    return None if dtype in (None, "", "float32") else str(dtype)


def structures(rows: list[dict[str, Any]], cache: Path, workers: int | None = None,
               timeout_s: float = 60.0, executor: "Executor | None" = None,
               progress: Callable = progress) -> list[dict[str, Any]]:
    """The structure of each row (same order): :func:`curate.structure.structure_task`'s
    dict, or ``{"ok": False, "error"}`` for a row whose trace failed, timed out or whose
    ``init_args``/``input_spec`` are not JSON. Traces run in ``workers`` local sandboxes, or
    as sandboxed tasks of ``executor`` (Ray) when given; ``progress(items, total, label)``
    shows them (the stage's :meth:`~curate.harness.stage.StageRun.progress`)."""
    out: list[dict[str, Any] | None] = [None] * len(rows)
    by_base: dict[tuple, list[int]] = {}
    firsts: dict[tuple, tuple] = {}
    for i, row in enumerate(rows):
        # a precision variant shares its base problem's id but not its trace (a bf16 input
        # meets bf16 weights only when the model is cast as well)
        base = (str(row.get("base_problem_id") or row.get("problem_id")), _precision(row))
        try:
            args = _task_args(row)
        except (TypeError, ValueError, KeyError) as exc:
            out[i] = {"ok": False, "error": f"bad_input_spec: {exc}"[:300]}
            continue
        by_base.setdefault(base, []).append(i)
        # the primary (variant 0) row's shape stands for its base problem
        if base not in firsts or row.get("variant") in (0, "0"):
            firsts[base] = args
    results: dict[tuple, dict[str, Any]] = {}
    todo = []
    for base, args in firsts.items():
        dtype = base[1]
        path = cache / f"{_key(args if dtype is None else (*args, dtype))}.json"
        try:
            results[base] = json.loads(path.read_text())
        except (OSError, ValueError):
            todo.append((base, path, args))
    stream = sandboxed_map(structure_task, [(a, {"dtype": b[1]} if b[1] else {}) for b, _, a in todo],
                           executor=executor,
                           workers=workers, timeout_s=timeout_s, mem_mb=TRACE_MEM_MB, guard=True)
    for j, outcome in progress(stream, len(todo), "structure"):
        base, path, _ = todo[j]
        res = outcome.value if outcome.ok else {"ok": False, "error": f"{outcome.status}: {outcome.error}"[:300]}
        if outcome.ok:  # a timeout may pass on a less loaded machine: not cached
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(res))
            tmp.replace(path)
        results[base] = res
    for base, idx in by_base.items():
        for i in idx:
            out[i] = results[base]
    return [r if r is not None else {"ok": False, "error": "not traced"} for r in out]
