"""Data files that ship inside the package (see each folder's README for provenance and licence)."""

from __future__ import annotations

import json
from pathlib import Path

KERNELBENCH_DIR = Path(__file__).resolve().parent / "kernelbench"
KERNELBENCH_PROBLEMS = KERNELBENCH_DIR / "problems.jsonl"
KERNELBENCH_BASELINE = KERNELBENCH_DIR / "baseline_times_h100.json"


def kernelbench_problems() -> list[dict]:
    """KernelBench's levels 1-3 (250 problems) as ``{"level", "problem_id", "name", "code",
    "path"}`` dicts, from the copy shipped in ``curate/data/kernelbench`` (MIT, upstream commit
    423217d)."""
    with KERNELBENCH_PROBLEMS.open() as f:
        return [json.loads(line) for line in f if line.strip()]


def kernelbench_baseline() -> dict[str, dict[str, dict[str, float]]]:
    """KernelBench's published H100 timings: ``{"level1": {name: {"eager_ms", "compile_ms"}}}``
    (milliseconds, NVIDIA H100 80GB HBM3, 100 CUDA-event trials, L2 flushed)."""
    return json.loads(KERNELBENCH_BASELINE.read_text())
