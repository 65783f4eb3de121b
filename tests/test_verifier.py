"""The verifier on KernelBench 19_ReLU with real Triton candidates (TRITON_INTERPRET=1 on CPU)."""

from __future__ import annotations

import pytest
import torch

from curate.verify import extract_code
from curate.verify import verify as _verify
from curate.verify import correctness
from curate.sandbox import Sandbox
from curate.verify.correctness import compare, tolerance_for
from verify_fixtures import SMALL_SPEC, candidate, kernelbench, torch_relu_problem

RELU = kernelbench("19_ReLU")
GPU = torch.cuda.is_available()


def verify(*args, **kwargs):
    """The verifier on the CPU (Triton interpreter), also when the test machine has a GPU."""
    return _verify(*args, **{"device": "cpu", **kwargs})


def test_correct_triton_candidate_passes_and_is_timed():
    r = verify(RELU, candidate("relu_triton"), input_spec=SMALL_SPEC, timeout_s=120)
    assert r.compiled and r.correct, r.reason
    assert r.reason == "correct"
    assert r.details["launches"] == 5  # one kernel launch per input set, five fresh sets
    assert r.details["triton_interpret"] is True and r.details["device"] == "cpu"
    assert r.eager_ms > 0 and r.candidate_ms > 0
    assert r.speedup_vs_eager == pytest.approx(r.eager_ms / r.candidate_ms)
    assert r.speedup_vs_inductor is None  # Inductor is not timed on the CPU by default
    assert r.details["reference_ops"] == ["relu"] and r.details["candidate_ops"] == []


def test_outsized_speedup_is_timed_again():
    # any speedup above 0x counts as suspicious here, so the candidate is re-timed on fresh inputs
    r = verify(RELU, candidate("relu_triton"), input_spec=SMALL_SPEC, suspicious_speedup=0.0)
    assert r.correct, r.reason
    first, second = r.details["candidate_timing"], r.details["candidate_retiming"]
    assert r.candidate_ms == max(first["median_ms"], second["median_ms"])


@pytest.mark.parametrize("name, compiled, reason", [
    ("relu_zeros", True, "wrong output on trial 0"),
    ("relu_off_by_one", True, "wrong output on trial 0"),
    ("relu_torch", True, "no custom kernel launched"),
    ("relu_subclass", True, "no custom kernel launched"),
    ("relu_decoy", True, "the reference's PyTorch operators (relu) run outside"),
    ("relu_replay", True, "no custom kernel launched on trial 1"),
    ("relu_inplace", True, "candidate modified its inputs"),
    ("relu_patch_timer", False, "candidate replaced time.perf_counter"),
    ("relu_patch_event", False, "candidate replaced torch.cuda.Event"),
    ("relu_patch_sync", False, "candidate replaced torch.cuda.synchronize"),
    ("relu_constant", True, "wrong output on trial 0"),
    ("relu_fp16", True, "wrong output on trial 0"),
    ("relu_partial", True, "wrong output on trial 0"),
    ("relu_thread", True, "candidate left 1 Python thread(s) running"),
    ("relu_syntax_error", False, "candidate failed to load: SyntaxError"),
    ("relu_triton_compile_error", False, "forward raised InterpreterError"),
])
def test_bad_candidates_are_rejected(name, compiled, reason):
    r = verify(RELU, candidate(name), input_spec=SMALL_SPEC, timeout_s=120)
    assert not r.correct
    assert r.compiled is compiled
    assert reason in r.reason, r.reason
    assert r.speedup_vs_eager is None and r.candidate_ms is None


def test_unwritten_output_elements_fail_on_poisoned_memory():
    # one input set of 8 MB: without poisoning the candidate's torch.empty gets the memory of
    # the reference's freed output, right where the candidate writes nothing, and passes
    spec = [{"kind": "tensor", "shape": [1024, 2048], "dtype": "float32"}]
    r = verify(RELU, candidate("relu_partial"), input_spec=spec, n_trials=1, time_it=False,
               timeout_s=300)
    assert r.compiled and not r.correct and "wrong output on trial 0" in r.reason, r.reason


def _fresh_cpu_tensors_are_poisoned() -> bool:
    from curate.verify.poison import poison_host_allocations

    assert poison_host_allocations()
    for _ in range(3):  # freed small blocks land in glibc's per-thread cache, if it is on
        [torch.full((n,), 1.0) for n in (10, 16, 100)]
    for n in (10, 16, 10**4, 10**7):
        t = torch.empty(n)
        assert bool((t.view(torch.int32) == 0x7F7F7F7F).all()), n  # 3.4e38 everywhere
    assert bool(torch.empty(100, dtype=torch.float16).isnan().all())
    return True


