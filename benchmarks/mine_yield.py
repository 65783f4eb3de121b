"""Estimate the mine stage's yield per source from a random sample of its nn.Module classes.

Runs the same steps as ``curate mine`` (scan, closure, guarded sandboxed synthesis) on a seeded random
sample of each source's candidate classes, and prints per source: classes found, sampled,
kept, yield with a 95% Wilson interval, and the top reject reasons. Per-class outcomes go to
``--jsonl`` for analysis.

    .venv/bin/python benchmarks/mine_yield.py manifests/pypi-pytorch.yaml --per-source 60 \
        --jsonl /tmp/yield.jsonl [--only timm,transformers] [--sources 50]

``--sources N`` measures a seeded random sample of N of the manifest's sources (the same N for
the same seed and manifest), for a before/after comparison that fits a small machine.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import time

from curate.bench.stats import wilson
from curate.executor import Executor, make_executor
from curate.mine import default_cache
from curate.mine.closure import ClosureError, Resolver
from curate.mine.declared import DeclaredDependencies, placeholder_packages
from curate.mine.deps import dependency_roots
from curate.mine.scan import scan
from curate.mine.sources import SourceUnavailable, load_manifest, resolve
from curate.mine.synthesize import synthesize_task
from curate.sandbox import FILESYSTEM, NETWORK, PROCESS


def candidates(entry: dict, executor: Executor) -> tuple[object, Resolver, list[tuple[str, str]]]:
    """The source, a resolver over its files (and its manifest ``deps``) and its nn.Module
    classes as (module, class), found by the mine stage's own scan (prefilter, ``ast`` index,
    base-class resolution)."""
    source = resolve(entry, default_cache())
    found = scan(source, executor, None, dependency_roots(entry, default_cache()))
    return source, found.resolver, [(mod, cls) for _, mod, cls in found.candidates]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("manifest")
    ap.add_argument("--per-source", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated source names")
    ap.add_argument("--sources", type=int, default=0, help="a seeded random sample of this many sources")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout-s", type=float, default=30.0)
    ap.add_argument("--jsonl", default="")
    ap.add_argument("--count-only", action="store_true", help="only count nn.Module classes per source")
    args = ap.parse_args()
    only = {s for s in args.only.split(",") if s}
    ex = make_executor("local", args.workers)
    declared = DeclaredDependencies(default_cache())
    out = open(args.jsonl, "w") if args.jsonl else None
    totals = collections.Counter()
    rows = []
    entries = load_manifest(args.manifest)
    if args.sources and args.sources < len(entries):
        picked = {e["name"] for e in random.Random(f"{args.seed}|sources").sample(entries, args.sources)}
        entries = [e for e in entries if e["name"] in picked]
    for entry in entries:
        if only and entry["name"] not in only:
            continue
        t0 = time.monotonic()
        try:
            source, resolver, found = candidates(entry, ex)
        except SourceUnavailable as exc:
            print(f"{entry['name']}: unavailable: {exc}", file=sys.stderr)
            continue
        if args.count_only:
            print(f"{source.name:28s} {source.version:>10s} {str(source.licence)[:30]:30s} files {len(source.files()):5d} "
                  f"classes {len(found):6d}", flush=True)
            totals["found"] += len(found)
            continue
        sample = random.Random(f"{args.seed}|{entry['name']}").sample(found, min(args.per_source, len(found)))
        outcomes: list[tuple[str, str, str]] = []  # (class, reason, detail)
        tasks = []
        for mod, cls in sample:
            try:
                closure = resolver.closure(mod, cls)
            except ClosureError as exc:
                outcomes.append((f"{mod}.{cls}", exc.reason, exc.detail))
                continue
            except RecursionError:
                outcomes.append((f"{mod}.{cls}", "closure_too_deep", ""))
                continue
            tasks.append((f"{mod}.{cls}", (closure.source, cls, "sampled", args.timeout_s * 0.8)))
        # the stage's sandbox: guarded, so network/filesystem/process refusals count as there
        calls = [(a, {}) for _, a in tasks]
        for j, res in ex.sandboxed(synthesize_task, calls, timeout_s=args.timeout_s, mem_mb=4096, guard=True):
            v = res.value if res.ok else {"ok": False, "reason": res.status, "detail": res.error}
            if res.status in (NETWORK, FILESYSTEM, PROCESS):
                print(f"  guard refused {tasks[j][0]}: {res.status}: {res.error[:160]}", file=sys.stderr)
            outcomes.append((tasks[j][0], "kept" if v["ok"] else v["reason"], "" if v["ok"] else v["detail"]))
        # the stage's second try: rejected classes with their declared dependencies' code
        firsts = {name: k for k, (name, _) in enumerate(tasks)}
        rejected = [(tasks[firsts[n]][1][0], n) for n, r, _ in outcomes if r != "kept" and n in firsts
                    and placeholder_packages(tasks[firsts[n]][1][0])]
        items = [(n.rsplit(".", 1)[0], n.rsplit(".", 1)[1], text) for text, n in rejected]
        again = declared.second_closures(resolver, source, items)
        calls = [((text, items[k][1], "sampled", args.timeout_s * 0.8), {}) for k, text in again.items()]
        names = [rejected[k][1] for k in again]
        for j, res in ex.sandboxed(synthesize_task, calls, timeout_s=args.timeout_s, mem_mb=4096, guard=True):
            if res.ok and res.value["ok"]:
                outcomes = [(n, "kept", "") if n == names[j] else (n, r, d) for n, r, d in outcomes]
                print(f"  kept with declared dependencies: {names[j]}", file=sys.stderr)
        reasons = collections.Counter(r for _, r, _ in outcomes)
        kept = reasons.pop("kept", 0)
        n = len(outcomes)
        lo, hi = wilson(kept, n)
        rows.append((source.name, len(found), n, kept, lo, hi, reasons.most_common(4)))
        totals["found"] += len(found)
        totals["n"] += n
        totals["kept"] += kept
        totals["weighted"] += kept / max(n, 1) * len(found)
        print(f"{source.name:28s} found {len(found):5d} sampled {n:3d} kept {kept:3d} "
              f"yield {kept / max(n, 1):5.1%} [{lo:.0%}, {hi:.0%}]  {time.monotonic() - t0:5.0f}s  "
              f"{dict(reasons.most_common(5))}", flush=True)
        if out:
            for name, reason, detail in outcomes:
                out.write(json.dumps({"source": source.name, "class": name, "reason": reason,
                                      "detail": detail[:600]}) + "\n")
            out.flush()
    ex.close()
    if args.count_only:
        print(f"total nn.Module classes: {totals['found']}")
    if totals["n"]:
        print(f"\nsampled {totals['n']} classes, kept {totals['kept']} ({totals['kept'] / totals['n']:.1%}); "
              f"classes found {totals['found']}, estimated runnable {totals['weighted']:.0f} "
              f"({totals['weighted'] / totals['found']:.1%} weighted by classes found)")


if __name__ == "__main__":
    main()
