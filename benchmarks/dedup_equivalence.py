"""Compare dedup's token features with those of an earlier revision, document by document.

Usage::

    python benchmarks/dedup_equivalence.py [REVISION]   # default 5327319 (polars/numpy tokens)

Loads ``curate/dedup/tokens.py`` of ``REVISION`` (``git show``) as a separate module and
runs both on the benchmark corpus (``curate.bench.dedup``, cached) in batches of 256:
normalized hash, tokens per document, shingle hashes (in order), op ids and errors, and
prints the documents where any differs, with the two errors. Its signatures are compared
through rensa itself (the earlier revision signed with the rensa package).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from curate.bench.dedup import PACKAGES, load_corpus
from curate.dedup import rminhash
from curate.dedup import tokens as new


def load_revision(rev: str):
    root = Path(__file__).resolve().parents[1]
    src = subprocess.run(["git", "show", f"{rev}:curate/dedup/tokens.py"], cwd=root,
                         check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "tokens_then.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("tokens_then", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["tokens_then"] = module
    spec.loader.exec_module(module)
    return module


def main(rev: str = "5327319") -> int:
    from rensa import RMinHash

    old = load_revision(rev)
    codes = load_corpus([], PACKAGES)["code"].to_list()
    differ: dict[str, list[int]] = {k: [] for k in ("norm_hash", "n_tokens", "shingles", "ops",
                                                      "error", "signature")}
    errors = []
    for s in range(0, len(codes), 256):
        a, b = old.normalize_batch(codes[s:s + 256]), new.normalize_batch(codes[s:s + 256])
        theirs = np.array(RMinHash.digest_matrix_from_flat_token_hashes(
            a.shingles, a.shingle_offsets.astype(np.uint64), 128, 1).to_rows(), dtype=np.uint32)
        ours = rminhash.sign(b.shingles, b.shingle_offsets, 128, 1)
        for i in range(len(a)):
            d = s + i
            checks = {
                "norm_hash": a.norm_hash[i] == b.norm_hash[i],
                "n_tokens": a.n_tokens[i] == b.n_tokens[i],
                "shingles": np.array_equal(a.shingles[a.shingle_offsets[i]:a.shingle_offsets[i + 1]],
                                           b.shingles[b.shingle_offsets[i]:b.shingle_offsets[i + 1]]),
                "ops": a.op_names(i) == b.op_names(i),
                "error": a.error[i] == b.error[i],
                "signature": np.array_equal(theirs[i], ours[i]),
            }
            for k, ok in checks.items():
                if not ok:
                    differ[k].append(d)
            if a.error[i] != b.error[i]:
                errors.append((d, a.error[i], b.error[i]))
    print(f"{len(codes)} documents; documents that differ from {rev}:")
    for k, v in differ.items():
        print(f"  {k}: {len(v)}")
    same_otherwise = set().union(*differ.values()) - {d for d, _, _ in errors}
    print(f"  differing where the error did not change: {len(same_otherwise)}")
    for d, x, y in errors:
        print(f"  {d}: {x!r} -> {y!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