def test_poisoned_host_allocations_and_reference_outputs():
    # in a sandbox task, as the verifier runs: the fork server starts with the tcache off
    outcome = Sandbox(workers=1, timeout_s=120, mem_mb=None).run(_fresh_cpu_tensors_are_poisoned)
    assert outcome.ok and outcome.value, outcome.error
    from curate.verify.poison import poison_outputs

    lin = torch.nn.Linear(4, 4)
    out, counts = torch.ones(3), torch.arange(4)
    assert poison_outputs((out, {"w": lin.weight.t(), "c": counts}), keep=lin.parameters()) == 2
    assert out.isnan().all() and (counts == torch.iinfo(torch.int64).max).all()
    assert torch.isfinite(lin.weight).all()  # a view of a parameter is left alone


def test_held_out_shape_catches_a_hard_coded_kernel():
    variants = [[{"kind": "tensor", "shape": [8, 300], "dtype": "float32"}]]
    fixed = verify(RELU, candidate("relu_hardcoded"), input_spec=SMALL_SPEC, time_it=False)
    assert fixed.correct, fixed.reason  # right on the prompted 1,000 elements ...
    held = verify(RELU, candidate("relu_hardcoded"), input_spec=SMALL_SPEC,
                  shape_variants=variants, time_it=False)
    assert not held.correct and "held-out shape 0" in held.reason  # ... wrong on 2,400
    good = verify(RELU, candidate("relu_triton"), input_spec=SMALL_SPEC,
                  shape_variants=variants, time_it=False)
    assert good.correct, good.reason
    assert len(good.details["errors"]) == 6  # five input sets and the held-out shape


def test_mined_style_problem_with_get_inputs():
    # torch's own nn.ReLU source, inputs from its rendered get_inputs() (no input_spec given)
    r = verify(torch_relu_problem(), candidate("relu_triton"), time_it=False)
    assert r.correct, r.reason


def test_two_input_problem_with_a_tiled_triton_matmul():
    # KernelBench 1_Square_matrix_multiplication_ at 96x80 @ 80x72: no size divides the 64x64x32 tiles
    spec = [{"kind": "tensor", "shape": [96, 80]}, {"kind": "tensor", "shape": [80, 72]}]
    r = verify(kernelbench("1_Square_matrix_multiplication_"), candidate("matmul_triton"),
               input_spec=spec, time_it=False)
    if "only 0-dimensional arrays can be converted" in r.reason:
        import numpy
        import triton

        # Triton 3.6's interpreter turns a runtime loop bound into an int with int() on a
        # 1-element array, which numpy 2.5 refuses (seen on the GPU machine's image); the
        # same kernel is verified on the GPU by test_gpu_tf32_matmul_fails_the_fp32_tolerance
        pytest.skip(f"Triton {triton.__version__} interpreter with numpy {numpy.__version__}: {r.reason}")
    assert r.correct, r.reason
    assert r.details["reference_ops"] == ["mm"] and r.details["launches"] == 5


def test_broken_reference_is_not_the_candidates_fault():
    r = verify("import torch\nclass Model(torch.nn.Module):\n    pass\n", candidate("relu_triton"))
    assert r.reference_error and not r.compiled and r.reason.startswith("reference failed")


def test_compare_rejects_zeros_for_a_near_zero_reference():
    # KernelBench issue 165: zeros pass atol=1e-4 where the reference is tiny everywhere
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(64, 64, generator=g) * 1e-6
    zeros = torch.zeros_like(ref)
    assert torch.allclose(zeros, ref, atol=1e-4, rtol=1e-4)
    c = compare(ref, zeros)
    assert not c.ok and "relative L2 error 1" in c.reason
    assert compare(ref, ref.clone()).ok


def test_compare_dtypes_shapes_nan_and_precision():
    g = torch.Generator().manual_seed(1)
    ref = torch.randn(32, 32, generator=g)
    assert not compare(ref, ref.double()).ok
    assert not compare(ref, ref.T.contiguous()[:16]).ok
    nan = ref.clone()
    nan[3, 3] = float("nan")
    assert "NaN" in compare(ref, nan).reason
    # computing in bf16 and casting back fails the fp32 test ...
    assert not compare(ref, ref.bfloat16().float()).ok
    # ... a bf16 reference allows bf16 rounding of an fp32 computation
    assert compare(ref.bfloat16(), (ref.double() * 1.0001).bfloat16()).ok
    assert tolerance_for(torch.bfloat16).atol == 1e-2 and tolerance_for(torch.float32).atol == 1e-4
    assert compare((ref, 3), (ref.clone(), 3)).ok
    assert "structure" in compare((ref, ref), [ref]).reason
    assert not compare(torch.arange(5), torch.arange(5) + (torch.arange(5) == 4)).ok


