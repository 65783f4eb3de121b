"""Precision variants (``curate diversify --dtypes``): planned, checked and measured in their
precision, a plain KernelBench-style harness at that precision runs them, the export states
the precision and the reward verifies in it. float16 on the CPU (Triton's interpreter
computes bfloat16 wrongly here; bfloat16 candidates are checked by the GPU script)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from curate.conform import check
from curate.diversify import run as diversify
from curate.diversify.stage import resolve_dtypes, variant_id
from curate.export.prompt import build_prompt
from curate.export.columns import normalize
from curate.export.verl import verl_frame
from curate.measure import run as measure
from curate.problem import assemble, replace_inputs, spec_in_dtype
from curate.reward import compute_score
from curate.table import read_problems, read_rejected, source_struct, write_stage
from verify_fixtures import candidate, kernelbench, reply


def _t(*shape):
    return {"kind": "tensor", "shape": list(shape), "dtype": "float32"}


RELU = "import torch\nfrom torch import nn\n\n\nclass Model(nn.ReLU):\n    pass\n"
LINEAR = "import torch\nfrom torch import nn\n\n\nclass Model(nn.Linear):\n    pass\n"
# computes in float32 whatever it is given: it does not run in a lower precision
WIDENS = """import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x.float())
"""
PROBLEMS = {"relu": (RELU, [], [_t(8, 64, 32)]), "linear": (LINEAR, [64, 32], [_t(8, 16, 64)]),
            "widens": (WIDENS, [], [_t(8, 64, 32)])}


def _table(tmp_path):
    rows = [{"problem_id": f"p_{n}", "name": f"test.{n}", "code": assemble(src, spec, init),
             "init_args": json.dumps(init), "input_spec": json.dumps(spec),
             "source": source_struct(kind="test", name="torch.nn", class_name=n)}
            for n, (src, init, spec) in PROBLEMS.items()]
    df = pl.DataFrame(rows)
    empty = df.clear().with_columns(pl.lit("").alias("reject_stage"), pl.lit("").alias("reject_reason"),
                                    pl.lit("").alias("reject_detail"))
    write_stage(tmp_path, "dedup", df, empty, df.height, 0.0)
    return tmp_path


def test_dtype_names_and_defaults():
    assert resolve_dtypes(None, "cpu") == ["float32"]
    assert resolve_dtypes(None, "cuda") == ["float32", "bfloat16"]
    assert resolve_dtypes("bf16,fp32,float16", "cpu") == ["float32", "bfloat16", "float16"]
    with pytest.raises(ValueError):
        resolve_dtypes("fp8", "cpu")
    assert variant_id("abc", "float32", 0) == "abc" and variant_id("abc", "float32", 2) == "abc~v2"
    assert variant_id("abc", "bfloat16", 0) == "abc~bf16" and variant_id("abc", "float16", 1) == "abc~fp16~v1"


def test_a_harness_at_a_precision_runs_the_problem_in_it():
    code = assemble(LINEAR, [_t(4, 64)], [64, 32])
    got = check(code, dtype="float16")
    assert got["reason"] is None and got["output_dtype"] == "float16"
    bad = check(assemble(WIDENS, [_t(4, 64)], []), dtype="float16")
    assert bad["reason"] == "dtype_unsupported" and "float32" in bad["detail"]
    assert check(assemble(WIDENS, [_t(4, 64)], []))["reason"] is None  # fine as defined


def test_variants_in_each_precision_from_diversify_to_the_reward(tmp_path):
    """Each problem gets a float32 and a float16 variant, planned and measured in its
    precision; the one that cannot compute in float16 is a rejected row of that variant only;
    the exported verl row carries ``dtype``, the prompt says so, and the reward verifies an
    honest float16 Triton ReLU against the variant in float16."""
    out = _table(tmp_path)
    stats = diversify(out, variants=1, dtypes="fp32,fp16", workers=1, device="cpu")
    assert stats["in"] == 6 and stats["kept"] == 5 and stats["dtypes"] == ["float32", "float16"]
    assert stats["kept_by_dtype"] == {"float32": 3, "float16": 2}
    rej = read_rejected(out / "diversify")
    assert rej.select("problem_id", "dtype", "reject_reason").rows() == [("p_widens~fp16", "float16", "dtype_unsupported")]
    rows = {r["problem_id"]: r for r in read_problems(out / "diversify").iter_rows(named=True)}
    assert set(rows) == {"p_relu", "p_linear", "p_widens", "p_relu~fp16", "p_linear~fp16"}
    half = rows["p_linear~fp16"]
    assert half["dtype"] == "float16" and half["base_problem_id"] == "p_linear" and half["variant"] == 0
    assert all(s["dtype"] == "float16" for s in json.loads(half["input_spec"]))
    assert "dtype=torch.float16" in half["code"]
    # a plain exec() harness run at that precision runs the variant's code (at its mined
    # inputs: the code's own are sized for an H100), and its held-out shape is float16 too
    mined = json.loads(half["mined_input_spec"])
    assert all(s["dtype"] == "float16" for s in mined)
    small = replace_inputs(half["code"], mined, json.loads(half["mined_init_args"]))
    assert check(small, dtype="float16")["reason"] is None
    held = [v for v in json.loads(half["shape_variants"]) if v["heldout"]]
    assert held and all(s["dtype"] == "float16" for s in held[0]["input_spec"])

    m = measure(out, device="cpu", trials=3, warmup=1, timeout_s=120)
    assert m["rejected"] == 0 and m["kept"] == 5
    kept = {r["problem_id"]: r for r in read_problems(out / "measure").iter_rows(named=True)}
    assert kept["p_relu~fp16"]["dtype"] == "float16" and kept["p_relu~fp16"]["constant_margin"] > 1

    relu = kept["p_relu~fp16"]
    frame = verl_frame(normalize(pl.DataFrame([{**relu, "split": "train"}])), "curate/test")
    info = frame["extra_info"][0]
    prompt = frame["prompt"][0][0]["content"]
    assert info["dtype"] == "float16" and "runs in float16" in prompt
    assert prompt == build_prompt(relu["code"], "float16") and "runs in" not in build_prompt(relu["code"])
    small = {**info, "input_spec": json.dumps(spec_in_dtype([_t(4, 250)], "float16")), "shape_variants": None}
    ok = compute_score("curate/test", reply(candidate("relu_triton")), relu["code"], small, time_it=False)
    assert ok["correct"], ok["reason"]
    # the same reply against the float32 variant computes in float32: also correct, while a
    # float16-inside kernel on the float32 problem is not (the verifier's red team)
    fp32 = {**small, "dtype": "float32", "input_spec": json.dumps([_t(4, 250)])}
    bad = compute_score("curate/test", reply(candidate("relu_fp16")), kept["p_relu"]["code"], fp32, time_it=False)
    assert bad["compiled"] and not bad["correct"]


def test_an_honest_kernel_passes_in_the_precision_it_is_given():
    """KernelBench's 23_Softmax run in float16: a Triton softmax that computes in float32 and
    stores the input's dtype passes the float16 tolerances (rows of 1,500 take two blocks)."""
    info = {"init_args": "[]", "dtype": "float16",
            "input_spec": json.dumps([{"kind": "tensor", "shape": [4, 1500], "dtype": "float16"}])}
    got = compute_score("curate/test", reply(candidate("softmax_triton")), kernelbench("23_Softmax"), info,
                        time_it=False)
    assert got["correct"], got["reason"]
