"""The mine stage's driver: sources -> scans -> closures -> sandboxed synthesis -> tables.

Imported only when :func:`curate.mine.run` is called, so processes that only index files
(executor workers) do not import torch and polars.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from pathlib import Path
from typing import Any, Iterable

import polars as pl

from curate.executor import Executor, LocalExecutor
from curate.journal import content_key
from curate.mine import default_cache
from curate.mine.closure import module_name
from curate.mine.declared import DeclaredDependencies, placeholder_packages
from curate.mine.deps import dependency_roots
from curate.mine.kernelbench import kernelbench_names, kernelbench_task
from curate.mine.offload import read_outcomes, write_tasks
from curate.mine.scan import Scan, closure_of, closure_sources, scan
from curate.mine.sources import Source, SourceUnavailable, load_manifest, resolve
from curate.mine.synthesize import synthesis_version, synthesize_task
from curate.mine.torch_api import public_closure
from curate.problem import dumps
from curate.progress import progress
from curate.harness.stage import StageRun, stage
from curate.table import Rejections, source_struct

__all__ = ["run", "closures"]


def problem_id(source: Source, rel: str, class_name: str) -> str:
    """The id of a source's class: a hash of the source's name, the file's path and the class
    name. The version is left out, so a package's next release keeps the ids of unchanged
    classes (a journal resumes them, their content keys change only with their code)."""
    key = f"{source.name}|{rel}|{class_name}"
    return hashlib.sha1(key.encode()).hexdigest()[:16]


def long_name(source_name: str, rel: str, class_name: str) -> str:
    """``<source>.<dotted file path>.<ClassName>``: tells apart classes of one name defined in
    different files (``torchvision.models.googlenet.BasicConv2d`` and
    ``torchvision.models.inception.BasicConv2d``)."""
    dotted = rel.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
    if dotted == source_name or dotted.startswith(source_name + "."):
        return f"{dotted}.{class_name}"
    return f"{source_name}.{dotted}.{class_name}"


def unique_names(rows: list[dict[str, Any]]) -> None:
    """Give the rows whose ``name`` (``<source>.<ClassName>``) several classes share their
    :func:`long_name`, in place: ``name`` is then unique across the table (and its exports)."""
    seen: dict[str, set[tuple[str, str]]] = {}
    for r in rows:
        seen.setdefault(r["name"], set()).add((r["source"]["path"], r["source"]["class_name"]))
    for r in rows:
        src = r["source"]
        if len(seen[r["name"]]) > 1 and src["class_name"]:
            r["name"] = long_name(src["name"], src["path"], src["class_name"])


def input_columns(spec: list[dict]) -> dict[str, Any]:
    """``input_dtypes`` (JSON list: a torch dtype name per tensor input, the Python type name of
    a plain value) and ``all_float_inputs`` (every tensor input floating point: a harness
    that casts every input to float32 may take the problem) for an input spec."""
    dtypes = [s.get("dtype", "float32") if s["kind"] in ("tensor", "index", "mask")
              else type(s.get("value")).__name__ for s in spec]
    floats = all(d.startswith(("float", "bfloat", "complex"))
                 for s, d in zip(spec, dtypes) if s["kind"] in ("tensor", "index", "mask"))
    return {"input_dtypes": dumps(dtypes), "all_float_inputs": floats}


def _base_row(source: Source, rel: str, class_name: str | None) -> dict[str, Any]:
    pid = problem_id(source, rel, class_name or "")
    return {
        "problem_id": pid,
        "name": f"{source.name}.{class_name}" if class_name else f"{source.name}:{rel}",
        "code": None,
        "init_args": None,
        "input_spec": None,
        "source": source_struct(kind=source.kind, name=source.name, uri=source.uri,
                                version=source.version, path=rel, class_name=class_name,
                                licence=source.licence),
    }


def closures(found: Scan, candidates: list[tuple[str, str, str]] | None = None,
             timeout_s: float = 30.0, executor: Executor | None = None,
             built: list[tuple[str, str]] | None = None) -> list[tuple[dict[str, Any], tuple]]:
    """Build the dependency closure of each candidate of a scan (in parallel on ``executor``),
    or take them ready-made (``built``: :func:`closure_of` per candidate).

    Returns:
        per candidate, ``(row, task)``: ``task`` is the argument tuple of
        :func:`curate.mine.synthesize.synthesize_task`, or ``(reason, detail)`` when the
        class cannot be made self-contained (``len(task) == 2``).
    """
    source = found.source
    cands = found.candidates if candidates is None else candidates
    if built is None:
        built = closure_sources(found, executor or LocalExecutor(1), cands)
    out: list[tuple[dict[str, Any], tuple]] = []
    torch_source = source.kind == "package" and source.name == "torch"
    for (rel, _, cls), (status, text) in zip(cands, built):
        row = _base_row(source, rel, cls)
        if torch_source:  # torch's own classes: through torch's public API, or not at all
            text = public_closure(rel, cls)
            status = "ok" if text is not None else "torch_private"
            if text is None:
                text = (f"{rel}::{cls} has no public spelling in torch {source.version}: a copy of it "
                        "runs only on the torch it was copied from")
        if status != "ok":
            out.append((row, (status, text)))
            continue
        doc = (f"Reference problem mined from {source.name} {source.version or ''}: "
               f"{rel}::{cls} (licence: {source.licence or 'unknown'}).").replace('"""', "'''")
        out.append((row, (text, cls, doc, timeout_s * 0.8)))
    return out


