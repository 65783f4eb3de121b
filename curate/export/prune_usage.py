"""Which entries of a program's lookup tables a run uses, and the pruning task built on it.

A static pass cannot tell which entry of ``_ACT_LAYER_DEFAULT = dict(relu=..., gelu=GELU,
...)`` a constructor reads: the key is a constructor argument. So the program is run under
a tracer that records every function of the program that executes: built and run forward
once at the rows' mined inputs on the CPU, and built once more on the ``meta`` device (no
memory, no arithmetic, the same Python code paths) for each other set of constructor
arguments its exported rows have. An entry whose value is a class or
function that no run used (no code of it executed, no module built from it) is deleted
(:func:`curate.export.prune.prune_source` ``drop_entries``), and the definitions only it
referred to go with it.

:func:`prune_task` is the sandbox task :mod:`curate.export.prune_table` runs per module
body: it proposes the table-pruned program and proves it (same seed, identical outputs and
parameters, :func:`curate.export.prune.check_task`); when that fails it falls back to the
statically pruned program, proven the same way.
"""

from __future__ import annotations

import sys
from typing import Any

from curate.export.prune import check_task, prune_source, table_entries
from curate.problem import INPUTS_MARKER


def _record(code: str, name: str, meta: bool, forward: bool, codes: set, models: list) -> None:
    """Run ``code`` (module, ``Model(*get_init_inputs())``, forward) with a tracer that
    adds the code objects of the program's own functions to ``codes``."""
    import torch

    from curate.problem import exec_source

    prefix = f"<{name} "

    def trace(frame, event, arg):
        if frame.f_code.co_filename.startswith(prefix):
            codes.add(frame.f_code)
        # no local tracing: only frame starts are seen, which keeps torch's own calls fast

    ctx = torch.device("meta") if meta else torch.device("cpu")
    torch.manual_seed(0)
    sys.settrace(trace)
    try:
        with ctx:
            ns = exec_source(code, name)
            model = ns["Model"](*ns["get_init_inputs"]())
            models.append(model)
            if forward:
                with torch.no_grad():
                    model(*ns["get_inputs"]())
    finally:
        sys.settrace(None)


def _functions_of(cls: type) -> list:
    out = []
    for v in vars(cls).values():
        if isinstance(v, (staticmethod, classmethod)):
            v = v.__func__
        if isinstance(v, property):
            out += [f for f in (v.fget, v.fset, v.fdel) if f is not None]
        elif callable(v):
            out.append(v)
    return out


def unused_entries(code: str, variants: list[str]) -> list[tuple[str, Any]]:
    """``(table, key)`` of the table entries (:func:`curate.export.prune.table_entries`) no
    run of ``code`` used.

    Args:
        code: the program at the inputs it is proven at (run on the CPU, forward included).
        variants: programs with the same module body whose constructor arguments differ
            from ``code``'s (one per distinct ``get_init_inputs``; constructed on the
            ``meta`` device, which allocates nothing). Their forwards are not run: the
            tables a timm-style factory reads are read in the constructor, and a
            different input shape leaves the constructor's choices alone.
    Returns:
        The unused entries (empty when the program has no tables).
    Raises:
        Exception: any failure of a run (nothing can be concluded, so nothing is pruned by
            usage; the caller falls back to the static pass).
    """
    entries = table_entries(code)
    if not entries:
        return []
    codes: set = set()
    models: list = []
    _record(code, "_curate_usage", False, True, codes, models)
    ns = sys.modules["_curate_usage"].__dict__
    variants = list(dict.fromkeys(variants))
    for j, variant in enumerate(variants):
        _record(variant, f"_curate_usage_v{j}", True, False, codes, models)
    built = {id(c) for m in models for sub in m.modules() for c in type(sub).__mro__}
    ran = {id(c) for c in codes}

    def used(obj: Any) -> bool:
        if isinstance(obj, type):
            return id(obj) in built or any(id(getattr(f, "__code__", None)) in ran
                                           for c in obj.__mro__ for f in _functions_of(c))
        return id(getattr(obj, "__code__", None)) in ran

    # each run defined its own copies of the program's classes and functions
    spaces = [ns] + [sys.modules[f"_curate_usage_v{j}"].__dict__ for j in range(len(variants))]
    out = []
    for e in entries:
        values = []
        for space in spaces:
            table = space.get(e.table)
            if e.member:
                if not isinstance(table, (set, frozenset)) or space.get(e.key) not in table:
                    break
                values.append(space[e.key])
                continue
            if not isinstance(table, dict) or e.key not in table:
                break  # changed at import time: leave it
            values.append(table[e.key])
        if len(values) < len(spaces) or not all(
                isinstance(v, type) or hasattr(v, "__code__") for v in values):
            continue  # a partial, a tuple, a number: usage cannot be told
        if not any(used(v) for v in values):
            out.append((e.table, e.key))
    return out


