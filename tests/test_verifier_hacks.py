"""The 2026 hack families and the reference-side rules of the verifier, on real candidates.

Each red-team file in ``tests/candidates`` says in its first lines what it does; all of them
must score zero correctness. Triton kernels run under ``TRITON_INTERPRET=1`` on the CPU.
"""

from __future__ import annotations

import json
import math
import weakref
from collections.abc import Sequence

import pytest
import torch

from curate.reward import compute_score
from curate.verify import verify as _verify
from curate.verify.correctness import constant_answer_margin, excess
from curate.verify.guards import output_problem
from curate.verify.sealed import Sealer, Tampered
from conftest import forward_problem
from verify_fixtures import SMALL_SPEC, candidate, kernelbench, reply

RELU = kernelbench("19_ReLU")


def verify(*args, **kwargs):
    return _verify(*args, **{"device": "cpu", "timeout_s": 120, **kwargs})


@pytest.mark.parametrize("name, reason", [
    # deferred output: values computed only when the checker reads them
    ("relu_deferred", "a torch.Tensor subclass: outputs must be plain torch.Tensor"),
    ("relu_deferred_mode", "candidate left a torch function or dispatch mode"),
    # right only while checked: computes on its first calls, replays once timing starts
    ("relu_checked_only", "wrong output on "),
    # caught on the timed call, or on a correctness trial when the allocator hands a new
    # input the freed buffer of an earlier one (same data_ptr, new values): either way wrong
    ("relu_pointer_cache", "wrong output on "),
    # copies the expected output it finds through the garbage collector
    ("relu_gc_copy", "wrong output on trial 0"),
])
def test_2026_hack_families_score_zero_correctness(name, reason):
    r = verify(RELU, candidate(name), input_spec=SMALL_SPEC)
    assert r.compiled and not r.correct, r.reason
    assert reason in r.reason, r.reason
    assert r.speedup_vs_eager is None and r.candidate_ms is None


def test_checked_only_candidate_passes_when_nothing_is_timed():
    # the same candidate is right on every call it makes untimed: what catches it is the
    # checking of timed calls and the check after timing, not some other rule
    r = verify(RELU, candidate("relu_checked_only"), input_spec=SMALL_SPEC, time_it=False)
    assert r.correct, r.reason


def test_honest_candidate_is_checked_during_and_after_timing():
    r = verify(RELU, candidate("relu_triton"), input_spec=SMALL_SPEC)
    assert r.correct and r.reason == "correct", r.reason
    assert r.details["timed_calls_checked"] == 3
    assert r.details["constant_answer_margin"] > 100


def test_constant_reference_gets_correctness_credit_only():
    # KernelBench level 2 #80: max over dim 1 (keepdim), minus its mean over that size-1 axis,
    # is zero for every input; a kernel that writes zeros is correct and wins any race
    code = kernelbench("80_Gemm_Max_Subtract_GELU", level=2)
    info = {"init_args": json.dumps([64, 32, 1]),
            "input_spec": json.dumps([{"kind": "tensor", "shape": [16, 64], "dtype": "float32"}])}
    out = compute_score("curate/test", reply(candidate("gemm_max_zeros")), code, info)
    assert out["correct"] and out["speedup_vs_eager"] == 0.0
    assert out["score"] == pytest.approx(0.1 + 0.3)
    assert "does not depend on its inputs" in out["reason"]


def test_a_reference_that_is_rounding_noise_is_judged_elementwise():
    # KernelBench level 2 #23: the mean of a group-normalized tensor is zero in exact
    # arithmetic; float32 returns noise near 1e-9, and an honest kernel's noise differs from
    # the reference's by a relative L2 error near 1 (it failed on that before)
    code = kernelbench("23_Conv3d_GroupNorm_Mean", level=2)
    info = {"init_args": json.dumps([3, 8, 3, 4]),
            "input_spec": json.dumps([{"kind": "tensor", "shape": [4, 3, 6, 8, 8], "dtype": "float32"}])}
    honest = candidate("conv3d_gn_mean_triton")
    out = compute_score("curate/test", reply(honest), code, info)
    assert out["correct"] and out["speedup_vs_eager"] == 0.0, out["reason"]
    assert "does not depend on its inputs" in out["reason"] and "rounding noise" in out["reason"]
    # the elementwise test still fails a kernel that skips the normalization
    wrong = honest.replace("        x = self.group_norm(x)\n", "")
    assert wrong != honest
    out = compute_score("curate/test", reply(wrong), code, info)
    assert not out["correct"] and "elements outside atol" in out["reason"], out["reason"]


def test_noise_tolerance_keeps_the_relative_test_for_small_but_meaningful_outputs():
    from curate.verify.correctness import compare, noise_tolerance

    torch.manual_seed(0)
    x = torch.randn(2, 200_000)
    softmax = torch.nn.Softmax(dim=-1)
    out = softmax(x)  # every entry near 5e-6: within atol of zero, yet far from noise
    assert noise_tolerance(softmax, [x], out) is None
    assert not compare(out, torch.zeros_like(out)).ok
    gn = torch.nn.GroupNorm(2, 8)
    y = torch.randn(4, 8, 16)
    noise = gn(y).mean(dim=[1, 2])
    tol = noise_tolerance(_MeanOf(gn), [y], noise)
    assert tol is not None and math.isinf(tol.rel_l2) and tol.atol == 1e-4
    assert compare(noise, torch.zeros_like(noise), tol).ok
    assert not compare(noise, torch.full_like(noise, 1e-3), tol).ok