def _source_closures(item: tuple[Any, list[tuple[str, str, str]]]) -> list[tuple[str, str]]:
    resolver, cands = item
    return [closure_of(resolver, c) for c in cands]


def small_source_closures(scans: list[Scan], chosen: list[list[tuple[str, str, str]]],
                          ex: Executor, min_parallel: int = 500) -> dict[int, list[tuple[str, str]]]:
    """Closures of the sources too small to spread over the workers one by one (fewer than
    ``min_parallel`` candidates), built a whole source per worker task, so dozens of small
    sources keep every core busy instead of one; ``{scan position: closure_of results}``."""
    small = [k for k, cands in enumerate(chosen) if 0 < len(cands) < min_parallel]
    if ex.workers <= 1 or len(small) < 2:
        return {}
    items = [(scans[k].resolver, chosen[k]) for k in small]
    return dict(zip(small, progress(ex.map(_source_closures, items), len(items), "closures (small sources)")))


def _second_tries(sr: StageRun, scans: list[Scan], tasks: list[tuple[dict[str, Any], tuple]], keys: list[str],
                  journal: Any, cache: Path, timeout_s: float, mem_mb: int, version: str) -> dict[int, str]:
    """Try rejected classes again with their sources' declared dependencies' code
    (:mod:`curate.mine.declared`); ``{task position: journal key of the second try}``. A
    second try already in the journal (a resumed run) is not run again."""
    by_source = {found.source.name: found for found in scans}
    rejected: dict[str, list[int]] = {}
    for i, ((row, task), key) in enumerate(zip(tasks, keys)):
        v = journal.get(key)
        if v is not None and not v["ok"] and placeholder_packages(task[0]):
            rejected.setdefault(row["source"]["name"], []).append(i)
    if not rejected:
        return {}
    declared = DeclaredDependencies(cache)
    second: dict[int, str] = {}
    calls: list[tuple[int, tuple]] = []
    for name, idx in rejected.items():
        found = by_source[name]
        root = found.source.root
        items = [(module_name(root, root / tasks[i][0]["source"]["path"])[0], tasks[i][0]["source"]["class_name"],
                  tasks[i][1][0]) for i in idx]
        for k, text in declared.second_closures(found.resolver, found.source, items).items():
            i = idx[k]
            second[i] = content_key(tasks[i][0]["problem_id"], text)
            if journal.get(second[i]) is None:
                calls.append((i, (text, *tasks[i][1][1:])))
    outcomes = sr.sandboxed(synthesize_task, [(task, {}) for _, task in calls], timeout_s=timeout_s,
                            mem_mb=mem_mb, guard=True)
    for j, outcome in sr.progress(outcomes, len(calls), "synthesize (declared dependencies)"):
        value = outcome.value if outcome.ok else {"ok": False, "reason": outcome.status, "detail": outcome.error}
        journal.add(second[calls[j][0]], {**value, "synthesis": version})
    return second


