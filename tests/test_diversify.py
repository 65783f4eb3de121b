"""diversify: candidate shapes, sandboxed validation and the stage's accountability, on
torch's own nn modules wrapped as KernelBench problems."""

from __future__ import annotations

import json

import polars as pl
import pytest
import torch

from curate.diversify import run
from curate.diversify.shapes import axes, candidates
from curate.problem import assemble, build_inputs, load_problem, spec_bytes
from curate.table import read_problems, read_rejected, source_struct, write_stage

T = "float32"


def _t(*shape):
    return {"kind": "tensor", "shape": list(shape), "dtype": T}


def _module(base: str) -> str:
    return f"import torch\nfrom torch import nn\n\n\nclass Model({base}):\n    pass\n"


FIXED_VIEW = """import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return x.reshape(8, 4, 16).sum(-1)
"""

BROKEN = """import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return x @ torch.ones(3, 3)
"""

# nn.MultiheadAttention returns (output, weights): a KernelBench-style harness compares one
# tensor, so the problem returns the attention output
MHA = """import torch
from torch import nn


class Model(nn.MultiheadAttention):
    def forward(self, query, key, value):
        return super().forward(query, key, value)[0]
"""

PROBLEMS = {
    # name: (module source, init args, input spec)
    "conv": (_module("nn.Conv2d"), [3, 16, 3], [_t(8, 3, 32, 32)]),
    "linear": (_module("nn.Linear"), [64, 32], [_t(8, 64)]),
    "gelu": (_module("nn.GELU"), [], [_t(8, 64, 32, 32)]),
    "mha": (MHA, [64, 8], [_t(128, 8, 64)] * 3),
    "fixed": (FIXED_VIEW, [], [_t(8, 64)]),
    "broken": (BROKEN, [], [_t(8, 64)]),
}


def _rows(names):
    rows = []
    for name in names:
        src, init, spec = PROBLEMS[name]
        rows.append({"problem_id": f"p_{name}", "name": f"test.{name}", "code": assemble(src, spec, init),
                     "init_args": json.dumps(init), "input_spec": json.dumps(spec),
                     "source": source_struct(kind="test", name="torch.nn", class_name=name)})
    return pl.DataFrame(rows)


def _dedup_dir(tmp_path, names):
    df = _rows(names)
    write_stage(tmp_path, "dedup", df, df.clear().with_columns(
        pl.lit("").alias("reject_stage"), pl.lit("").alias("reject_reason"),
        pl.lit("").alias("reject_detail")), df.height, 0.0)
    return tmp_path


def test_axes_group_shared_and_spatial_dims():
    ax = {a.name: a for a in axes([_t(8, 3, 32, 32)])}
    assert ax["batch"].positions == ((0, 0),)
    assert ax["spatial"].positions == ((0, 2), (0, 3))  # H and W move together
    assert ax["dim1"].tied_guess  # channels are tried last
    assert [a.name for a in axes([_t(8, 3, 32, 32)])][-1] == "dim1"

    qkv = axes([_t(8, 128, 64)] * 3)
    assert qkv[0].name == "batch" and qkv[0].positions == ((0, 0), (1, 0), (2, 0))
    seq = next(a for a in qkv if a.name == "dim1")
    assert seq.positions == ((0, 1), (1, 1), (2, 1))

    # a square matmul only stays consistent when every N moves: the size=N axis
    square = axes([_t(64, 64), _t(64, 64)])
    assert any(a.name == "size=64" and len(a.positions) == 4 for a in square)


def test_candidates_are_ordered_unique_and_skip_the_original():
    spec = [_t(8, 3, 32, 32)]
    cands = candidates(spec)
    labels = [c.label for c in cands]
    assert labels[:4] == ["batch*2", "batch/2", "spatial*2", "spatial/2"]
    assert cands[0].spec[0]["shape"] == [16, 3, 32, 32]
    assert cands[2].spec[0]["shape"] == [8, 3, 64, 64]
    keys = [tuple(c.spec[0]["shape"]) for c in cands]
    assert len(keys) == len(set(keys)) and (8, 3, 32, 32) not in keys
    assert spec[0]["shape"] == [8, 3, 32, 32]  # the input spec is not mutated
    # values and size-1 dims are left alone
    odd = candidates([_t(1, 5), {"kind": "value", "value": 3}])
    assert all(c.spec[1] == {"kind": "value", "value": 3} and c.spec[0]["shape"][0] == 1 for c in odd)