def test_compare_in_chunks_finds_the_one_bad_element(monkeypatch):
    monkeypatch.setattr(correctness, "CHUNK", 100)  # 10 steps over 1,000 elements
    g = torch.Generator().manual_seed(2)
    ref = torch.randn(10, 100, generator=g)
    out = ref.clone()
    assert compare(ref, out).ok
    out[7, 55] += 0.5
    c = compare(ref, out)
    assert not c.ok and "1 of 1000 elements" in c.reason and c.max_abs_err == pytest.approx(0.5)
    inf = ref.clone()
    inf[9, 99] = float("inf")
    assert "infinities differ" in compare(ref, inf).reason
    assert compare(inf, inf.clone()).ok


def test_extract_code_takes_the_last_python_block():
    text = "a\n```python\nfirst = 1\n```\nb\n```\nplain = 2\n```\n```python\nlast = 3\n```\ntail"
    assert extract_code(text) == "last = 3\n"
    assert extract_code("x = 1\n") == "x = 1\n"
    assert extract_code("text\n```python\ncut = 1\n") == "cut = 1\n"  # unterminated (max tokens)
    assert extract_code("```\nonly = 1\n```") == "only = 1\n"


# ---- on a GPU only (skipped on the CPU CI machine; both pass on an H100) ----

@pytest.mark.skipif(not GPU, reason="needs CUDA")
def test_gpu_tf32_matmul_fails_the_fp32_tolerance():
    mm = kernelbench("1_Square_matrix_multiplication_")
    spec = [{"kind": "tensor", "shape": [1024, 1024]}, {"kind": "tensor", "shape": [1024, 1024]}]
    ieee = _verify(mm, candidate("matmul_triton"), input_spec=spec, device="cuda", inductor=False)
    assert ieee.correct, ieee.reason
    tf32 = _verify(mm, candidate("matmul_tf32"), input_spec=spec, device="cuda", time_it=False)
    assert tf32.compiled and not tf32.correct and "outside atol" in tf32.reason


@pytest.mark.skipif(not GPU, reason="needs CUDA")
def test_gpu_side_stream_kernel_scores_zero_correctness():
    spec = [{"kind": "tensor", "shape": [4096, 16384]}]
    r = _verify(RELU, candidate("relu_side_stream"), input_spec=spec, device="cuda", inductor=False)
    assert r.compiled and not r.correct and "side stream" in r.reason, r.reason
    honest = _verify(RELU, candidate("relu_triton"), input_spec=spec, device="cuda", inductor=False)
    assert honest.correct, honest.reason
    assert honest.details["stream_check"]["kernels_on_side_streams"] == []


GPU_EXPECTED = [  # the CPU list above, on CUDA; honest candidates must pass there too
    ("relu_triton", True, "correct"),
    ("relu_cuda_inline", True, "correct"),
    ("relu_zeros", False, "wrong output on trial 0"),
    ("relu_constant", False, "wrong output on trial 0"),
    ("relu_off_by_one", False, "wrong output on trial 0"),
    ("relu_partial", False, "wrong output on trial 0"),
    ("relu_fp16", False, "wrong output on trial 0"),
    ("relu_torch", False, "no custom kernel launched"),
    ("relu_subclass", False, "no custom kernel launched"),
    ("relu_decoy", False, "the reference's PyTorch operators (relu) run outside"),
    ("relu_replay", False, "no custom kernel launched on trial 1"),
    ("relu_inplace", False, "candidate modified its inputs"),
    ("relu_patch_timer", False, "candidate replaced time.perf_counter"),
    ("relu_patch_event", False, "candidate replaced torch.cuda.Event"),
    ("relu_patch_sync", False, "candidate replaced torch.cuda.synchronize"),
    ("relu_thread", False, "candidate left 1 Python thread(s) running"),
    ("relu_side_stream", False, "side stream"),
    ("relu_syntax_error", False, "candidate failed to load: SyntaxError"),
    ("relu_deferred", False, "a torch.Tensor subclass: outputs must be plain torch.Tensor"),
    ("relu_deferred_mode", False, "candidate left a torch function or dispatch mode"),
    ("relu_checked_only", False, "wrong output on "),
    # on CUDA the caching allocator can hand trial 1 the block trial 0's input had: the
    # pointer cache then replays a stale output there already, before any timed call
    ("relu_pointer_cache", False, "wrong output on "),
    ("relu_gc_copy", False, "wrong output on trial 0"),
]


