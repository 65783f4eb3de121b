"""Insensitivity judged by the verifier's own test (curate.sensitivity, the planner's
judgement in curate.diversify.judge, mining's choice of inputs), on torch's own loss,
softmax and distance modules mined as the default run mines them."""

from __future__ import annotations

import json
import math

import pytest
import torch

from curate import sensitivity as sens
from curate.diversify import judge
from curate.diversify.plan import plan_task
from curate.mine.synthesize import synthesize_task
from curate.mine.torch_api import public_closure
from curate.problem import build_inputs, load_problem, parse_input_spec, render_inputs, replace_inputs, spec_in_dtype
from curate.reward import compute_score
from verify_fixtures import candidate, reply

LOSS = "torch/nn/modules/loss.py"


def _mined(cls: str, rel: str) -> dict:
    got = synthesize_task(public_closure(rel, cls), cls, "test", 60)
    assert got["ok"], got
    return got


@pytest.fixture(scope="module")
def mse():
    return _mined("MSELoss", LOSS)


def test_draw_scale_gives_each_draw_one_factor():
    """A ``draw_scale`` tensor is one normal (or unit-interval) draw times (or raised to) one
    factor in [0.5, 2] per draw, as built and as rendered into ``get_inputs()``."""
    normal = {"kind": "tensor", "shape": [4096], "dtype": "float32", "draw_scale": True}
    unit = {"kind": "tensor", "shape": [4096], "dtype": "float16", "unit_interval": True, "draw_scale": True}
    stds = [float(build_inputs([normal], seed=k)[0].std()) for k in range(20)]
    assert 0.45 < min(stds) < max(stds) < 2.1 and max(stds) / min(stds) > 1.5
    for k in range(20):
        p = build_inputs([unit], seed=k)[0]
        assert p.dtype == torch.float16 and 0 < float(p.min()) and float(p.max()) < 1
        assert bool(torch.isfinite(torch.log(p)).all())
    assert build_inputs([normal], "meta")[0].shape == (4096,)  # shapes alone on meta
    ns: dict = {}
    exec("import torch\n" + render_inputs([normal, unit], []), ns)
    torch.manual_seed(0)
    x, p = ns["get_inputs"]()
    assert p.dtype == torch.float16 and 0 < float(p.min()) and float(p.max()) < 1
    assert parse_input_spec([normal])[0].draw_scale and parse_input_spec([unit])[0].unit_interval


def test_a_constant_answer_scores_zero_on_a_kept_loss(mse):
    """torch's MSELoss in float16 at its mined shape averages 262,144 squared differences:
    its value moves by 0.3% from draw to draw, inside float16's 1e-2 tolerance, so one number
    passes the verifier (the reward scores it correct) and the planner finds a margin under 1.
    The planner's repair, a random scale per draw, keeps the problem; the same constant then
    scores no correctness."""
    code, init = mse["code"], mse["init_args"]
    spec = spec_in_dtype(mse["input_spec"], "float16")
    ns = load_problem(code)
    assert sens.margin(ns, init, spec, "float16") <= 1
    judged = judge.at_mined(ns, init, spec, "float16", forward_s=0.01, deadline_s=60)
    assert judged["repairs"] == ["draw_scale"] and judged["reject"] is None and judged["margin"] > 10

    def best_constant(s):
        outs = []
        for k in range(8):
            torch.manual_seed(100 + k)
            outs.append(float(ns["Model"](*init)(*build_inputs(s, seed=200 + k))))
        return sum(outs) / len(outs)

    def score(s):
        answer = candidate("loss_constant").replace("VALUE = 0.0", f"VALUE = {best_constant(s)!r}")
        info = {"init_args": json.dumps(init), "input_spec": json.dumps(s), "dtype": "float16"}
        return compute_score("curate/test", reply(answer), replace_inputs(code, s, init), info, time_it=False)

    before = score(spec)
    assert before["compiled"] and before["correct"], before["reason"]  # why the problem is repaired
    after = score(judged["spec"])
    assert after["compiled"] and not after["correct"] and after["score"] == pytest.approx(0.1)