def prune_task(original: str, variants: list[str], seed: int = 0) -> dict:
    """Prune ``original`` and prove it (a sandbox task; module level so it pickles by
    reference).

    Candidates, tried in this order until one is proven: the coverage-pruned program
    (:mod:`curate.export.prune_cover`: unreached constructor branches and unused methods
    removed, unused table entries deleted, then the static pass), the usage-pruned program
    (unused table entries deleted, then the static pass), the statically pruned program.
    Each is proven by :func:`curate.export.prune.check_task` (same seed, identical outputs
    and parameters at ``original``'s inputs); a candidate with coverage edits must also build
    and run every variant on the ``meta`` device with the original's output and parameter
    shapes (:func:`curate.export.prune_cover.check_meta`).

    Args:
        original: the program at the inputs the proof runs at.
        variants: the other programs sharing its module body (other rows' inputs blocks,
            shape variants); their constructors and forwards are traced on ``meta``.
        seed: the proof's seed.
    Returns:
        ``{"same": bool, "detail": str, "pruned": str | None, "tables": list[str],
        "cover": dict}``: ``pruned`` is the proven program (None when none was proven),
        ``tables`` the table entries it deleted, ``cover`` the coverage edits it holds
        (``branches``, ``methods``; empty when another candidate won) or why none were
        proposed (``failed``), ``detail`` why the last attempt was rejected.
    """
    from curate.export.prune_cover import check_meta, cover_prune, trace

    static = prune_source(original)
    tried: list[tuple[str, list[str], dict]] = []
    try:
        drop = unused_entries(original, variants)
    except Exception:  # untrusted code: a run that fails here proves nothing
        drop = []
    finally:
        for n in [n for n in sys.modules if n.startswith("_curate_usage")]:
            sys.modules.pop(n, None)
    cover_info: dict = {}
    try:
        cov = trace(original, variants)
        cover_info = {"failed": cov.failed} if cov.failed else {}
        edited = cover_prune(original, cov, drop)
    except Exception as exc:  # untrusted code, or source the edits cannot handle
        cover_info = {"failed": f"{type(exc).__name__}: {exc}"[:300]}
        edited = None
    if edited is not None and edited.code != original:
        by_cover = prune_source(edited.code)
        tried.append((by_cover.code, edited.tables,
                      {"branches": edited.branches, "methods": edited.methods}))
    if drop:
        by_usage = prune_source(original, drop)
        if by_usage.code != static.code:
            tried.append((by_usage.code, [r for r in by_usage.removed if "[" in r], {}))
    if static.changed and static.code != original:
        tried.append((static.code, [], {}))
    result = {"same": False, "detail": "unchanged", "pruned": None, "tables": [], "cover": cover_info}
    head = original.partition(INPUTS_MARKER)[0]
    for code, tables, cover in tried:
        check = check_task(original, code, seed)
        if check["same"] and cover:
            new_head = code.partition(INPUTS_MARKER)[0]
            pairs = [(v, new_head + v[len(head):]) for v in dict.fromkeys(variants)
                     if v != original and v.startswith(head)]
            check = check_meta(pairs)
        if check["same"]:
            return {"same": True, "detail": "", "pruned": code, "tables": tables, "cover": cover}
        result["detail"] = check["detail"]
    return result
