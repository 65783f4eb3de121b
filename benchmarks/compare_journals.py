"""Compare two measure journals row by row: the rows both measured, their reject reasons, and
the ratio of their eager and TorchInductor medians (after / before).

    python benchmarks/compare_journals.py BEFORE.jsonl[.xz] AFTER.jsonl[.xz] [--json OUT]

A journal is ``OUT/measure/_journal.jsonl`` of a run (or a copy taken while it ran: see
``benchmarks/gpu/throughput.py``); rows are matched by their journal key (problem id, code,
inputs). Prints the counts and the 10/25/50/75/90th percentiles of each ratio.
"""

from __future__ import annotations

import argparse
import json
import lzma
from pathlib import Path


def read_journal(path: Path) -> dict[str, dict]:
    """Journal key -> result (the last entry wins, as when the stage resumes)."""
    opener = lzma.open if path.suffix == ".xz" else open
    out: dict[str, dict] = {}
    with opener(path, "rt") as f:
        for line in list(f)[1:]:
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by the kill
            out[item["key"]] = item["value"]
    return out


def quantiles(xs: list[float]) -> list[float] | None:
    xs = sorted(xs)
    return [round(xs[int(p * (len(xs) - 1))], 3) for p in (0.1, 0.25, 0.5, 0.75, 0.9)] if xs else None


def compare(before: dict[str, dict], after: dict[str, dict]) -> dict:
    common = [k for k in before if k in after]
    kept = [k for k in common if before[k].get("reason") is None and after[k].get("reason") is None]

    def ratios(key: str) -> list[float]:
        return [after[k][key]["median_ms"] / before[k][key]["median_ms"] for k in kept
                if (after[k].get(key) or {}).get("median_ms") and (before[k].get(key) or {}).get("median_ms")]

    eager, inductor = ratios("eager"), ratios("compile")
    return {
        "before_rows": len(before), "after_rows": len(after), "common_rows": len(common),
        "kept_both": len(kept), "same_reason": sum(before[k].get("reason") == after[k].get("reason")
                                                    for k in common),
        "eager_ratio_p10_p25_p50_p75_p90": quantiles(eager),
        "eager_within_5pct": sum(abs(x - 1) <= 0.05 for x in eager),
        "inductor_ratio_p10_p25_p50_p75_p90": quantiles(inductor),
        "inductor_within_5pct": sum(abs(x - 1) <= 0.05 for x in inductor),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    report = compare(read_journal(args.before), read_journal(args.after))
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