#: Least seconds a KernelBench-format file gets (its inputs read on meta, its CPU shape
#: searched and checked): files of gigabyte-sized inputs take tens of seconds on one core.
KERNELBENCH_TIMEOUT_S = 120.0


def kernelbench_row(source: Source, rel: str) -> dict[str, Any]:
    """The row of a KernelBench-format file: named ``<source>/<path without .py>``."""
    row = _base_row(source, rel, "Model")
    row["name"] = f"{source.name}/{rel.removesuffix('.py')}"
    return row


def kernelbench_files(source: Source, files: list[Path], rejects: Rejections
                      ) -> tuple[list[tuple[dict[str, Any], str]], int, int]:
    """The KernelBench-format files of a ``kernelbench`` source: ``([(row, text)], skipped,
    rows rejected)``. A file that does not parse is a ``syntax_error`` row, one that defines
    ``class Model`` without ``get_inputs`` or ``get_init_inputs`` an ``exec_fails`` row; a file
    without ``class Model`` (a helper, a package ``__init__``) holds no problem and is counted
    as skipped."""
    out, skipped, rejected = [], 0, 0
    for f in files:
        rel = f.relative_to(source.root).as_posix()
        text = f.read_text(errors="replace")
        names = kernelbench_names(text)
        if names is None:
            rejects.add(_base_row(source, rel, None), "syntax_error", f"{rel} does not parse")
            rejected += 1
        elif names == {"Model", "get_inputs", "get_init_inputs"}:
            out.append((kernelbench_row(source, rel), text))
        elif "Model" in names:
            missing = sorted({"get_inputs", "get_init_inputs"} - names)
            rejects.add(kernelbench_row(source, rel), "exec_fails",
                        f"a KernelBench-format file needs {', '.join(missing)} at its top level")
            rejected += 1
        else:
            skipped += 1
    return out, skipped, rejected


def recognized_kernelbench(found: Scan) -> list[tuple[dict[str, Any], str]]:
    """KernelBench-format files among a scanned source's files (recognized by shape: ``class
    Model``, ``get_inputs``, ``get_init_inputs`` at the top level): their ``Model`` leaves the
    scan's candidates (it would be rejected ``name_conflict``) and the file becomes a problem
    with its own inputs; its other classes stay candidates."""
    out, moved = [], set()
    for rel, _, cls in found.candidates:
        if cls != "Model" or rel in moved:
            continue
        text = (found.source.root / rel).read_text(errors="replace")
        if kernelbench_names(text) == {"Model", "get_inputs", "get_init_inputs"}:
            moved.add(rel)
            out.append((kernelbench_row(found.source, rel), text))
    found.candidates = [c for c in found.candidates if not (c[2] == "Model" and c[0] in moved)]
    return out


def _unavailable(entry: dict) -> Source:
    return Source(entry["kind"], entry["name"], entry.get("uri") or entry.get("path") or entry["name"],
                  entry.get("version"), None, Path("."))