def test_stage_variants_run_and_keep_tied_dims(tmp_path):
    out = _dedup_dir(tmp_path, list(PROBLEMS))
    stats = run(out, variants=3, workers=2, timeout_s=60)

    kept = read_problems(out / "diversify")
    rejected = read_rejected(out / "diversify")
    assert stats["in"] == len(PROBLEMS) == stats["kept"] + stats["rejected"]
    assert stats["rows_out"] == kept.height
    assert rejected["reject_reason"].to_list() == ["forward_fails"]  # found by the harness check
    assert rejected["problem_id"].to_list() == ["p_broken"]
    assert stats["problems_with_fewer"] == 1  # the hard-coded reshape admits no other shape

    for base, group in kept.group_by("base_problem_id"):
        group = group.sort("variant")
        specs = [json.loads(s) for s in group["input_spec"]]
        assert json.loads(group["shape_variants"][0]) == specs
        assert group["shape_variants"].n_unique() == 1
        assert group["variant"].to_list() == list(range(group.height))
        assert group["problem_id"].to_list() == [base[0]] + [f"{base[0]}~v{n}" for n in range(1, group.height)]
        for row, spec in zip(group.iter_rows(named=True), specs):
            ns = load_problem(row["code"])
            got = ns["get_inputs"]()
            assert [list(x.shape) for x in got] == [s["shape"] for s in spec]
            torch.manual_seed(0)
            model = ns["Model"](*ns["get_init_inputs"]())
            with torch.no_grad():
                y = model(*build_inputs(spec))
            y0 = y[0] if isinstance(y, tuple) else y
            assert row["est_bytes"] == spec_bytes(spec) + sum(
                t.numel() * t.element_size() for t in (y if isinstance(y, tuple) else (y,))
                if isinstance(t, torch.Tensor))
            assert torch.isfinite(y0).all()

    by_base = {b[0]: g.sort("variant") for b, g in kept.group_by("base_problem_id")}
    assert set(by_base) == {"p_conv", "p_linear", "p_gelu", "p_mha", "p_fixed"}
    assert by_base["p_fixed"].height == 1
    for name in ("p_conv", "p_linear", "p_gelu", "p_mha"):
        assert by_base[name].height == 4
    conv_shapes = [json.loads(s)[0]["shape"] for s in by_base["p_conv"]["input_spec"]]
    assert all(s[1] == 3 for s in conv_shapes)  # in_channels is tied to the constructor
    assert {tuple(s[2:]) for s in conv_shapes} > {(32, 32)}  # some spatial variant was kept
    lin_shapes = [json.loads(s)[0]["shape"] for s in by_base["p_linear"]["input_spec"]]
    assert all(s[1] == 64 for s in lin_shapes)  # in_features fixed
    mha = [json.loads(s) for s in by_base["p_mha"]["input_spec"]]
    assert all(s[0]["shape"] == s[1]["shape"] == s[2]["shape"] and s[0]["shape"][2] == 64 for s in mha)

    # FLOPs from FlopCounterMode: a linear layer is 2*M*K*N; elementwise GELU counts none
    lin = by_base["p_linear"]
    for spec, flops in zip(lin["input_spec"], lin["est_flops"]):
        m = json.loads(spec)[0]["shape"][0]
        assert flops == 2 * m * 64 * 32
    assert by_base["p_gelu"]["est_flops"].to_list() == [0, 0, 0, 0]
    assert (out / "diversify" / "_journal.jsonl").exists() is False


def test_memory_budget_bounds_variants(tmp_path):
    # linear on [256, 512]: 512 KiB in + 32 KiB out; doubling the batch exceeds 1 MiB
    src = _module("nn.Linear")
    spec = [_t(256, 512)]
    df = pl.DataFrame([{"problem_id": "big", "name": "t.big", "code": assemble(src, spec, [512, 32]),
                        "init_args": "[512, 32]", "input_spec": json.dumps(spec),
                        "source": source_struct(kind="test", name="t")}])
    stats = run(tmp_path, source=_write(tmp_path, df), variants=2, mem_budget_mb=1, workers=1)
    kept = read_problems(tmp_path / "diversify")
    assert kept.height == 3
    assert all(b <= 2**20 for b in kept.filter(pl.col("variant") > 0)["est_bytes"])
    assert stats["candidate_verdicts"].get("over_budget", 0) >= 1
    shapes = [json.loads(s)[0]["shape"] for s in kept["input_spec"]]
    assert [512, 512] not in shapes and [128, 512] in shapes


def _write(tmp_path, df):
    d = tmp_path / "src"
    write_stage(d, "dedup", df, df.clear().with_columns(
        pl.lit("").alias("reject_stage"), pl.lit("").alias("reject_reason"),
        pl.lit("").alias("reject_detail")), df.height, 0.0)
    return d / "dedup"


@pytest.mark.parametrize("bad", ["not json", "{\"kind\": \"tensor\"}"])
def test_bad_input_spec_is_a_rejected_row(tmp_path, bad):
    df = _rows(["linear"]).with_columns(pl.lit(bad).alias("input_spec"))
    stats = run(tmp_path, source=_write(tmp_path, df), variants=1, workers=1)
    assert stats["in"] == 1 and stats["rejected"] == 1
    assert stats["rejected_by_reason"] == {"bad_input_spec": 1}


def test_a_problem_a_plain_exec_harness_cannot_use_is_rejected_with_its_reason(tmp_path):
    """nn.LSTM returns (output, (h, c)): no variants, the conformance check's reason."""
    PROBLEMS["lstm"] = (_module("nn.LSTM"), [16, 32], [_t(4, 8, 16)])
    try:
        out = _dedup_dir(tmp_path, ["lstm", "linear"])
    finally:
        del PROBLEMS["lstm"]
    stats = run(out, variants=1, workers=2, timeout_s=60)
    rejected = read_rejected(out / "diversify")
    assert stats["kept"] == 1 and rejected["problem_id"].to_list() == ["p_lstm"]
    assert rejected["reject_reason"].to_list() == ["non_tensor_output"]
