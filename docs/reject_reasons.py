"""List every reject reason the code can produce, with where it is produced.

Usage::

    python docs/reject_reasons.py          # reason, then the files and lines that produce it

Reasons are read from the source by the patterns below (a reason is a lower-case literal
given to a rejection or returned as one); ``tests/test_reject_reasons.py`` checks the tables of
``docs/reject-reasons.md`` against this list both ways.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
R = r'"([a-z][a-z0-9_]+)"'
PATTERNS = [
    # exceptions and helpers that carry a reason
    rf'(?:SynthesisError|ClosureError|_Stop|_failure|dead_result|flag|fail|_fail)\(\s*{R}',
    rf'_failure\([^\n]*?,\s*{R}',
    rf'_classify\([^\n]*?,\s*{R}\)',
    # rows rejected with a literal reason
    rf'(?:rejects|rejections)\.add(?:_frame)?\([^\n]*?,\s*{R}',
    rf'(?:rejects|rejections)\.add\([^\n]*?\bor\s+{R}',
    # reason values in result dicts, attributes and [reason, detail] pairs
    rf'"reason"\]?(?:,\s*res\["detail"\])?\s*[:=]\s*{R}',
    rf'\b(?:reason|status)\s*=\s*{R}',
    rf'\b(?:reason|status)\s*=\s*[^\n]*?\belse\s*{R}',
    rf'reasons\[i\](?:,\s*details\[i\])?\s*=\s*{R}',
    rf'"reject":\s*\[\s*{R}',
    rf'return\s*(?:\[\],\s*)?\[\s*{R},',
    rf'return\s*{R},\s*"',
    rf'"status":\s*{R}',
    rf'\bstep\s*=\s*{R}',
    # reason vocabularies declared as constants
    rf'return\s*{R}\n(?=(?:.*\n){{0,3}}?\s*return default)',
]
CONSTANTS = [  # modules whose tuple/assignment of reason names is the vocabulary
    ("curate/conform.py", r"REASONS = \(([^)]*)\)"),
    ("curate/sandbox.py", r'NETWORK, FILESYSTEM, PROCESS = ([^\n]*)'),
    ("curate/sandbox.py", r'OK, ERROR, TIMEOUT, MEMORY, CRASH = ([^\n]*)'),
]
NOT_REASONS = {"ok", "reason", "detail", "source", "torch", "path", "class_name", "synthesis"}
SKIP = ("curate/bench/", "curate/mine/shims/", "curate/mine/guess.py", "curate/verify/", "curate/rl/")
"""Not stage code (benchmarks, stand-ins), or code whose reasons are not reject reasons
(guess.py's strategy names; the verifier's candidate verdicts)."""


def reasons() -> dict[str, set[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for f in sorted((ROOT / "curate").rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        if rel.startswith(SKIP):
            continue
        text = f.read_text()
        for p in PATTERNS:
            for m in re.finditer(p, text):
                found[m.group(1)].add(f"{rel}:{text.count(chr(10), 0, m.start()) + 1}")
    for rel, p in CONSTANTS:
        text = (ROOT / rel).read_text()
        m = re.search(p, text)
        if m:
            for name in re.findall(R, m.group(1)):
                found[name].add(f"{rel}:{text.count(chr(10), 0, m.start()) + 1}")
    return {k: v for k, v in found.items() if k not in NOT_REASONS}


if __name__ == "__main__":
    for name, where in sorted(reasons().items()):
        print(f"{name:24s} {', '.join(sorted(where))}")
    sys.exit(0)
