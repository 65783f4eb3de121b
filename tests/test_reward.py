"""compute_score on real replies for KernelBench 19_ReLU (Triton interpreter on the CPU)."""

from __future__ import annotations

import json

import pytest

from curate.reward import RewardConfig, compute_score, compute_score_batch, score_result
from curate.verify import VerifyResult
from verify_fixtures import SMALL_SPEC, candidate, kernelbench, reply

RELU = kernelbench("19_ReLU")
INFO = {"init_args": "[]", "input_spec": json.dumps(SMALL_SPEC)}  # as export's extra_info holds them
KEYS = {"score", "compiled", "correct", "speedup_vs_eager", "speedup_vs_inductor", "reason"}


def test_correct_reply_scores_the_formula_on_its_parts():
    out = compute_score("curate/test", reply(candidate("relu_triton")), RELU, INFO)
    assert set(out) == KEYS
    assert out["compiled"] and out["correct"], out["reason"]
    assert out["speedup_vs_eager"] > 0
    expected = 0.1 + 0.3 + 0.2 * min(out["speedup_vs_eager"], 3.0)
    assert out["score"] == pytest.approx(expected)
    assert out["score"] > 0.4


def test_untimed_correct_reply_and_custom_weights():
    out = compute_score("curate/test", reply(candidate("relu_triton")), RELU, INFO,
                        time_it=False, compiled_weight=0.0, correct_weight=1.0,
                        num_turns=1)  # a key a trainer adds on its own is ignored
    assert out["correct"] and out["score"] == 1.0 and out["speedup_vs_eager"] == 0.0


@pytest.mark.parametrize("name, score, compiled", [
    ("relu_off_by_one", 0.1, True),     # builds and runs, wrong values: compile credit only
    ("relu_zeros", 0.1, True),          # a Triton kernel that writes zeros
    ("relu_torch", 0.1, True),          # no kernel of its own
    ("relu_subclass", 0.1, True),       # subclasses a copy of the reference Model
    ("relu_syntax_error", 0.0, False),
    ("relu_triton_compile_error", 0.0, False),  # the Triton kernel does not compile
])
def test_wrong_replies_score_low(name, score, compiled):
    out = compute_score("curate/test", reply(candidate(name)), RELU, INFO)
    assert not out["correct"] and out["compiled"] is compiled
    assert out["score"] == pytest.approx(score)


def test_reply_without_code_and_bad_extra_info():
    assert compute_score("curate/test", "", RELU, INFO)["score"] == 0.0
    out = compute_score("curate/test", reply(candidate("relu_triton")), RELU,
                        {"input_spec": "{not json"})
    assert out["score"] == 0.0 and out["reason"].startswith("bad extra_info")


def test_held_out_shapes_from_extra_info():
    info = dict(INFO, shape_variants=json.dumps([[{"kind": "tensor", "shape": [8, 300]}]]))
    out = compute_score("curate/test", reply(candidate("relu_hardcoded")), RELU, info, time_it=False)
    assert out["compiled"] and not out["correct"] and "held-out shape" in out["reason"]


def test_score_result_caps_the_speedup():
    fast = VerifyResult(compiled=True, correct=True, speedup_vs_eager=7.5)
    assert score_result(fast)["score"] == pytest.approx(0.1 + 0.3 + 0.2 * 3.0)
    slow = VerifyResult(compiled=True, correct=True, speedup_vs_eager=0.5)
    assert score_result(slow)["score"] == pytest.approx(0.1 + 0.3 + 0.2 * 0.5)
    wrong_but_fast = VerifyResult(compiled=True, correct=False, speedup_vs_eager=9.0)
    assert score_result(wrong_but_fast)["score"] == pytest.approx(0.1)
    cfg = RewardConfig(baseline="inductor", max_speedup=2.0)
    vs = VerifyResult(compiled=True, correct=True, speedup_vs_eager=5.0, speedup_vs_inductor=1.5)
    assert score_result(vs, cfg)["score"] == pytest.approx(0.1 + 0.3 + 0.2 * 1.5)


def test_unparsable_reply_is_scored_without_a_worker():
    import time

    t = time.monotonic()
    out = compute_score("curate/test", reply(candidate("relu_syntax_error")), RELU, INFO)
    assert time.monotonic() - t < 0.5
    assert out["score"] == 0.0 and out["reason"].startswith("candidate failed to load: SyntaxError")
    out = compute_score("curate/test", reply("import torch\nclass Model2(torch.nn.Module):\n    pass\n"), RELU, INFO)
    assert out["reason"] == "candidate failed to load: no class ModelNew defined"


# a candidate that replaces torch.relu process-wide: in a reused worker, the next call's
# reference would compute zeros and a zeros kernel would match it
PATCH_RELU = candidate("relu_zeros") + "\n\ntorch.relu = lambda x: torch.zeros_like(x)\n"


def test_persistent_worker_is_retired_after_a_candidate_patches_torch():
    from curate.verify import make_config
    from curate.verify.pool import VerifierPool

    pool = VerifierPool(workers=1, device="cpu", mem_mb=8192)
    try:
        def run(code):
            return pool.verify(RELU, code, make_config(input_spec=SMALL_SPEC, device="cpu", time_it=False),
                               120, "relu")

        first = run(candidate("relu_triton"))
        again = run(candidate("relu_triton"))
        assert first.correct and again.correct and "worker_retired" not in again.details
        patched = run(PATCH_RELU)
        assert not patched.correct and "torch.relu" in patched.details["worker_retired"]
        after = run(candidate("relu_zeros"))  # a fresh worker: the reference is real ReLU again
        assert not after.correct and "wrong output" in after.reason
        assert run(candidate("relu_triton")).correct
    finally:
        pool.close()


def test_batch_entry_point_and_prime_style_reading():
    replies = [reply(candidate("relu_triton")), reply(candidate("relu_zeros")), "no code here"]
    out = compute_score_batch(["curate/test"] * 3, replies, [RELU] * 3, [INFO] * 3, time_it=False)
    assert [o["correct"] for o in out] == [True, False, False]
    assert [o[0] for o in out] == pytest.approx([0.4, 0.1, 0.0])  # verl's prime reads result[0]
    assert float(out[0]) == pytest.approx(0.4) and isinstance(out[0], dict)
    with pytest.raises(ValueError):
        compute_score_batch(["curate/test"], replies, [RELU] * 3, None)


def test_time_limit_comes_from_the_problem():
    from curate.reward import default_timeout_s
    from curate.verify import make_config

    cfg = make_config(device="cpu", time_it=True, warmup=3, trials=100)  # CUDA's defaults
    cfg["device"] = "cuda"  # the arithmetic only; nothing runs
    fast, slow = default_timeout_s(cfg, "import triton", 0.1), default_timeout_s(cfg, "import triton", 20.0)
    assert 45 < fast < 60 < slow  # 45 s of building plus 10x the reference for every forward
    assert default_timeout_s(cfg, "load_inline(...)", 0.1) > 150
    assert default_timeout_s(cfg, "import triton", None) < 300
