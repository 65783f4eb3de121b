"""Problem structure (level, category) and the measured difficulty score, on real problems."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from conftest import KERNELBENCH_JSONL
from curate.export.card import structure_section
from curate.rank import run
from curate.rank.difficulty import bucket, measured_score, static_score
from curate.rank.levels import structures
from curate.structure import structure_task
from curate.table import Rejections, read_problems, read_stats, write_stage


@pytest.fixture(scope="module")
def kernelbench_structure() -> list[tuple[dict, dict]]:
    rows = [json.loads(line) for line in KERNELBENCH_JSONL.read_text().splitlines() if line.strip()]
    return [(r, structure_task(r["code"])) for r in rows]


def test_kernelbench_levels_agree(kernelbench_structure):
    confusion = Counter((r["level"], s.get("level")) for r, s in kernelbench_structure)
    n = len(kernelbench_structure)
    agree = sum(v for (a, b), v in confusion.items() if a == b)
    print("KernelBench level confusion (real, ours):", dict(sorted(confusion.items(), key=str)),
          f"agreement {agree}/{n}")
    assert n == 250
    assert agree / n >= 0.9
    for level in (1, 2, 3):
        total = sum(v for (a, _), v in confusion.items() if a == level)
        assert confusion[(level, level)] / total >= 0.85, (level, confusion)
    # Swin's code reads tensor values (.item()), which the meta device cannot give
    assert sum(1 for _, s in kernelbench_structure if not s["ok"]) <= 3


def test_kernelbench_categories(kernelbench_structure):
    by = {r["name"]: s for r, s in kernelbench_structure}
    want = {"1_Square_matrix_multiplication_": (1, "matmul"), "19_ReLU": (1, "elementwise"),
            "23_Softmax": (1, "reduction"), "40_LayerNorm": (1, "normalization"),
            "42_Max_Pooling_2D": (1, "pooling"), "63_conv_standard_2D__square_input__square_kernel": (1, "conv"),
            "1_Conv2D_ReLU_BiasAdd": (2, "conv"), "12_Gemm_Multiply_LeakyReLU": (2, "matmul"),
            "1_MLP": (3, "matmul"), "9_ResNet18": (3, None), "43_MinGPTCausalAttention": (3, None)}
    for name, (level, category) in want.items():
        s = by[name]
        assert s["level"] == level, (name, s)
        if category:
            assert s["category"] == category, (name, s)
    # the attention written out (bmm -> softmax -> bmm) is attention, not two matmuls
    assert by["97_ScaledDotProductAttention"]["category"] == "attention"
    # an unrolled LSTM stops tracing at the kernel cap and is a model
    assert by["35_LSTM"]["truncated"] and by["35_LSTM"]["level"] == 3


def test_mined_torch_modules_structure(mined_run: Path, tmp_path: Path):
    rows = read_problems(mined_run / "mine").to_dicts()
    got = structures(rows, tmp_path / "cache", workers=2, timeout_s=60)
    by = {r["name"]: s for r, s in zip(rows, got)}
    assert all(s["ok"] for s in got), [s for s in got if not s["ok"]]
    linear = next(s for n, s in by.items() if n.endswith(".Linear"))
    relu = next(s for n, s in by.items() if n.endswith(".ReLU"))
    shuffle = next(s for n, s in by.items() if n.endswith(".PixelShuffle"))
    assert (linear["level"], linear["category"]) == (1, "matmul")
    assert (relu["level"], relu["category"]) == (1, "elementwise")
    assert shuffle["category"] == "data_movement"
    assert {s["level"] for s in got} <= {1, 2, 3}
    # a second call reads the cache, no sandbox needed
    assert structures(rows, tmp_path / "cache", workers=1) == got



def test_precision_variants_traced_in_their_dtype(mined_run: Path, tmp_path: Path):
    """A bf16 variant (diversify --dtypes) shares its base problem's id: it is traced with its
    model cast to bf16, and the float32 rows keep their own trace. Before, the bf16 row's spec
    stood for the base problem and a bf16 input met float32 weights ("expected m1 and m2 to have
    the same dtype"; a convolution: "Input type (BFloat16) and bias type (float) should be the
    same"), so both precisions fell back to the code alone."""
    from curate.problem import spec_in_dtype

    rows = read_problems(mined_run / "mine").to_dicts()
    linear = next(r for r in rows if r["name"].endswith(".Linear"))
    fp32 = {**linear, "base_problem_id": linear["problem_id"], "dtype": "float32", "variant": 0}
    bf16 = {**fp32, "problem_id": linear["problem_id"] + "-bf16", "dtype": "bfloat16",
            "input_spec": json.dumps(spec_in_dtype(json.loads(linear["input_spec"]), "bfloat16"))}
    got = structures([fp32, bf16], tmp_path / "cache", workers=1, timeout_s=60)
    assert all(s["ok"] for s in got), got
    assert got[0]["level"] == got[1]["level"] == 1 and got[0]["category"] == got[1]["category"] == "matmul"
    # the bf16 trace moves half the bytes: it is its own trace, not the float32 one reused
    assert got[1]["input_bytes"] * 2 == got[0]["input_bytes"]

def test_measured_score_formula():
    gemm = measured_score(1.0, 1.0, 1)          # cuBLAS, compiler no faster: hard
    relu = measured_score(1.0, 0.0, 1)          # one elementwise kernel: easy
    chain = measured_score(3.5, 0.0, 12)        # Inductor fuses 12 kernels 3.5x: easy
    conv_epi = measured_score(1.3, 0.8, 3)      # conv + bias + ReLU: medium
    assert gemm[1] == relu[1] == "inductor+library"
    assert gemm[0] == pytest.approx((0.40 * 0.6131 + 0.45) / 1.0, abs=1e-3)
    assert [bucket(x[0]) for x in (gemm, relu, chain, conv_epi)] == ["hard", "easy", "easy", "medium"]
    assert measured_score(None, 0.7, 5)[1] == "library"
    assert measured_score(2.0, None, None)[1] == "inductor"
    assert measured_score(None, None, 40) is None
    assert measured_score(float("nan"), None, 3) is None
    assert 0 <= static_score(1.0, 1000) <= 1 and bucket(static_score(0.0, 1)) == "easy"


def test_signal_precedence():
    from curate.rank import _signal

    gpu_row = {"gpu": "NVIDIA H100 80GB HBM3", "inductor_speedup": 1.0, "library_share": 1.0, "kernels": 1,
               "code": "import torch\nclass Model(torch.nn.Module):\n    def forward(self, a, b):\n"
                       "        return a @ b\n"}
    trace = {"ok": True, "level": 1, "library_share": 1.0, "kernels": 1, "steps": 1, "heavy_steps": 1,
             "category": "matmul", "category_share": {"matmul": 1.0}, "category_steps": {"matmul": 1},
             "flops": 2 * 4096 ** 3, "bytes": 3 * 4 * 4096 ** 2, "input_bytes": 2 * 4 * 4096 ** 2,
             "output_bytes": 4 * 4096 ** 2}
    # an LLM solver's pass rate wins; the predictor's estimate is recorded beside it
    got = _signal(gpu_row, {"pass_rate": 0.25}, trace, llm=True)
    assert (got["difficulty_score"], got["difficulty_signal"]) == (0.75, "pass_rate")
    assert 0 < got["predicted_pass_rate"] < 1
    # the Inductor solver passes everything: the predictor sets the difficulty, the GPU
    # figures the headroom (a lone GEMM: cuBLAS, a compiler no faster than eager)
    got = _signal(gpu_row, {"pass_rate": 1.0}, trace, llm=False)
    assert got["difficulty_signal"] == "predicted" and got["difficulty_score"] == 1 - got["predicted_pass_rate"]
    assert got["headroom_signal"] == "inductor+library" and bucket(got["speedup_headroom"]) == "hard"
    # no GPU figures: the static trace gives the headroom; no trace: the code alone the difficulty
    cpu_row = {**gpu_row, "gpu": None, "device": "cpu", "inductor_speedup": 5.0}
    got = _signal(cpu_row, {"pass_rate": None}, trace, llm=False)
    assert (got["difficulty_signal"], got["headroom_signal"]) == ("predicted", "static")
    got = _signal(cpu_row, {"pass_rate": None}, {"ok": False}, llm=False)
    assert got["difficulty_signal"] == "predicted_code" and got["difficulty"] in ("easy", "medium", "hard")
    assert got["speedup_headroom"] is None and got["headroom_signal"] == "none"


def _gpu_table(out: Path, kernelbench_rows: list[dict]) -> None:
    rows = []
    for r, (s, lib, k) in zip(kernelbench_rows, [(1.0, 0.97, 1), (1.05, 0.0, 1), (2.8, 0.55, 6)]):
        rows.append({"problem_id": r["name"], "name": r["name"], "code": r["code"], "init_args": "[]",
                     "input_spec": "[]", "eager_ms": 1.0, "compile_ms": 1.0 / s, "inductor_speedup": s,
                     "library_share": lib, "kernels": k, "gpu": "NVIDIA H100 80GB HBM3", "device": "cuda"})
    df = pl.DataFrame(rows)
    write_stage(out, "measure", df, Rejections("measure").frame(like=df), df.height, 1.0)


def test_no_row_unranked_when_gpu_figures_exist(tmp_path: Path):
    kb = {json.loads(x)["name"]: json.loads(x) for x in KERNELBENCH_JSONL.read_text().splitlines() if x.strip()}
    picks = [kb["1_Square_matrix_multiplication_"], kb["19_ReLU"], kb["1_Conv2D_ReLU_BiasAdd"]]
    _gpu_table(tmp_path, picks)
    df = read_problems(tmp_path / "measure")
    # small specs: the rank stage traces the row's inputs (a CPU fallback needs them small)
    specs = {"1_Square_matrix_multiplication_": [{"kind": "tensor", "shape": [64, 64]}] * 2,
             "19_ReLU": [{"kind": "tensor", "shape": [16, 64]}],
             "1_Conv2D_ReLU_BiasAdd": [{"kind": "tensor", "shape": [2, 3, 16, 16]}]}
    inits = {"1_Conv2D_ReLU_BiasAdd": [3, 16, 3, [16, 1, 1]]}
    df = df.with_columns(pl.Series("input_spec", [json.dumps(specs[n]) for n in df["name"]]),
                         pl.Series("init_args", [json.dumps(inits.get(n, [])) for n in df["name"]]))
    write_stage(tmp_path, "measure", df, Rejections("measure").frame(like=df), df.height, 1.0)
    stats = run(out=tmp_path, workers=1)
    rows = {r["name"]: r for r in read_problems(tmp_path / "rank").iter_rows(named=True)}
    assert stats["kept"] == 3 and "unranked" not in stats["difficulty"]
    assert {r["headroom_signal"] for r in rows.values()} == {"inductor+library"}
    assert {r["difficulty_signal"] for r in rows.values()} == {"predicted"}
    assert all(r["pass_rate"] is None and r["solver"] == "none" for r in rows.values())
    assert bucket(rows["1_Square_matrix_multiplication_"]["speedup_headroom"]) == "hard"
    assert bucket(rows["19_ReLU"]["speedup_headroom"]) == "easy"
    # in the published results a single matmul is written correctly most often (76% of the
    # samples), a single elementwise operator at KernelBench's sizes far less (22%)
    assert rows["1_Square_matrix_multiplication_"]["difficulty_score"] < rows["19_ReLU"]["difficulty_score"]
    assert (rows["1_Conv2D_ReLU_BiasAdd"]["level"], rows["1_Conv2D_ReLU_BiasAdd"]["category"]) == (2, "conv")
    assert read_stats(tmp_path / "rank")["level"] == {"1": 2, "2": 1}


def test_rank_cpu_stage_on_mined_problems_and_card(mined_run: Path, tmp_path: Path):
    stats = run(out=tmp_path, source=mined_run / "mine", workers=2)
    kept = read_problems(tmp_path / "rank")
    assert stats["kept"] == kept.height > 0
    # a CPU table has no GPU figures: the headroom comes from the static trace, the
    # difficulty from the predictor on every row
    assert set(kept["headroom_signal"].to_list()) == {"static"}
    assert set(kept["difficulty_signal"].to_list()) == {"predicted"}
    assert kept["difficulty"].is_in(["easy", "medium", "hard"]).all()
    assert kept["difficulty_score"].is_between(0, 1).all() and kept["speedup_headroom"].is_between(0, 1).all()
    card = structure_section(kept.with_columns(pl.col("problem_id").alias("base_problem_id")))
    n1 = kept.filter(pl.col("level") == 1).height
    assert f"| 1 | {n1} | {n1} | 100 |" in card and "| 3 |" in card and "| 50 |" in card
    top = kept.group_by("category").len().sort("len", descending=True).row(0)
    assert f"| {top[0]} | {top[1]} |" in card
