"""diversify: the cost model, shapes aimed at a runtime band, the held-out shape reaching the
reward, and the stage's accountability, on torch's own nn modules wrapped as KernelBench
problems."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest
import torch

from curate.diversify import run
from curate.cost import estimate_ms, forward_cost, gpu_profile
from verify_fixtures import candidate
from curate.diversify.shapes import axes
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


BAND = (0.5, 10.0)


def _odd_not_pow2(n: int) -> bool:
    return n % 2 == 1 and n & (n - 1) != 0


def test_forward_cost_on_meta_counts_flops_bytes_and_kernels():
    with torch.device("meta"):
        lin = torch.nn.Linear(64, 32)
    x = torch.randn(128, 64, device="meta")
    c = forward_cost(lin, [x])
    assert c.flops == 2 * 128 * 64 * 32 and c.kernels == 1
    # one addmm reads x, W and b and writes the output
    assert c.bytes == 4 * (128 * 64 + 64 * 32 + 32 + 128 * 32)
    assert c.param_bytes == 4 * (64 * 32 + 32) and c.output_bytes == 4 * 128 * 32
    h100 = gpu_profile("NVIDIA H100 80GB HBM3")
    assert h100.name == "h100"
    # a tiny forward is launch-bound: the estimate is the launch floor, not the kernel
    assert estimate_ms(c, h100) == pytest.approx(h100.launch_us / 1e3)
    with pytest.raises(ValueError):
        gpu_profile("tpu-v5")


def test_stage_aims_every_shape_at_the_band(tmp_path):
    out = _dedup_dir(tmp_path, list(PROBLEMS))
    stats = run(out, variants=3, band_ms=BAND, target_gpu="h100", mem_budget_mb=4096, device="cpu",
                workers=2, timeout_s=60)
    kept = read_problems(out / "diversify")
    rejected = read_rejected(out / "diversify")
    assert stats["in"] == len(PROBLEMS) == stats["kept"] + stats["rejected"]
    assert stats["rows_out"] == kept.height
    reasons = dict(zip(rejected["problem_id"], rejected["reject_reason"]))
    assert reasons == {"p_broken": "forward_fails", "p_fixed": "launch_bound"}
    fixed = rejected.filter(pl.col("problem_id") == "p_fixed")["reject_detail"][0]
    assert "best estimate" in fixed  # the best time reached is in the detail

    by_base = {b[0]: g.sort("variant") for b, g in kept.group_by("base_problem_id")}
    assert set(by_base) == {"p_conv", "p_linear", "p_gelu", "p_mha"}
    for base, group in by_base.items():
        assert group.height == 3, base
        assert group["shape_role"].to_list() == ["primary", "spread", "spread"]
        assert group["problem_id"].to_list() == [base, f"{base}~v1", f"{base}~v2"]
        assert (group["shape_source"] == "estimated").all() and (group["target_gpu"] == "h100").all()
        assert group["est_ms"].is_between(*BAND).all()
        assert (group["est_peak_mb"] <= 4096).all()
        variants = json.loads(group["shape_variants"][0])
        assert group["shape_variants"].n_unique() == 1
        assert [v["heldout"] for v in variants] == [False, False, False, True]
        specs = [json.loads(s) for s in group["input_spec"]]
        assert [v["input_spec"] for v in variants[:3]] == specs
        held = variants[3]["input_spec"]
        primary = specs[0]
        # the held-out shape is the primary with odd, non-power-of-two sizes, and no prompt shows it
        changed = [(a, b) for h, p in zip(held, primary) for a, b in zip(h["shape"], p["shape"]) if a != b]
        assert changed and all(_odd_not_pow2(a) for a, _ in changed)
        for row, spec in zip(group.iter_rows(named=True), specs):
            assert json.dumps(held) not in row["code"]
            ns = load_problem(row["code"])
            with torch.device("meta"):  # band-sized inputs: check shapes, allocate nothing
                got = ns["get_inputs"]()
                model = ns["Model"](*ns["get_init_inputs"]())
                model(*got)
            assert [list(x.shape) for x in got] == [s["shape"] for s in spec]
            assert json.loads(row["mined_input_spec"]) == PROBLEMS[base[2:]][2]
    conv = [json.loads(s)[0]["shape"] for s in by_base["p_conv"]["input_spec"]]
    assert all(s[1] == 3 for s in conv)  # in_channels is tied to the constructor
    assert len({tuple(s) for s in conv}) == 3 and len({s[0] for s in conv}) >= 2
    # shapes differ in aspect, not only in batch
    assert len(set(by_base["p_conv"]["shape_family"])) >= 2
    mha = [json.loads(s) for s in by_base["p_mha"]["input_spec"]]
    assert all(s[0]["shape"] == s[1]["shape"] == s[2]["shape"] and s[0]["shape"][2] == 64 for s in mha)
    lin = by_base["p_linear"]
    for spec, init, flops in zip(lin["input_spec"], lin["init_args"], lin["est_flops"]):
        m, k = json.loads(spec)[0]["shape"]
        assert json.loads(init)[0] == k  # a width shape grows in_features with the input
        assert flops == 2 * m * k * 32
    assert (out / "diversify" / "_journal.jsonl").exists() is False


def test_memory_budget_bounds_every_shape(tmp_path):
    # linear 512 -> 32 under 1 MiB cannot reach 0.5 ms on an H100: over_memory, not a silent drop
    src = _module("nn.Linear")
    spec = [_t(256, 512)]
    df = pl.DataFrame([{"problem_id": "big", "name": "t.big", "code": assemble(src, spec, [512, 32]),
                        "init_args": "[512, 32]", "input_spec": json.dumps(spec),
                        "source": source_struct(kind="test", name="t")}])
    stats = run(tmp_path, source=_write(tmp_path, df), variants=2, mem_budget_mb=1, device="cpu", workers=1)
    assert stats["rejected_by_reason"] == {"over_memory": 1}
    rej = read_rejected(tmp_path / "diversify")
    assert "best estimate" in rej["reject_detail"][0]
    # a looser budget and a band for small kernels: every shape within the budget
    stats = run(tmp_path / "b", source=tmp_path / "src" / "dedup", variants=3, band_ms=(0.01, 0.05),
                mem_budget_mb=256, device="cpu", workers=1)
    kept = read_problems(tmp_path / "b" / "diversify")
    assert stats["kept"] == 1 and kept.height == 3
    assert (kept["est_peak_mb"] <= 256).all() and kept["est_ms"].is_between(0.01, 0.05).all()


def _edit(source: str, changes: dict[str, str]) -> str:
    for old, new in changes.items():
        assert old in source, old
        source = source.replace(old, new)
    return source


def test_a_candidate_hard_coding_the_primary_shape_scores_zero_correctness(tmp_path):
    """diversify's held-out shape reaches the reward: a Triton kernel written for the
    prompted (primary) size only is wrong there; an honest one passes (TRITON_INTERPRET=1)."""
    from curate.reward import compute_score

    body = ("import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n"
            "    def forward(self, x):\n        return torch.relu(x)\n")
    spec = [_t(4, 250)]
    df = pl.DataFrame([{"problem_id": "relu", "name": "t.relu", "code": assemble(body, spec, []),
                        "init_args": "[]", "input_spec": json.dumps(spec),
                        "source": source_struct(kind="test", name="t")}])
    # a band for kernels of a few microseconds keeps the shapes small enough for the interpreter
    run(tmp_path, source=_write(tmp_path, df), variants=3, band_ms=(0.01, 0.05), device="cpu", workers=1)
    row = read_problems(tmp_path / "diversify").filter(pl.col("variant") == 0).row(0, named=True)
    numel = math.prod(json.loads(row["input_spec"])[0]["shape"])
    assert numel > 2**18  # several programs of 262,144 lanes: few enough for the interpreter
    honest = _edit(candidate("relu_triton"), {"BLOCK = 256": "BLOCK = 262144"})
    # the same kernel, with the output allocated at the prompted shape, written in
    hard = _edit(honest, {"out = torch.empty_like(x)":
                          f"out = torch.empty({tuple(json.loads(row['input_spec'])[0]['shape'])}, device=x.device)",
                          "n = x.numel()": "n = min(out.numel(), x.numel())"})
    info = {k: row[k] for k in ("input_spec", "init_args", "shape_variants")}
    prompted_only = compute_score("curate/test", f"```python\n{hard}\n```", row["code"],
                                  extra_info={**info, "shape_variants": None}, time_it=False, device="cpu")
    assert prompted_only["correct"], prompted_only["reason"]  # right on the prompted shape ...
    held = compute_score("curate/test", f"```python\n{hard}\n```", row["code"], extra_info=info,
                         time_it=False, device="cpu")
    assert not held["correct"] and "held-out shape" in held["reason"]  # ... wrong elsewhere
    honest = compute_score("curate/test", f"```python\n{honest}\n```", row["code"],
                           extra_info=info, time_it=False, device="cpu")
    assert honest["correct"], honest["reason"]


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


def test_calibration_moves_a_misestimated_shape_into_the_band(monkeypatch):
    """The GPU correction loop with a deterministic clock (time proportional to the input's
    elements, as for an elementwise kernel): a plan whose scale is 60x off is timed, corrected
    by secant steps and lands in the band; the held-out shape follows the corrected primary
    with odd sizes. (A real clock on a shared CPU wanders too much for exact assertions.)"""
    from curate.diversify import calibrate
    from curate.diversify.shapes import apply_family, axes as find_axes, family

    timed = []

    def clock(ns, init, spec, dev, models, trials, warmup, dtype=None):
        timed.append(spec[0]["shape"])
        return math.prod(spec[0]["shape"]) * 1e-6, None  # ms

    monkeypatch.setattr(calibrate, "_time_spec", clock)
    src, init, spec = PROBLEMS["gelu"]
    code = assemble(src, spec, init)
    fam = family("batch", [a for a in find_axes(spec) if a.name == "batch"])
    t1 = math.prod(spec[0]["shape"]) * 1e-6
    band = (6 * t1, 40 * t1)
    s0 = 0.25  # a quarter of the mined work: ~1/60 of the wanted time
    sp, it = apply_family(spec, init, fam, s0)
    held_spec, _ = apply_family(spec, init, fam, s0, odd=True)
    shapes = [{"role": "primary", "family": fam, "s": s0, "spec": sp, "init": it, "want_ms": 15 * t1,
               "est_ms": 1.0, "flops": 0, "bytes": 0, "peak_bytes": 0},
              {"role": "heldout", "family": fam, "s": s0, "spec": held_spec, "init": it, "want_ms": None,
               "est_ms": 1.0, "flops": 0, "bytes": 0, "peak_bytes": 0}]
    res = calibrate.calibrate_problem(code, init, spec, shapes, band, 4096, device="cpu", max_probes=6)
    assert res["ok"] and res["mined"]["ms"] == pytest.approx(t1)
    primary, held = res["shapes"]
    assert primary["probes"] == 2  # one secant step: time is linear in the batch
    assert primary["in_band"] and primary["ms"] == pytest.approx(15 * t1, rel=0.1)
    assert primary["spec"][0]["shape"] == [120, 64, 32, 32]
    assert held["role"] == "heldout" and held["spec"][0]["shape"] == [119, 64, 32, 32]
    assert timed[-1] == [119, 64, 32, 32]  # the held-out shape ran too


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


def test_calibration_workers_share_a_lock_and_a_bad_problem_ends_only_itself():
    """Three problems through two calibrate worker processes sharing a GPU lock (host timers
    here): each real problem's mined shape and planned shape are timed; a problem whose forward
    hangs times out alone and the others' results still come, each task exactly once."""
    from curate.diversify.calibrate_pool import calibrate_many
    from curate.diversify.shapes import apply_family, axes as find_axes, family

    todo = []
    for name in ("gelu", "linear"):
        src, init, spec = PROBLEMS[name]
        axis = [a for a in find_axes(spec) if a.name == "batch"]
        fam = family("batch", axis)
        sp, it = apply_family(spec, init, fam, 0.5)
        shapes = [{"role": "primary", "family": fam, "s": 0.5, "spec": sp, "init": it, "want_ms": 1.0}]
        todo.append((name, f"k-{name}", {"code": assemble(src, spec, init), "init_args": init,
                                         "input_spec": spec, "shapes": shapes, "band": [1e-4, 1e4],
                                         "mem_budget_mb": 4096, "trials": 3, "warmup": 1,
                                         "max_probes": 1}))
    hang = ("import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n"
            "    def forward(self, x):\n        while True:\n            pass\n")
    spec = [{"kind": "tensor", "shape": [4, 8], "dtype": "float32"}]
    todo.insert(0, ("hang", "k-hang", {"code": assemble(hang, spec, []), "init_args": [],
                                       "input_spec": spec, "shapes": [], "band": [1e-4, 1e4],
                                       "mem_budget_mb": 4096, "trials": 3, "warmup": 1}))
    got = {i: res for i, key, res in calibrate_many(todo, "cpu", timeout_s=20, workers=2)}
    assert sorted(got) == ["gelu", "hang", "linear"]
    assert got["hang"]["ok"] is False and "timeout" in got["hang"]["detail"]
    for name in ("gelu", "linear"):
        res = got[name]
        assert res["ok"], res
        assert res["mined"]["ms"] > 0 and res["shapes"][0]["ms"] > 0