@stage("mine")
def run(sr: StageRun, manifest: Path | str, workers: int | None, timeout_s: float, mem_mb: int,
        limit: int | None, cache_dir: Path | str | None, executor: str | Executor,
        ray_address: str | None, retry: Iterable[str], export_pending: Path | str | None,
        import_outcomes: Iterable[Path | str], sample_per_source: int | None,
        sample_seed: int) -> dict[str, Any]:
    """Mine the manifest's sources into ``OUT/mine``; return the stage stats.

    Options (:class:`curate.mine.options.MineOptions`; called as ``run(manifest, out, ...)``):
        manifest: YAML manifest (see :mod:`curate.mine.sources`).
        workers: processes for indexing and synthesis (default: CPU count); with
            ``executor="ray"`` and no address, the CPUs of the local Ray instance.
        timeout_s: wall-clock seconds per module for argument/input synthesis.
        mem_mb: memory budget per synthesis process (MiB).
        limit: keep only the first ``limit`` candidate classes (deterministic order).
        sample_per_source: keep a seeded random sample of at most this many candidate
            classes of each source (a run over every source of a large manifest in minutes,
            for trials and measurements at scale); applied before ``limit``.
        sample_seed: seed of that sample.
        executor: ``"local"`` (a process pool), ``"ray"``, or an :class:`Executor`.
        ray_address: the Ray cluster to join (``executor="ray"``; None starts a local one).
        retry: reject reasons (``constructor_failed``, ``no_runnable_inputs``, ...; ``all`` for
            every reason) whose items, recorded in a stopped run's journal, are synthesized
            again: after an upgrade of curate's synthesizer, a resumed run redoes the
            rejections the new code may turn into problems and keeps everything else. Only
            rejections made by another version of the synthesis code are redone
            (:func:`synthesis_version`); a closure that changed is a new item anyway.
        export_pending: plan, then write the syntheses still pending to this file (for
            ``python -m curate.mine.offload`` on another machine, see :mod:`curate.mine.offload`)
            and stop; returns ``{"stage", "exported", "pending_file"}``.
        import_outcomes: outcome files of ``curate.mine.offload``: merged into the journal
            (for items still pending, and over rejections made by another version of the
            synthesis code) before synthesis, which then runs what is left.
    Raises:
        ManifestError: the manifest is malformed.
        ValueError: an unknown executor.
    """
    cache = Path(cache_dir) if cache_dir else default_cache()
    entries = load_manifest(manifest)
    return _run(sr, manifest, entries, cache, sr.executor, timeout_s, mem_mb, limit, frozenset(retry),
                export_pending, list(import_outcomes), sample_per_source, sample_seed)


def interleave(items: list, key, seed: int | None = 0) -> list:
    """``items`` taken in turn from each ``key`` group, each group in a seeded random order
    (``seed=None``: first come first), so the synthesis of a long run, journaled as it goes,
    reaches every source early and a run stopped part way has a yield for each source from a
    random sample of its classes, not from its first folders (transformers' model families
    in alphabetical order). The table itself is written in task order whatever the order of
    work."""
    groups: dict[Any, list] = {}
    for it in items:
        groups.setdefault(key(it), []).append(it)
    if seed is not None:
        for g in groups.values():
            random.Random(seed).shuffle(g)
    out = []
    queues = [iter(g) for g in groups.values()]
    while queues:
        alive = []
        for q in queues:
            nxt = next(q, None)
            if nxt is not None:
                out.append(nxt)
                alive.append(q)
        queues = alive
    return out


