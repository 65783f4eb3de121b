"""Dedup benchmark: throughput, precision and recall against exact Jaccard, planted copies.

Usage::

    python -m curate.bench.dedup                       # corpus from the transformers and timm wheels
    python -m curate.bench.dedup --table RUN/mine      # a mined table instead (repeatable)
    python -m curate.bench.dedup --packages timm==1.0.31 --sample 3000 --repeat 3

The corpus. ``--table`` reads stage tables (:func:`curate.table.read_problems`). Otherwise
every ``nn.Module`` class of the ``--packages`` wheels (``pip download --no-deps``, cached
under ``$CURATE_CACHE`` or ``~/.cache/curate``) becomes a problem file the way ``mine``
writes one: the class with the top-level definitions and imports of its file that it
needs (transitively), a
``class Model(<class>)`` wrapper with a provenance docstring, and a generated inputs block
(where ``mine`` would copy a definition from another file of the package, the problem
keeps its import line instead).
No module is run: this is a corpus for dedup, not for measuring.

Figures printed (and written to ``--out`` as JSON when given):

1. throughput of dedup proper (normalize, shingle, sign, LSH, cluster: features with the
   worker pool, banding, the op check and components) and of the whole ``dedup`` stage with
   and without KernelBench decontamination, as problems per second of wall time and per
   CPU-second (this process and its workers), median of ``--repeat`` runs; the machine's
   load average is printed beside them, since other work on a shared machine slows wall
   time and not CPU time. For context: datasketch's signatures and LSH on the same
   documents, and the ``ast`` normalization dedup used before;
2. precision and recall of the near-duplicate pairs against exact Jaccard of the same
   shingle sets at the threshold: exact Jaccard over all pairs is quadratic, so on a
   random sample of ``--sample`` distinct normalized documents, all pairs within it
   (candidates from an exact prefix filter, Bayardo et al. 2007, then exact set
   intersections);
3. recall of planted near-duplicates of real modules (identifiers renamed, methods
   reordered, reformatted, comments and docstrings changed, and all four at once);
4. KernelBench decontamination: every level-1 and level-2 problem planted with its class
   and variables renamed, how many are rejected as contaminated and named right, and
   how many real problems of the corpus are rejected as contaminated (and by which
   problems);
5. side by side (``--only side-by-side``, needs ``pip install 'curate[bench]'``): our
   engine and a rensa + polars path (:func:`polars_features`, :func:`rensa_decide`) on the
   same corpus in the same run, part by part (normalize + shingle, signatures, LSH and
   decision) and end to end, interleaved; what each drops, the rensa path's precision and
   recall against exact Jaccard on its own shingles, and the planted copies it drops.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

# the public names of the parts, importable from here as before the split
from curate.bench.dedup.compare import RENSA_BANDS, polars_features, rensa_decide, side_by_side
from curate.bench.dedup.corpus import (KERNELBENCH, PACKAGES, SPEC, cache_dir, file_problems,
                                       load_corpus, package_corpus, wheel)
from curate.bench.dedup.plant import (PLANTS, plant_kernelbench, planted_rows, recomment, reformat,
                                      rename_identifiers, reorder_methods, user_names)
from curate.bench.dedup.quality import exact_pairs, kernelbench_planted, planted_recall, precision_recall
from curate.bench.dedup.timing import cpu_seconds, dedup_proper, throughput, timed


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m curate.bench.dedup",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--table", action="append", default=[], help="a stage folder or parquet (repeatable)")
    p.add_argument("--packages", nargs="+", default=list(PACKAGES), help="wheels to build the corpus from")
    p.add_argument("--threshold", type=float, default=0.8)
    p.add_argument("--num-perm", type=int, default=128)
    p.add_argument("--workers", type=int, default=None)
    p.add_argument("--parallel-min", type=int, default=None,
                   help="documents from which dedup starts worker processes "
                        "(default: curate.dedup.features.PARALLEL_MIN)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--sample", type=int, default=3000, help="documents for precision/recall")
    p.add_argument("--context-sample", type=int, default=500)
    p.add_argument("--planted", type=int, default=300, help="modules to plant copies of")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kernelbench", type=Path, default=KERNELBENCH)
    p.add_argument("--only", nargs="+",
                   default=["throughput", "precision", "planted", "kernelbench", "side-by-side"])
    p.add_argument("--out", type=Path, default=None, help="write the figures here as JSON")
    args = p.parse_args(argv)
    if args.parallel_min is not None:
        from curate.dedup import features

        features.PARALLEL_MIN = args.parallel_min

    t = time.monotonic()
    df = load_corpus(args.table, tuple(args.packages))
    print(f"corpus: {df.height} problems, {df['code'].str.len_bytes().sum() / 1e6:.1f} MB "
          f"({time.monotonic() - t:.1f} s to load or build)", flush=True)
    figures: dict[str, Any] = {"corpus": args.table or args.packages}
    for name, fn in (("throughput", throughput), ("precision", precision_recall),
                     ("planted", planted_recall), ("kernelbench", kernelbench_planted),
                     ("side-by-side", side_by_side)):
        if name in args.only:
            figures[name] = fn(df, args)
            print(f"\n== {name}\n{json.dumps(figures[name], indent=1, default=str)}", flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=1, default=str))
    return figures