def test_the_planner_predicts_a_loss_averaging_away_at_gpu_sizes(mse):
    """At its mined shape MSELoss has a margin of tens; the planner grows it for an H100 to
    hundreds of millions of elements, where the mean of squared differences is constant to
    about 1e-4 of itself. A CPU probe at a larger shape gives the margin's decay, the
    prediction at the primary shape is under 1: without repairs the problem is rejected
    before any GPU time, with them the random scale per draw keeps it."""
    code, init, spec = mse["code"], mse["init_args"], mse["input_spec"]
    args = (code, init, spec, (0.5, 10.0), "h100", 4096 * 2**20, 3, 40.0)
    bare = plan_task(*args, repair_inputs=False)
    assert bare["reject"][0] == "input_insensitive", bare["reject"]
    assert "at the planned" in bare["reject"][1] and "predicted from margin" in bare["reject"][1]
    s = bare["sensitivity"]
    assert s["margin"] > 4 and min(s["predicted"]) <= 1 and s["alpha"] > 0.3
    assert s["probe_growth"] >= sens.MIN_PROBE_GROWTH and s["probe_margin"] < s["margin"]

    kept = plan_task(*args)
    assert kept["reject"] is None and kept["input_repairs"] == ["draw_scale"]
    assert min(kept["sensitivity"]["predicted"]) > 100
    assert all(x.get("draw_scale") for c in kept["shapes"] for x in c["spec"])
    assert all(x.get("draw_scale") for x in kept["input_spec"])


def test_an_output_that_grows_with_its_inputs_keeps_its_margin():
    """Softmax over a growing feature axis: each output element moves with its input at any
    size, so the planner measures no probe and predicts the mined margin."""
    from curate.problem import assemble

    body = "import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n" \
           "        return torch.softmax(x, dim=-1)\n"
    spec = [{"kind": "tensor", "shape": [8, 16, 512], "dtype": "float32"}]
    got = plan_task(assemble(body, spec, []), [], spec, (0.5, 10.0), "h100", 4096 * 2**20, 2, 40.0)
    assert got["reject"] is None and got["input_repairs"] == []
    s = got["sensitivity"]
    assert s["probe_margin"] is None and s["predicted"] == [s["margin"]] * 2 and s["margin"] > 100


def test_a_problem_no_input_moves_is_rejected_with_its_margin():
    """An output that ignores the values of its input (ones of its shape) passes as a constant
    whatever repair is tried: rejected in planning, the margin in the detail."""
    from curate.problem import assemble

    body = "import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n" \
           "        return torch.ones_like(x) * x.shape[-1]\n"
    spec = [{"kind": "tensor", "shape": [8, 1, 64], "dtype": "float32"}]
    got = plan_task(assemble(body, spec, []), [], spec, (0.5, 10.0), "h100", 4096 * 2**20, 1, 40.0)
    assert got["reject"][0] == "input_insensitive" and got["shapes"] == []
    assert "margin 0 " in got["reject"][1] and "singletons, draw_scale tried" in got["reject"][1]


def test_mining_chooses_inputs_and_arguments_the_output_depends_on():
    """torch's Softmax(dim) was mined as Softmax(1) on a channel axis of size 1 (ones,
    whatever the input): the axis is grown. PairwiseDistance's first guess p=0 counts nonzero
    differences (the feature count, whatever the input): its defaults (p=2) are taken.
    CosineEmbeddingLoss given class indices for targets is zero (it reads 1 and -1 only):
    its targets are drawn as signs."""
    softmax = _mined("Softmax", "torch/nn/modules/activation.py")
    dim = softmax["init_args"][0]
    assert softmax["input_spec"][0]["shape"][dim] > 1
    pairwise = _mined("PairwiseDistance", "torch/nn/modules/distance.py")
    assert pairwise["init_args"] == [] or pairwise["init_args"][0] != 0.0
    cosine = _mined("CosineEmbeddingLoss", LOSS)
    target = next(s for s in cosine["input_spec"] if s["kind"] == "index")
    assert (target.get("low"), target["high"]) == (-1, 2)
    for got in (softmax, pairwise, cosine):
        ns = load_problem(got["code"])
        assert sens.margin(ns, got["init_args"], got["input_spec"]) > 1


def test_extrapolation_is_clamped_to_a_mean():
    # a margin falling faster than the square root of the size is sampling noise: clamped
    got = sens.extrapolate(100.0, 1000, (1.0, 16000), [1000, 16_000_000])
    assert got["alpha"] == 0.5 and got["margins"][0] == 100.0
    assert got["margins"][1] == pytest.approx(100.0 / math.sqrt(16000))
    # a margin that grows with the size does not shrink anywhere
    assert sens.extrapolate(10.0, 1000, (20.0, 8000), [10**9])["margins"] == [10.0]