def _run(sr: StageRun, manifest: Path | str, entries: list[dict], cache: Path, ex: Executor,
         timeout_s: float, mem_mb: int, limit: int | None,
         retry: frozenset[str] = frozenset(), export_pending: Path | str | None = None,
         import_outcomes: list[Path | str] | None = None, sample_per_source: int | None = None,
         sample_seed: int = 0) -> dict[str, Any]:
    rejects = Rejections("mine")
    kb_tasks: list[tuple[dict[str, Any], str]] = []  # KernelBench-format files: (row, text)
    scans: list[Scan] = []
    per_source: dict[str, dict[str, Any]] = {}
    phases = {"resolve": 0.0, "prefilter": 0.0, "index": 0.0, "classes": 0.0, "closure": 0.0}
    rows_in = 0
    for entry in entries:
        t = time.monotonic()
        try:
            source = resolve(entry, cache)
        except SourceUnavailable as exc:
            rejects.add(_base_row(_unavailable(entry), "", None), "source_unavailable", str(exc))
            rows_in += 1
            continue
        files = source.files()
        if source.kind == "kernelbench":
            phases["resolve"] += time.monotonic() - t
            got, skipped, rejected = kernelbench_files(source, files, rejects)
            kb_tasks.extend(got)
            rows_in += len(got) + rejected
            per_source[source.name] = {"version": source.version, "licence": source.licence,
                                       "files": len(files), "kernelbench_files": len(got),
                                       "prefilter_skipped": skipped, "syntax_errors": rejected}
            continue
        deps = dependency_roots(entry, cache)  # manifest `deps`: packages whose code may be copied
        phases["resolve"] += time.monotonic() - t
        found = scan(source, ex, files, deps)
        recognized = recognized_kernelbench(found)
        kb_tasks.extend(recognized)
        rows_in += len(recognized)
        for k, v in found.seconds.items():
            phases[k] += v
        for rel, err in found.broken:
            rejects.add(_base_row(source, rel, None), "syntax_error", err)
        rows_in += len(found.broken)
        scans.append(found)

    remaining = limit
    chosen = []
    for found in scans:
        cands = found.candidates
        if sample_per_source is not None and len(cands) > sample_per_source:
            picked = set(random.Random(f"{sample_seed}|{found.source.name}").sample(range(len(cands)),
                                                                                     sample_per_source))
            cands = [c for k, c in enumerate(cands) if k in picked]  # kept in scan order
        cands = cands if remaining is None else cands[:max(0, remaining)]
        if remaining is not None:
            remaining -= len(cands)
        chosen.append(cands)
    t = time.monotonic()
    ready = small_source_closures(scans, chosen, ex)
    phases["closure"] += time.monotonic() - t
    tasks: list[tuple[dict[str, Any], tuple]] = []
    for k, (found, cands) in enumerate(zip(scans, chosen)):
        t = time.monotonic()
        closure_rejects: dict[str, int] = {}
        for row, task in closures(found, cands, timeout_s, ex, ready.get(k)):
            if len(task) == 2:
                rejects.add(row, *task)
                closure_rejects[task[0]] = closure_rejects.get(task[0], 0) + 1
            else:
                tasks.append((row, task))
        phases["closure"] += time.monotonic() - t
        rows_in += len(cands)
        per_source[found.source.name] = {
            "version": found.source.version, "licence": found.source.licence, "files": found.files,
            "prefilter_skipped": len(found.skipped), "syntax_errors": len(found.broken),
            "indexed_on_demand": found.indexed_on_demand, "classes": found.classes,
            "module_classes": len(found.candidates), "closure_rejected": closure_rejects,
            "kernelbench_files": sum(1 for r, _ in kb_tasks if r["source"]["name"] == found.source.name)}

    # An item's key is its problem id and closure source, so the manifest (which items
    # exist) is not part of the fingerprint: a source added to the manifest, or a larger
    # --limit, resumes a stopped run instead of discarding its finished syntheses.
    settings = {"journal": 2, "timeout_s": timeout_s, "mem_mb": mem_mb}
    # A finished run keeps its outcomes (keyed by closure content) as a cache: sources added
    # to the manifest later, or changed closures, are all a new run synthesizes.
    journal = sr.journal(settings, keep_as="_synthesized.jsonl")
    keys = [content_key(row["problem_id"], args[0]) for row, args in tasks]
    plan = sr.dir / "_plan.json"  # for progress reports on a running or stopped run
    plan.write_text(json.dumps({"sources": per_source, "tasks": {
        k: row["source"]["name"] for (row, _), k in zip(tasks, keys)}}))
    version = synthesis_version()

    def pending(key: str) -> bool:
        v = journal.get(key)
        return v is None or (not v["ok"] and ("all" in retry or v["reason"] in retry)
                             and v.get("synthesis") != version)

    imported = 0
    if import_outcomes:
        wanted = set(keys)
        for key, value in read_outcomes(import_outcomes):
            cur = journal.get(key)
            # an offloaded outcome fills a pending item, or replaces a rejection another
            # version of the synthesis code made (it was exported to be redone)
            if key in wanted and (pending(key) or (not cur["ok"] and cur.get("synthesis") != value.get("synthesis"))):
                journal.add(key, value)
                imported += 1
    todo = interleave([i for i, k in enumerate(keys) if pending(k)],
                      lambda i: tasks[i][0]["source"]["name"])
    # the reader's own code is part of a file's key: an upgraded reader reads the files again
    reader = hashlib.sha1((Path(__file__).parent / "kernelbench.py").read_bytes()).hexdigest()[:12]
    kb_keys = [content_key(row["problem_id"], "kernelbench", reader, text) for row, text in kb_tasks]
    kb_todo = [i for i, k in enumerate(kb_keys) if pending(k)]
    if export_pending is not None:
        n = write_tasks(export_pending, ((keys[i], tasks[i][1]) for i in todo))
        return {"stage": "mine", "exported": n, "pending_file": str(export_pending), "imported": imported}
    calls = [(tasks[i][1], {}) for i in todo]
    t = time.monotonic()
    outcomes = sr.sandboxed(synthesize_task, calls, timeout_s=timeout_s, mem_mb=mem_mb, guard=True)
    for j, outcome in sr.progress(outcomes, len(calls), "synthesize"):
        value = outcome.value if outcome.ok else {"ok": False, "reason": outcome.status,
                                                   "detail": outcome.error}
        journal.add(keys[todo[j]], {**value, "synthesis": version})
    phases["synthesize"] = time.monotonic() - t
    t = time.monotonic()
    kb_budget = max(timeout_s, KERNELBENCH_TIMEOUT_S)
    outcomes = sr.sandboxed(kernelbench_task, [((kb_tasks[i][1], 0.8 * kb_budget), {}) for i in kb_todo],
                            timeout_s=kb_budget, mem_mb=mem_mb, guard=True)
    for j, outcome in sr.progress(outcomes, len(kb_todo), "KernelBench-format files"):
        value = outcome.value if outcome.ok else {"ok": False, "reason": outcome.status,
                                                   "detail": outcome.error}
        journal.add(kb_keys[kb_todo[j]], {**value, "synthesis": version})
    phases["kernelbench_files"] = time.monotonic() - t

    t = time.monotonic()
    second = _second_tries(sr, scans, tasks, keys, journal, cache, timeout_s, mem_mb, version)
    phases["declared_dependencies"] = time.monotonic() - t

    kept: list[dict[str, Any]] = []
    for i, ((row, _), key) in enumerate(zip(tasks, keys)):  # task order: the table does not depend on timing
        v = journal.get(key)
        if not v["ok"] and i in second and journal.get(second[i])["ok"]:
            v = journal.get(second[i])  # kept with its declared dependencies' code
        if not v["ok"]:
            rejects.add(row, v["reason"], v["detail"])
        else:
            kept.append({**row, "code": v["code"], "init_args": dumps(v["init_args"]),
                         "input_spec": dumps(v["input_spec"]), "output_shapes": dumps(v["output_shapes"]),
                         **input_columns(v["input_spec"]), "checked_torch": v.get("checked_torch"),
                         "synth_seconds": round(v["seconds"], 3)})
    for (row, _), key in zip(kb_tasks, kb_keys):
        v = journal.get(key)
        if not v["ok"]:
            rejects.add(row, v["reason"], v["detail"])
            continue
        kept.append({**row, "code": v["code"], "init_args": dumps(v["init_args"]),
                     "input_spec": dumps(v["input_spec"]), "output_shapes": dumps(v["output_shapes"]),
                     **input_columns(v["input_spec"]), "checked_torch": v.get("checked_torch"),
                     "synth_seconds": round(v["seconds"], 3),
                     "mined_input_spec": dumps(v["mined_input_spec"]),
                     "mined_init_args": dumps(v["mined_init_args"]), "shape_source": "source"})
    unique_names(kept + rejects.rows)
    kept_df = pl.DataFrame(kept, infer_schema_length=None) if kept else pl.DataFrame()
    kept_df = kept_df.sort("problem_id") if kept else kept_df
    for name in per_source:
        per_source[name]["kept"] = sum(1 for r in kept if r["source"]["name"] == name)
    stats = sr.write(kept_df, rejects.frame(kept_df), rows_in,
                     extra={"sources": per_source, "executor": ex.kind,
                            "workers": ex.workers, "imported_outcomes": imported,
                            "phase_seconds": {k: round(v, 2) for k, v in phases.items()}})
    plan.unlink(missing_ok=True)
    return stats
