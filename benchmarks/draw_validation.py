"""Draw the held-out validation corpus (``manifests/validation.yaml``) once, at random.

The corpus measures whether mining generalizes: PyPI projects built on PyTorch that
``manifests/pypi-pytorch.yaml`` does not name (neither as a source nor as a ``deps`` entry).
Stand-ins and repairs are never written for one of its packages alone; it is drawn once and
frozen, so before/after yields compare the same list.

How it is drawn (reproducible from the same package list and seed):

1. The pool: every project of a PyPI name list (a TSV with columns ``name``, ``version``,
   ``month``, ``rank``, ``summary``; one row a project, its newest version) whose name or summary
   mentions ``torch`` or ``pytorch`` as a word or a name part, less the manifest's names.
   The list is read locally; the registry is not enumerated.
2. A seeded shuffle of the pool (``random.Random(seed)``, default seed 23).
3. In shuffled order, each project is downloaded at the list's version (pip, no install, as the
   miner does) and kept when its metadata's ``Requires-Dist`` names ``torch`` and the mine stage's
   own scan finds at least one ``nn.Module`` class in it; otherwise it is skipped with the reason.
   Drawing stops at ``--count`` kept projects (default 60).

    python benchmarks/draw_validation.py PYPI_LIST.tsv --out manifests/validation.yaml

The output lists the kept projects with pinned versions and, as comments, the skipped ones.
"""

from __future__ import annotations

import argparse
import csv
import random
import re
import sys
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from curate.executor import make_executor
from curate.mine import default_cache
from curate.mine.deps import dependency_roots
from curate.mine.scan import scan
from curate.mine.sources import SourceUnavailable, _pypi, load_manifest, resolve

TORCH_WORD = re.compile(r"(^|[^a-z])(py)?torch([^a-z]|$)", re.I)


def manifest_names(path: str) -> set[str]:
    """Canonical names of a manifest's sources and of their ``deps``."""
    out = set()
    for entry in load_manifest(path):
        out.add(canonicalize_name(entry["name"]))
        for dep in entry.get("deps") or ():
            out.add(canonicalize_name(dep["name"]))
    return out


def pool(tsv: str, exclude: set[str]) -> list[tuple[str, str]]:
    """``(name, version)`` of the list's projects mentioning torch, sorted by name."""
    rows = []
    with open(tsv, newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            name, summary = row.get("name") or "", row.get("summary") or ""
            if not name or canonicalize_name(name) in exclude or name.lower() in {"torch", "pytorch"}:
                continue
            if TORCH_WORD.search(name) or TORCH_WORD.search(summary):
                rows.append((name, row["version"]))
    return sorted(set(rows))


def requires_torch(name: str, version: str) -> bool:
    """Whether the release's metadata (as downloaded) has a ``Requires-Dist`` naming torch."""
    _, dist = _pypi(name, version, default_cache() / "pypi")
    for line in dist.requires or ():
        try:
            if canonicalize_name(Requirement(line).name) == "torch":
                return True
        except InvalidRequirement:
            continue
    return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pypi_list", help="TSV of PyPI projects: name, version, month, rank, summary")
    ap.add_argument("--manifest", default="manifests/pypi-pytorch.yaml")
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--count", type=int, default=60)
    ap.add_argument("--out", default="manifests/validation.yaml")
    args = ap.parse_args()
    candidates = pool(args.pypi_list, manifest_names(args.manifest))
    order = candidates[:]
    random.Random(args.seed).shuffle(order)
    ex = make_executor("local", 2)
    kept: list[tuple[str, str, int]] = []
    skipped: list[tuple[str, str, str]] = []
    for name, version in order:
        if len(kept) >= args.count:
            break
        entry = {"kind": "pypi", "name": name, "version": version}
        try:
            if not requires_torch(name, version):
                skipped.append((name, version, "Requires-Dist does not name torch"))
                continue
            source = resolve(entry, default_cache())
            found = scan(source, ex, None, dependency_roots(entry, default_cache()))
        except SourceUnavailable as exc:
            skipped.append((name, version, f"unavailable: {str(exc)[:80]}"))
            continue
        except Exception as exc:  # noqa: BLE001 - a broken archive is a skipped draw, not a crash
            skipped.append((name, version, f"{type(exc).__name__}: {str(exc)[:80]}"))
            continue
        if not found.candidates:
            skipped.append((name, version, "no nn.Module class"))
            continue
        kept.append((name, version, len(found.candidates)))
        print(f"kept {len(kept):3d} {name}=={version}: {len(found.candidates)} classes", file=sys.stderr, flush=True)
    ex.close()
    lines = [
        "# Held-out validation corpus for mining yield: never tune stand-ins or repairs on it.",
        f"# Drawn by benchmarks/draw_validation.py (seed {args.seed}): a seeded shuffle of the {len(candidates)}",
        "# PyPI projects whose name or summary mentions torch/pytorch in a PyPI name list, less the",
        f"# names in {args.manifest}; in that order, kept when the release's Requires-Dist names torch",
        f"# and the mine scan finds an nn.Module class, until {args.count} were kept. Versions pinned.",
        f"# {len(kept) + len(skipped)} draws: {len(kept)} kept, {len(skipped)} skipped (listed at the end).",
        "sources:",
    ]
    lines += [f"  - {{kind: pypi, name: {n}, version: \"{v}\"}}  # {c} nn.Module classes" for n, v, c in kept]
    lines.append("# skipped draws:")
    lines += [f"#   {n}=={v}: {' '.join(why.split())}" for n, v, why in skipped]  # one line each
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}: {len(kept)} kept, {len(skipped)} skipped of {len(candidates)} in the pool")


if __name__ == "__main__":
    main()
