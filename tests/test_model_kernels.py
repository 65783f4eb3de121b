"""The public corpus of model-written KernelBench kernels (tests/data/model_kernels) on the CPU.

The kernels target CUDA devices (they allocate on ``"cuda"`` and assert ``x.is_cuda``), so they
are verified in full only on a GPU (``benchmarks/model_kernels.py``, beside KernelBench's own
evaluator). What runs here is the reward's first, in-process layer on every one of them: the
reply's program is extracted and checked for a syntax error or a missing ``ModelNew`` without
running anything, and that layer must never reject what a real evaluator built.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from curate.rl.score import precheck
from curate.verify import extract_code

CORPUS = Path(__file__).resolve().parent / "data" / "model_kernels" / "kernels.jsonl"
RECORDS = [json.loads(line) for line in CORPUS.open() if line.strip()]


def test_corpus_holds_real_kernels_with_published_verdicts():
    assert len(RECORDS) >= 100
    assert len({r["id"] for r in RECORDS}) == len(RECORDS)
    backends = Counter(r["backend"] for r in RECORDS)
    assert backends["cuda"] >= 100 and backends["triton"] >= 20
    verdicts = Counter(r["published"].get("correct") for r in RECORDS)
    assert verdicts[True] >= 50 and verdicts[False] >= 50  # right and wrong kernels both
    assert all(r["origin"]["repo"] and r["origin"]["commit"] for r in RECORDS)


def test_cheap_rejection_agrees_with_the_publishers():
    rejected, built_but_rejected = [], []
    for r in RECORDS:
        why = precheck(extract_code(f"Here is my kernel.\n\n```python\n{r['code']}\n```\n"))
        if why is not None:
            rejected.append(r["id"])
            if r["published"].get("compiled"):
                built_but_rejected.append((r["id"], why))
    assert not built_but_rejected  # nothing a real evaluator compiled is turned away unrun
    assert len(rejected) >= 20  # the syntax errors and missing ModelNew classes models write
    published = Counter(next(x for x in RECORDS if x["id"] == i)["published"].get("compiled") for i in rejected)
    assert published[True] == 0 and published[False] >= 10
