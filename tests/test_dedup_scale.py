"""Dedup at scale, on real code: planted near-duplicates of torch's own modules, every
KernelBench level-1 and level-2 problem planted under other names, the worker pool, the
datasketch backend, LSH banding, and the exact-Jaccard ground truth of the benchmark.

Real source: every ``nn.Module`` class of torch's ``torch/nn/modules`` files (installed
torch), rendered as problems the way the benchmark renders a package's classes.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch

from curate.bench.dedup import PLANTS, exact_pairs, file_problems, plant_kernelbench, planted_rows
from curate.dedup import run
from curate.dedup import features as features_module
from curate.dedup.features import featurize_table
from curate.dedup.minhash import (EMPTY, band_pairs, band_shape, candidate_arrays, components,
                                  low32, sign)
from curate.dedup.tokens import OP_NAMES, normalize_batch
from curate.table import read_problems, read_rejected, read_stats, write_stage

from curate.data import KERNELBENCH_PROBLEMS as KERNELBENCH
needs_kernelbench = pytest.mark.skipif(not KERNELBENCH.is_file(),
                                       reason=f"KernelBench copy not found at {KERNELBENCH}")
TORCH_NN = Path(torch.__file__).parent / "nn" / "modules"


def torch_problems() -> pl.DataFrame:
    """Every nn.Module class of torch/nn/modules/*.py as a problem (about 150)."""
    rows = []
    for path in sorted(TORCH_NN.glob("*.py")):
        module = f"torch.nn.modules.{path.stem}"
        for cls, code in file_problems(path.read_text(), f"torch/nn/modules/{path.name}", module):
            rows.append({"problem_id": f"{path.stem}::{cls}", "name": f"torch.{cls}", "code": code})
    return pl.DataFrame(rows)


def run_stage(tmp_path: Path, frame: pl.DataFrame, **kwargs) -> tuple[dict, pl.DataFrame]:
    write_stage(tmp_path, "mine", frame, pl.DataFrame(), frame.height, 0.0)
    stats = run(out=tmp_path, **kwargs)
    every = pl.concat([read_problems(tmp_path / "dedup"), read_rejected(tmp_path / "dedup")],
                      how="diagonal_relaxed")
    return stats, every


@pytest.fixture(scope="module")
def torch_df() -> pl.DataFrame:
    df = torch_problems()
    assert df.height >= 100
    return df


def test_planted_near_duplicates_of_real_modules_are_found(tmp_path: Path, torch_df: pl.DataFrame):
    rows, origin = planted_rows(torch_df, 60, seed=3)
    kinds = {p.split("/")[1] for p in origin}
    assert kinds == set(PLANTS)  # every kind of edit was planted
    frame = pl.concat([torch_df, pl.DataFrame(rows)])
    stats, every = run_stage(tmp_path, frame, kernelbench="none")
    cluster = dict(zip(every["problem_id"].to_list(), every["dedup_cluster"].to_list()))
    for kind in PLANTS:
        ids = [p for p in origin if p.split("/")[1] == kind]
        found = sum(cluster[p] is not None and cluster[p] == cluster[origin[p]] for p in ids)
        assert found >= 0.95 * len(ids), (kind, found, len(ids))
    # the planted copies are rejected as duplicates, the originals' clusters stay apart
    reasons = dict(zip(every["problem_id"].to_list(), every["reject_reason"].to_list()))
    assert sum(reasons[p] in ("exact_duplicate", "near_duplicate") or
               every.filter(pl.col("problem_id") == p)["is_representative"][0] for p in origin) == len(origin)
    originals = every.filter(~pl.col("problem_id").str.starts_with("planted/"))
    # torch.nn has real near-duplicates (Conv1d/2d/3d, the pooling and loss families),
    # but most of its modules stay apart, and ones a single op apart are not merged
    assert originals["dedup_cluster"].n_unique() >= 0.65 * originals.height
    of = dict(zip(originals["name"].to_list(), originals["dedup_cluster"].to_list()))
    assert len({of["torch.ReLU"], of["torch.Mish"], of["torch.SiLU"], of["torch.GELU"],
                of["torch.Tanh"], of["torch.Sigmoid"]}) == 6
    assert len({of["torch.Linear"], of["torch.Bilinear"], of["torch.Conv2d"],
                of["torch.LayerNorm"], of["torch.TransformerEncoderLayer"]}) == 5
    assert stats["unparseable"] == 0


@needs_kernelbench
def test_every_planted_kernelbench_problem_is_contaminated(tmp_path: Path, torch_df: pl.DataFrame):
    kb = [json.loads(line) for line in KERNELBENCH.read_text().splitlines() if line.strip()]
    kb = [r for r in kb if int(r["level"]) in (1, 2)]
    assert len(kb) == 200
    planted = pl.DataFrame([{"problem_id": f"kb/{k}", "name": "planted",
                             "code": plant_kernelbench(r["code"], k)} for k, r in enumerate(kb)])
    # the planted copy reads differently from the original: class and variables renamed
    assert "class Model(nn.Module)" not in planted["code"][0]
    stats, every = run_stage(tmp_path, pl.concat([torch_df, planted]), kernelbench=str(KERNELBENCH))
    rows = {r["problem_id"]: r for r in every.iter_rows(named=True)}
    for k, r in enumerate(kb):
        got = rows[f"kb/{k}"]
        label = f"level{r['level']}/{r['name']}"
        assert got["reject_reason"] == "contaminated", (label, got["reject_reason"])
        # named: the problem itself, or a reference twin of the same normalized code
        assert got["contaminated_by"] == label or label in got["reject_detail"], (label, got["reject_detail"])
    real = every.filter(~pl.col("problem_id").str.starts_with("kb/"))
    wrong = real.filter(pl.col("reject_reason") == "contaminated")
    assert wrong.height <= 0.02 * real.height, wrong.select("name", "contaminated_by").rows()
    assert stats["contaminated"] == 200 + wrong.height


def test_the_pool_computes_what_this_process_computes(tmp_path: Path, torch_df: pl.DataFrame,
                                                      monkeypatch):
    codes = torch_df["code"]
    serial = featurize_table(codes, 64, workers=1)
    parallel = featurize_table(codes, 64, workers=2, parallel_min=1, chunk=16, share=False)
    assert parallel.chunks_in_workers == -(-len(codes) // 16)  # worker processes took them all
    shared = featurize_table(codes, 64, workers=2, parallel_min=1, chunk=16)
    assert shared.norm_hash == serial.norm_hash and np.array_equal(shared.sigs, serial.sigs)
    assert serial.norm_hash == parallel.norm_hash
    assert np.array_equal(serial.sigs, parallel.sigs)
    assert np.array_equal(serial.ops, parallel.ops)
    # the stage uses the pool from PARALLEL_MIN documents on, with the same result
    one = run_stage(tmp_path / "one", torch_df, kernelbench="none", workers=1)
    monkeypatch.setattr(features_module, "PARALLEL_MIN", 1)
    monkeypatch.setattr(features_module, "CHUNK", 32)
    two = run_stage(tmp_path / "two", torch_df, kernelbench="none", workers=2)
    assert one[0]["chunks_in_workers"] == 0 and two[0]["workers"] == 2
    cols = ["problem_id", "dedup_cluster", "is_representative", "norm_hash", "reject_reason"]
    assert one[1].select(cols).sort("problem_id").equals(two[1].select(cols).sort("problem_id"))


def test_datasketch_backend_signatures_interchange_with_datasketch(tmp_path: Path, torch_df: pl.DataFrame):
    from datasketch import MinHash

    batch = normalize_batch(torch_df["code"].to_list()[:20])
    sigs = sign(batch.shingles, batch.shingle_offsets, 64, backend="datasketch")
    for i in (0, 7, 19):
        m = MinHash(num_perm=64, hashfunc=low32)
        m.update_batch(batch.shingles[batch.shingle_offsets[i]:batch.shingle_offsets[i + 1]].tolist())
        assert np.array_equal(sigs[i], m.hashvalues)
    empty = sign(np.zeros(0, np.uint64), np.zeros(2, np.int64), 16, backend="datasketch")
    assert (empty == EMPTY).all()
    rows, origin = planted_rows(torch_df, 10, seed=5)
    frame = pl.concat([torch_df, pl.DataFrame(rows)])
    _, every = run_stage(tmp_path, frame, kernelbench="none", backend="datasketch")
    cluster = dict(zip(every["problem_id"].to_list(), every["dedup_cluster"].to_list()))
    found = sum(cluster[p] == cluster[o] for p, o in origin.items())
    assert found >= 0.95 * len(origin)
    with pytest.raises(ValueError, match="backend"):
        run(out=tmp_path, kernelbench="none", backend="simhash")


def test_banding_and_components(torch_df: pl.DataFrame):
    assert band_shape(0.8, 128) == (21, 6)  # P(candidate | J = 0.8) = 0.998
    bands, rows = band_shape(0.6, 128)
    assert 1 - (1 - 0.6 ** rows) ** bands >= 0.995
    feats = featurize_table(torch_df["code"], 128, workers=1)
    i, j = band_pairs(feats.sigs, 21, 6)
    assert (i < j).all() and len(set(zip(i.tolist(), j.tolist()))) == len(i)
    # every pair equal in some band is proposed: compare with brute force
    n = len(feats.sigs)
    a, b = np.triu_indices(n, 1)
    band_eq = np.zeros(len(a), dtype=bool)
    for k in range(21):
        band_eq |= (feats.sigs[a, 6 * k:6 * k + 6] == feats.sigs[b, 6 * k:6 * k + 6]).all(axis=1)
    assert set(zip(a[band_eq].tolist(), b[band_eq].tolist())) == set(zip(i.tolist(), j.tolist()))
    x, y, sim = candidate_arrays(feats.sigs, 0.8)
    assert (sim >= 0.8).all() and len(x) > 0
    # components: the smallest member labels each, as a plain union-find says
    rng = random.Random(0)
    edges = [(rng.randrange(300), rng.randrange(300)) for _ in range(250)]
    label = components(300, (np.array([e[0] for e in edges]), np.array([e[1] for e in edges])))
    parent = list(range(300))

    def find(v: int) -> int:
        while parent[v] != v:
            v = parent[v]
        return v

    for u, v in edges:
        ru, rv = find(u), find(v)
        parent[max(ru, rv)] = min(ru, rv)
    assert label.tolist() == [find(v) for v in range(300)]


def test_exact_pairs_is_exact(torch_df: pl.DataFrame):
    batch = normalize_batch(torch_df["code"].to_list())
    sets = [batch.shingle_set(i) for i in range(len(batch))]
    got = exact_pairs(sets, 0.7)
    brute = {}
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            inter = len(np.intersect1d(sets[i], sets[j]))
            jac = inter / (len(sets[i]) + len(sets[j]) - inter)
            if jac >= 0.7:
                brute[(i, j)] = jac
    assert got.keys() == brute.keys() and len(brute) > 0


def test_vocabulary_covers_the_installed_torch():
    from curate.dedup import vocab

    fresh = vocab.build()
    ops = set(fresh["ops"])
    assert len(ops & set(vocab.load()["ops"])) >= 0.95 * len(ops)
    assert {"conv2d", "relu", "layernorm", "matmul", "softmax", "linear"} <= set(OP_NAMES)