def test_a_shape_timed_in_band_but_past_the_memory_budget_says_so(monkeypatch):
    """Calibration counts a shape over the memory budget as outside the band even when its time
    is inside; the reject detail names the budget rather than listing in-band times alone."""
    from curate.diversify import calibrate
    from curate.diversify.shapes import apply_family, axes as find_axes, family
    from curate.diversify.stage import _final_shapes

    monkeypatch.setattr(calibrate, "_time_spec",
                        lambda ns, init, spec, dev, models, trials, warmup, dtype=None: (2.0, 9000.0))  # ms, MiB
    src, init, spec = PROBLEMS["gelu"]
    code = assemble(src, spec, init)
    fam = family("batch", [a for a in find_axes(spec) if a.name == "batch"])
    sp, it = apply_family(spec, init, fam, 1.0)
    held_spec, _ = apply_family(spec, init, fam, 1.0, odd=True)
    shapes = [{"role": "primary", "family": fam, "s": 1.0, "spec": sp, "init": it, "want_ms": 2.0,
               "est_ms": 2.0, "flops": 0, "bytes": 0, "peak_bytes": 0},
              {"role": "heldout", "family": fam, "s": 1.0, "spec": held_spec, "init": it, "want_ms": None,
               "est_ms": 2.0, "flops": 0, "bytes": 0, "peak_bytes": 0}]
    res = calibrate.calibrate_problem(code, init, spec, shapes, (0.5, 10.0), 4096, device="cpu", max_probes=3)
    assert res["ok"] and not res["shapes"][0]["in_band"]
    kept, reason = _final_shapes({"shapes": shapes}, res, 1, (0.5, 10.0))
    assert not kept and reason[0] == "out_of_band"
    assert "2 ms (over the memory budget: 9000 MiB)" in reason[1], reason[1]
