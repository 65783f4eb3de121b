"""Mining throughput before (and optionally with) input synthesis.

    python -m curate.bench.mine                       # transformers 5.23.0 + timm 1.0.31 wheels
    python -m curate.bench.mine --manifest manifests/pypi-pytorch.yaml --workers 2 --repeat 3
    python -m curate.bench.mine --synthesize 40       # plus synthesis of 40 candidates
    python -m curate.bench.mine --executor ray        # the same phases on a local Ray instance

Runs the mine stage's own phases (:mod:`curate.mine.scan`, :func:`curate.mine.closures`)
on whole packages (the manifest's ``include`` globs are dropped unless ``--keep-include``)
and prints, per phase, seconds and rates, the median of ``--repeat`` runs:

- ``resolve``: locate the (cached) download and list the files;
- ``prefilter``: read every file, keep those with a top-level ``class Name(``;
- ``index``: parse the kept files with ``ast`` (libcst where ``ast`` cannot) in parallel;
- ``classes``: resolve bases to ``torch.nn.Module`` (indexing skipped files on demand);
- ``closure``: build each module class's self-contained source.

``files/s`` is all files of the sources over the sum of the phases; ``classes/s`` is the
``nn.Module`` classes found over the same time. ``--libcst-sample N`` also times the index
and libcst's (the previous indexer) on the same N files with module classes, spread over
the sources, with the same executor.
``--synthesize N`` then runs sandboxed synthesis on the first N candidates whose closure
was built (spread over the sources) and prints modules/s and the yield.
The first run downloads the wheels into the cache (not timed as a figure: use ``--repeat``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from curate.executor import EXECUTORS, Executor, make_executor

DEFAULT_SOURCES = [{"kind": "pypi", "name": "transformers", "version": "5.23.0"},
                   {"kind": "pypi", "name": "timm", "version": "1.0.31"}]
PHASES = ("resolve", "prefilter", "index", "classes", "closure")


def _cst_index(item: tuple[str, str, bool]) -> bool:
    from curate.mine.index_cst import index_source_cst

    path, module, is_pkg = item
    try:
        index_source_cst(Path(path).read_text(errors="replace"), module, is_pkg)
        return True
    except Exception:
        return False


def one_run(entries: list[dict], ex: Executor, cache: Path) -> dict[str, Any]:
    """Mine ``entries`` up to (not including) synthesis; figures and the built tasks."""
    from curate.mine import closures
    from curate.mine.deps import dependency_roots
    from curate.mine.scan import scan
    from curate.mine.sources import SourceUnavailable, resolve

    from curate.mine.scan import cpu_time

    sec = dict.fromkeys(PHASES, 0.0)
    cpu = dict.fromkeys(PHASES, 0.0)
    counts: Counter = Counter()
    reasons: Counter = Counter()
    tasks, scans = [], []
    for entry in entries:
        t, c = time.monotonic(), cpu_time(ex)
        try:
            source = resolve(entry, cache)
        except SourceUnavailable as exc:
            counts["unavailable"] += 1
            print(f"skipped {entry['name']}: {str(exc)[-200:]}", file=sys.stderr)
            continue
        files = source.files()
        deps = dependency_roots(entry, cache)
        sec["resolve"] += time.monotonic() - t
        cpu["resolve"] += cpu_time(ex) - c
        found = scan(source, ex, files, deps)
        for k, v in found.seconds.items():
            sec[k] += v
            cpu[k] += found.cpu_seconds[k]
        t, c = time.monotonic(), cpu_time(ex)
        built = closures(found, executor=ex)
        sec["closure"] += time.monotonic() - t
        cpu["closure"] += cpu_time(ex) - c
        counts["files"] += found.files
        counts["bytes"] += sum(f.stat().st_size for f in files)
        counts["skipped"] += len(found.skipped)
        counts["indexed"] += found.eager
        counts["syntax_errors"] += len(found.broken)
        counts["on_demand"] += found.indexed_on_demand
        counts["classes"] += found.classes
        counts["module_classes"] += len(found.candidates)
        for _, task in built:
            if len(task) == 2:
                reasons[task[0]] += 1
            else:
                counts["closures_ok"] += 1
        tasks.append([(row, task) for row, task in built if len(task) != 2])
        scans.append(found)
    return {"seconds": sec, "cpu": cpu, "counts": counts, "closure_rejects": reasons, "tasks": tasks, "scans": scans}


def _spread(per_source: list[list], n: int) -> list:
    """Up to ``n`` items taking from each source's list in turn."""
    out, i = [], 0
    while len(out) < n and any(i < len(lst) for lst in per_source):
        out += [lst[i] for lst in per_source if i < len(lst)][: n - len(out)]
        i += 1
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--manifest", help="mine manifest (default: transformers 5.23.0 and timm 1.0.31)")
    ap.add_argument("--only", default="", help="comma-separated source names of the manifest")
    ap.add_argument("--keep-include", action="store_true", help="keep the manifest's include globs")
    ap.add_argument("--executor", choices=EXECUTORS, default="local")
    ap.add_argument("--ray-address", default=None)
    ap.add_argument("--workers", type=int, default=None, help="processes (default: all cores)")
    ap.add_argument("--repeat", type=int, default=3, help="runs; the median is printed")
    ap.add_argument("--cache", type=Path, default=None, help="download cache (default: curate's)")
    ap.add_argument("--libcst-sample", type=int, default=0, help="also time libcst on N kept files")
    ap.add_argument("--synthesize", type=int, default=0, help="synthesize N candidates afterwards")
    ap.add_argument("--timeout-s", type=float, default=30.0)
    args = ap.parse_args(argv)

    from curate.mine import default_cache
    from curate.mine.sources import load_manifest

    entries = load_manifest(args.manifest) if args.manifest else DEFAULT_SOURCES
    only = {s for s in args.only.split(",") if s}
    entries = [e for e in entries if not only or e["name"] in only]
    if not args.keep_include:
        entries = [{k: v for k, v in e.items() if k != "include"} for e in entries]
    cache = args.cache or default_cache()
    with make_executor(args.executor, args.workers, args.ray_address) as ex:
        print(f"executor {ex.kind}, {ex.workers} workers; sources: "
              + ", ".join(f"{e['name']} {e.get('version', '')}".strip() for e in entries), flush=True)
        runs = []
        for r in range(max(1, args.repeat)):
            runs.append(one_run(entries, ex, cache))
            s = runs[-1]["seconds"]
            print(f"run {r + 1}: {sum(s.values()):.1f} s (" + ", ".join(f"{k} {v:.1f}" for k, v in s.items())
                  + ")", flush=True)
        last = runs[-1]
        c = last["counts"]
        med = {k: statistics.median(run["seconds"][k] for run in runs) for k in PHASES}
        cpu = {k: statistics.median(run["cpu"][k] for run in runs) for k in PHASES}
        total = statistics.median(sum(run["seconds"].values()) for run in runs)
        total_cpu = statistics.median(sum(run["cpu"].values()) for run in runs)
        print(f"\nfiles {c['files']} ({c['bytes'] / 1e6:.1f} MB): prefilter kept {c['indexed'] + c['syntax_errors']}, "
              f"skipped {c['skipped']}; {c['syntax_errors']} do not parse; {c['on_demand']} skipped files "
              f"indexed on demand")
        print(f"classes {c['classes']}, nn.Module subclasses {c['module_classes']}, closures built "
              f"{c['closures_ok']} (" + ", ".join(f"{k} {v}" for k, v in last["closure_rejects"].most_common())
              + ")")
        print(f"\n{'phase':<10} {'seconds':>8} {'rate':>26} {'CPU s':>8}   (median of {len(runs)})")
        rates = {"resolve": (c["files"], "files"), "prefilter": (c["files"], "files"),
                 "index": (c["indexed"] + c["syntax_errors"], "files"),
                 "classes": (c["classes"], "classes"), "closure": (c["module_classes"], "closures")}
        for k in PHASES:
            n, unit = rates[k]
            print(f"{k:<10} {med[k]:>8.2f} {n / max(med[k], 1e-9):>18.0f} {unit + '/s':<12} {cpu[k]:>6.2f}")
        print(f"{'total':<10} {total:>8.2f} {c['files'] / total:>18.1f} files/s, "
              f"{c['module_classes'] / total:.1f} module classes/s, {c['bytes'] / 1e6 / total:.2f} MB/s")
        if ex.kind == "local":
            print(f"CPU time {total_cpu:.1f} s: {c['files'] / total_cpu:.1f} files per CPU-second, "
                  f"{ex.workers * c['files'] / total_cpu:.1f} files/s on {ex.workers} unshared cores")

        if args.libcst_sample:
            from curate.mine.closure import module_name
            from curate.mine.scan import index_file

            items = []
            for found in last["scans"]:
                for rel in sorted({rel for rel, _, _ in found.candidates}):
                    mod, pkg = module_name(found.source.root, found.source.root / rel)
                    items.append((str(found.source.root / rel), mod, pkg))
            items = items[:: max(1, len(items) // args.libcst_sample)][: args.libcst_sample]  # spread
            for label, fn in (("ast (libcst fallback)", index_file), ("libcst", _cst_index)):
                t = time.monotonic()
                list(ex.map(fn, items, chunksize=4))
                dt = time.monotonic() - t
                print(f"{label} index of the same {len(items)} files with module classes "
                      f"({sum(Path(i[0]).stat().st_size for i in items) / 1e6:.1f} MB): {dt:.1f} s, "
                      f"{len(items) / dt:.1f} files/s")

        if args.synthesize:
            from curate.mine.synthesize import synthesize_task
            from curate.sandbox import FILESYSTEM, NETWORK, PROCESS

            picked = _spread(last["tasks"], args.synthesize)
            calls = [((*task[:3], args.timeout_s * 0.8), {}) for _, task in picked]
            t = time.monotonic()
            outcomes = dict(ex.sandboxed(synthesize_task, calls, timeout_s=args.timeout_s, mem_mb=4096,
                                         guard=True))
            dt = time.monotonic() - t
            reasons = Counter()
            for i, o in sorted(outcomes.items()):
                v = o.value if o.ok else {"ok": False, "reason": o.status}
                reasons["kept" if v["ok"] else v["reason"]] += 1
                if o.status in (NETWORK, FILESYSTEM, PROCESS):  # what the guard refused, to review
                    print(f"  {o.status}: {picked[i][0]['name']}: {o.error[:200]}")
            print(f"\nsynthesis of {len(calls)} candidates: {dt:.1f} s, {len(calls) / dt:.2f} modules/s, "
                  f"yield {reasons['kept'] / max(1, len(calls)):.0%} ("
                  + ", ".join(f"{k} {v}" for k, v in reasons.most_common()) + ")")


if __name__ == "__main__":
    main(sys.argv[1:])