@pytest.mark.skipif(not GPU, reason="needs CUDA")
@pytest.mark.parametrize("name, correct, reason", GPU_EXPECTED)
def test_gpu_red_team(name, correct, reason):
    # 4,001,000 elements: not a multiple of the candidates' 256-wide blocks, so a dropped
    # tail block is wrong (1024 x 4000 is a multiple, and relu_off_by_one passed on it)
    spec = [{"kind": "tensor", "shape": [1000, 4001]}]
    r = _verify(RELU, candidate(name), input_spec=spec, device="cuda", inductor=False,
                timeout_s=600)
    assert r.correct is correct and reason in r.reason, r.reason
    if not correct:
        assert r.speedup_vs_eager is None


@pytest.mark.skipif(not GPU, reason="needs CUDA")
def test_gpu_unchecked_launch_error_is_the_forwards():
    """A launch with too much shared memory fails without running and without an asynchronous
    error; the verdict names it as the forward's failure, not the verifier's, and the worker's
    next job is not blamed for it."""
    spec = [{"kind": "tensor", "shape": [1000, 4001]}]
    r = _verify(RELU, candidate("relu_cuda_bad_launch"), input_spec=spec, device="cuda", inductor=False,
                timeout_s=600)
    assert not r.correct and r.reason.startswith("forward raised"), r.reason
    assert "invalid argument" in r.reason, r.reason
    from curate.verify import make_config
    from curate.verify.pool import VerifierPool

    pool = VerifierPool(workers=1, device="cuda")  # one persistent worker: the jobs run in turn
    try:
        cfg = make_config(input_spec=spec, device="cuda", inductor=False, time_it=False)
        bad = pool.verify(RELU, candidate("relu_cuda_bad_launch"), cfg, 600, "relu")
        good = pool.verify(RELU, candidate("relu_cuda_inline"), cfg, 600, "relu")
    finally:
        pool.close()
    assert bad.reason.startswith("forward raised") and not bad.reference_error, bad.reason
    assert good.correct, good.reason


GELU_KERNEL = '''@triton.jit
def gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    # a long comment, as models write them, that pushes the cause past the first 500 characters
    # of the message: Triton prints up to twelve lines of the kernel before it says what failed
    out = 0.5 * x * (1 + tl.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
    tl.store(out_ptr + offsets, out, mask=mask)
'''


def test_triton_compile_errors_are_reported_by_their_cause_and_line():
    """Triton's own CompilationError, as it raises one for ``tl.tanh`` (which
    ``triton.language`` lacks): the reason names the cause and the failing line, where the
    message's first 500 characters are only the kernel's source."""
    import ast

    from triton.compiler.errors import CompilationError, UnsupportedLanguageConstruct

    from curate.rank.stage import _reason_class
    from curate.verify.worker import _short

    node = next(n for n in ast.walk(ast.parse(GELU_KERNEL)) if isinstance(n, ast.Attribute) and n.attr == "tanh")
    cause = repr(AttributeError("module 'triton.language' has no attribute 'tanh'"))
    exc = CompilationError(GELU_KERNEL, node, cause)
    assert "has no attribute 'tanh'" not in f"CompilationError: {exc}"[:500]  # why the reason is built
    reason = _short(exc)
    assert reason.startswith(f"CompilationError: at 9:{node.col_offset}: AttributeError(\"module 'triton.language' has no attribute 'tanh'\")")
    assert reason.endswith("(in `out = 0.5 * x * (1 + tl.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))`)")
    loop = next(n for n in ast.walk(ast.parse(GELU_KERNEL)) if isinstance(n, ast.Assign))
    other = _short(UnsupportedLanguageConstruct(GELU_KERNEL, loop, "simultaneous multiple comparison is not supported"))
    assert other == ("UnsupportedLanguageConstruct: at 3:4: simultaneous multiple comparison is not supported "
                     "(in `pid = tl.program_id(0)`)")
    assert _reason_class(f"forward raised {reason}") == "forward raised CompilationError"  # the stats' class
    long = _short(RuntimeError("CUDA error: an illegal memory access was encountered\n" + "x" * 2000 + "\nthe end"))
    assert len(long) <= 500 and long.startswith("RuntimeError: CUDA error: an illegal memory") and long.endswith("the end")