class _MeanOf(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x).mean(dim=[1, 2])


def test_constant_answer_margin_follows_the_verifiers_tolerance():
    torch.manual_seed(0)
    xs = [torch.randn(16, 1000) for _ in range(4)]
    # a softmax and a mean-reduced loss barely move between draws, but a constant still fails
    assert constant_answer_margin([torch.softmax(x, 1) for x in xs]) > 10
    targets = [torch.randn(16, 1000) for _ in xs]
    losses = [torch.nn.functional.mse_loss(x, t) for x, t in zip(xs, targets)]
    assert constant_answer_margin(losses) > 10
    # a softmax over a size-1 axis is all ones whatever the input: a constant passes
    assert constant_answer_margin([torch.softmax(x[:, :1], 1) for x in xs]) <= 1
    assert constant_answer_margin([x * 0 for x in xs]) == 0
    with pytest.raises(ValueError):
        constant_answer_margin(xs[:1])


def test_excess_is_at_most_one_exactly_when_compare_passes():
    from curate.verify.correctness import compare

    ref = torch.randn(1000, dtype=torch.float64).float()
    for scale in (0.0, 1e-6, 5e-5, 2e-4, 1e-2):
        out = ref + scale * torch.randn(1000)
        assert (excess(ref, out) <= 1) == compare(ref, out).ok, scale
    assert excess(ref, ref[:10]) == math.inf
    assert excess((ref, "sum"), (ref, "max")) == math.inf  # a non-number leaf must be equal
    assert excess((ref, 3), (ref, 4)) > 1  # numbers follow the fp32 tolerance


def test_output_problem_names_subclasses_and_shadowed_methods():
    class Sub(torch.Tensor):
        pass

    plain = torch.zeros(3)
    assert output_problem(plain) is None
    assert output_problem((plain, {"a": plain})) is None
    assert "subclass" in output_problem(plain.as_subclass(Sub))
    assert "out[1]" in output_problem((plain, plain.as_subclass(Sub)))
    shadow = torch.zeros(3)
    shadow.detach = lambda: plain
    assert "carries its own detach" in output_problem(shadow)
    param = torch.nn.Parameter(torch.zeros(3))
    assert output_problem(param, expected=param) is None  # the reference returned one too


def test_sealed_outputs_round_trip_and_detect_writes():
    sealer = Sealer()
    out = {"y": torch.randn(4, 5), "rest": (torch.tensor(2.5), torch.arange(6), torch.rand(3) > 0.5,
                                             torch.randn(2, dtype=torch.bfloat16))}
    sealed = sealer.seal(out)
    assert sealed["y"].bits.dtype == torch.int32  # not findable as a float32 tensor of that shape
    back = sealer.unseal(sealed)
    for a, b in zip(torch.utils._pytree.tree_leaves(out), torch.utils._pytree.tree_leaves(back)):
        assert a.dtype == b.dtype and torch.equal(a, b)
    sealed["y"].bits.zero_()
    with pytest.raises(Tampered):
        sealer.unseal(sealed)


def test_partial_replacement_is_not_a_decoy():
    # the reference runs relu twice; a candidate that moves one of them into a kernel runs the
    # other in PyTorch, which the decoy rule (every reference operator, as often, outside the
    # candidate's kernels) must not count against it
    two = (forward_problem("return torch.relu(x) + torch.relu(2 * x)")
           + "\n\ndef get_inputs():\n    return [torch.randn(8, 125)]\n\n\ndef get_init_inputs():\n    return []\n")
    r = verify(two, candidate("two_relu_partial"), time_it=False)
    assert r.correct, r.reason
    assert r.details["reference_ops"] == ["add", "mul", "relu"]
    # the same reference with a decoy: a kernel beside both ReLUs in PyTorch
    decoy = candidate("two_relu_partial").replace("return first + torch.relu(2 * x)",
                                                  "return torch.relu(x) + torch.relu(2 * x) + 0 * first")
    r = verify(two, decoy, time_it=False)
    assert not r.correct and "run outside the candidate's kernels" in r.reason, r.reason


class _CountingOutputs(Sequence):
    """Builds output ``i`` afresh on every access and counts how many built ones are alive."""

    def __init__(self, outputs):
        self.outputs, self.alive, self.most = outputs, 0, 0

    def __len__(self):
        return len(self.outputs)

    def __getitem__(self, i):
        t = self.outputs[i].clone()
        self.alive += 1
        self.most = max(self.most, self.alive)
        weakref.finalize(t, self._gone)
        return t

    def _gone(self):
        self.alive -= 1


def test_constant_answer_margin_reads_sealed_outputs_two_at_a_time():
    # the verifier keeps reference outputs sealed and opens them for this check: the same
    # margin as on the plain outputs, without holding every draw's output at once
    torch.manual_seed(1)
    outs = [torch.softmax(torch.randn(64, 300), 1) for _ in range(5)]
    sealer = Sealer()
    sealed = [sealer.seal(o) for o in outs]
    assert constant_answer_margin(sealer.opened(sealed)) == constant_answer_margin(outs) > 10
    counting = _CountingOutputs(outs)
    assert constant_answer_margin(counting) == constant_answer_margin(outs)
    assert counting.most <= 2
    const = [torch.ones(8, 8) for _ in range(3)]
    assert constant_answer_margin(sealer.opened([sealer.seal(c) for c in const])) == 0
    assert sealer.opened(sealed)[1:3][0].equal(outs[1])
