"""A problem's structure in KernelBench's terms: its ``level`` and operator ``category``.

Both are read from the ATen operators one forward runs, traced on the ``meta`` device by
:func:`curate.cost.forward_cost` (shapes propagate, nothing is computed, so a
GPU-sized shape costs milliseconds; a problem that cannot run on ``meta`` is traced on real
CPU tensors at its small mined shape). :func:`structure_task` runs in a sandboxed process:
the code is mined, hence untrusted.

Operators that launch no kernel (views) are already left out by the tracer. Of the rest,
*layout* operators (``clone``, ``copy_``, ``_to_copy``, tensor factories such as ``zeros``)
and *bookkeeping* ones (at most :data:`BOOKKEEPING_BYTES` bytes moved: batch norm's
``num_batches_tracked += 1``) do not count as steps of the computation. The remaining
operators are the problem's *steps*; *heavy* steps are matrix products, convolutions and
attention (the tracer's ``matmul``/``conv``/``attention`` kinds).

``level`` (KernelBench: 1 a single operator, 2 a short fusable chain such as
conv + bias + activation, 3 a block or a whole model):

1. more than :data:`MAX_CHAIN` steps, or at least 3 heavy ones: **3** (a block or model: an
   MLP, a ResNet block, an attention layer, an unrolled RNN);
2. two heavy steps: **2** when there are at most :data:`MAX_PAIR_CHAIN` steps in all (a GEMM
   pair with an epilogue), else **3**;
3. one heavy step: **1** when it is the only step, else **2** (the heavy operator and its
   fusable epilogue: KernelBench's level-2 pattern);
4. no heavy step: **1** (elementwise operators, reductions, normalisations, pooling, losses:
   KernelBench's level 1 holds hand-written RMSNorm, Softsign or triplet-margin losses that
   take up to 10 ATen steps; without a heavy anchor such a chain is one operator written out).
   A forward with no step at all (a pure reshape) is level 1 too.

``category`` is where the forward spends its time: every step's cost is its roofline time on
an H100 (:func:`op_ms`: the larger of FLOPs over the sustained rate of its class and bytes
over the memory bandwidth, as :func:`curate.cost.device_ms` prices it), summed per
category of :data:`CATEGORIES`; the largest sum names the problem. The taxonomy follows
KernelBench's level-1 sections:

==============  ==================================================================
matmul          mm, addmm, bmm, baddbmm, linear, matrix-vector products
conv            convolutions and transposed convolutions (1-3 D, depthwise)
attention       fused attention operators, and a softmax between two batched products
                (``bmm -> softmax -> bmm``: attention written out; those steps count here)
normalization   batch / layer / group / instance / RMS norm operators
pooling         max / average / adaptive pooling
reduction       sums, means, max/min, arg-max/min, norms, softmax, scans (cumsum), losses
embedding       embedding lookups, gather, index_select, advanced indexing
data_movement   cat, stack, pad, flip, roll, repeat, interpolation, pixel shuffle, scatter,
                and a forward that only reshapes (no step)
elementwise     everything else: activations, arithmetic, comparisons, dropout
other           FFTs, linear algebra (solve, QR, SVD), sorting
==============  ==================================================================

Thresholds were chosen on KernelBench's own 250 problems (``curate/data/kernelbench``);
``benchmarks/structure_kernelbench.py`` prints the confusion against their real levels.

Imports only torch, the standard library and curate's torch-only modules.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Iterable, Sequence

from curate.cost import GPU_PROFILES, OpCost

#: The categories, in the order tables list them.
CATEGORIES = ("matmul", "conv", "attention", "normalization", "pooling", "reduction",
              "embedding", "data_movement", "elementwise", "other")
#: More steps than this make a block or a model (level 3).
MAX_CHAIN = 16
#: Two heavy steps stay a fusable chain (level 2) up to this many steps.
MAX_PAIR_CHAIN = 8
#: Operators moving at most this many bytes are bookkeeping (a step counter), not steps.
BOOKKEEPING_BYTES = 64
#: The trace stops past this many kernels (the answer, level 3, is clear long before).
MAX_KERNELS = 2000

_LAYOUT = {"clone", "copy_", "copy", "_to_copy", "contiguous", "zeros", "zeros_like", "ones",
           "ones_like", "full", "full_like", "fill_", "zero_", "new_zeros", "new_ones", "new_full",
           "arange", "scalar_tensor", "lift_fresh_copy", "_copy_from", "_copy_from_and_resize",
           "resize_", "empty_like", "rand", "randn", "rand_like", "randn_like", "linspace"}
_NAMED = {
    "matmul": {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_scaled_mm", "addbmm", "mv",
               "addmv", "dot", "vdot", "addr", "outer", "einsum", "tensordot", "_int_mm"},
    "normalization": {"native_layer_norm", "native_batch_norm", "_native_batch_norm_legit",
                      "_native_batch_norm_legit_no_training", "_native_batch_norm_legit_functional",
                      "_batch_norm_with_update", "native_group_norm", "_fused_rms_norm", "rms_norm",
                      "layer_norm", "group_norm", "batch_norm", "instance_norm", "local_response_norm",
                      "cudnn_batch_norm", "miopen_batch_norm", "weight_norm", "_weight_norm",
                      "_weight_norm_interface"},
    "reduction": {"sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "prod", "nansum",
                  "nanmean", "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "logsumexp",
                  "var", "std", "var_mean", "std_mean", "norm", "linalg_vector_norm", "linalg_norm",
                  "frobenius_norm", "_softmax", "_log_softmax", "_safe_softmax", "softmax",
                  "log_softmax", "all", "any", "count_nonzero", "median", "nanmedian", "mode",
                  "kthvalue", "aminmax", "nll_loss_forward", "nll_loss2d_forward", "nll_loss",
                  "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
                  "binary_cross_entropy", "binary_cross_entropy_with_logits", "soft_margin_loss",
                  "multi_margin_loss", "multilabel_margin_loss_forward", "cross_entropy_loss",
                  "cosine_similarity", "cdist", "_cdist_forward", "_euclidean_dist", "pdist",
                  "_pdist_forward", "trace", "bincount", "histc"},
    "embedding": {"embedding", "embedding_bag", "_embedding_bag", "_embedding_bag_forward_only",
                  "index_select", "gather", "take", "take_along_dim", "index", "masked_select",
                  "nonzero", "one_hot"},
    "data_movement": {"cat", "stack", "constant_pad_nd", "pad", "reflection_pad1d", "reflection_pad2d",
                      "reflection_pad3d", "replication_pad1d", "replication_pad2d", "replication_pad3d",
                      "flip", "roll", "repeat", "tile", "repeat_interleave", "pixel_shuffle",
                      "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle", "im2col",
                      "col2im", "grid_sampler_2d", "grid_sampler_3d", "scatter", "scatter_",
                      "scatter_add", "scatter_add_", "scatter_reduce", "index_put", "index_put_",
                      "_index_put_impl_", "index_add", "index_copy", "index_fill", "masked_scatter",
                      "unsafe_split", "unsafe_chunk", "split_with_sizes_copy", "unfold_copy",
                      "_unsafe_index", "_unsafe_index_put", "rot90", "diag_embed", "diag"},
    "other": {"sort", "topk", "argsort", "msort", "unique", "_unique2", "unique_dim", "searchsorted",
              "bucketize", "linalg_solve", "linalg_inv", "inverse", "linalg_qr", "linalg_svd",
              "_linalg_svd", "linalg_cholesky", "cholesky", "linalg_eigh", "_linalg_eigh",
              "linalg_det", "_linalg_det", "logdet", "slogdet", "_linalg_slogdet", "triangular_solve",
              "linalg_solve_triangular", "linalg_lu", "linalg_lu_factor_ex", "lu_unpack",
              "linalg_pinv", "_linalg_solve_ex", "linalg_inv_ex", "linalg_cholesky_ex",
              "linalg_matrix_exp", "matrix_exp", "polar", "view_as_real", "view_as_complex"},
}
_BY_NAME = {name: cat for cat, names in _NAMED.items() for name in names}
_SOFTMAX = {"_softmax", "_safe_softmax", "softmax"}
_BATCHED = {"bmm", "baddbmm", "matmul", "einsum"}


def op_category(op: OpCost) -> str:
    """The category (a member of :data:`CATEGORIES`) of one traced operator."""
    name = op.name
    if op.kind == "conv":
        return "conv"
    if op.kind == "attention" or "attention" in name:
        return "attention"
    if op.kind == "matmul":
        return "matmul"
    if name in _BY_NAME:
        return _BY_NAME[name]
    if "pool" in name:
        return "pooling"
    if name.startswith(("upsample_", "_upsample_")):
        return "data_movement"
    if name.startswith(("fft_", "_fft_", "linalg_", "_linalg_")):
        return "other"
    return "elementwise"


def op_ms(op: OpCost, gpu: str = "h100") -> float:
    """Roofline milliseconds of one operator on ``gpu`` (no launch floor; see the docstring)."""
    prof = GPU_PROFILES[gpu]
    if op.half and op.kind in ("matmul", "conv", "attention"):
        rate = prof.half
    else:
        rate = {"matmul": prof.matmul_fp32, "conv": prof.conv_fp32,
                "attention": prof.attention_fp32}.get(op.kind, prof.matmul_fp32)
    return 1e3 * max(op.flops / rate, op.bytes / prof.bandwidth)


def steps(ops: Iterable[OpCost]) -> list[OpCost]:
    """The operators that count as steps of the computation (no layout, no bookkeeping)."""
    return [o for o in ops if o.name not in _LAYOUT and o.bytes > BOOKKEEPING_BYTES]


def _is_heavy(op: OpCost) -> bool:
    return op.kind in ("matmul", "conv", "attention")


def level_of(step_ops: Sequence[OpCost], truncated: bool = False) -> int:
    """KernelBench level (1, 2 or 3) of a forward's steps (see the module docstring);
    ``truncated``: the trace stopped at :data:`MAX_KERNELS` (a model: level 3)."""
    n = len(step_ops)
    heavy = sum(1 for o in step_ops if _is_heavy(o))
    if truncated or n > MAX_CHAIN or heavy >= 3:
        return 3
    if heavy == 2:
        return 2 if n <= MAX_PAIR_CHAIN else 3
    if heavy == 1:
        return 1 if n == 1 else 2
    return 1


def category_ms(step_ops: Sequence[OpCost], gpu: str = "h100") -> dict[str, float]:
    """Roofline milliseconds per category (only categories with steps): attention written
    out as ``bmm -> softmax -> bmm`` counts as ``attention``, and an elementwise step counts
    for the category of the last non-elementwise step before it (its epilogue)."""
    cats = [op_category(o) for o in step_ops]
    for i, o in enumerate(step_ops):
        if o.name not in _SOFTMAX:
            continue
        before = next((j for j in range(i - 1, -1, -1) if step_ops[j].name in _BATCHED), None)
        after = next((j for j in range(i + 1, len(step_ops)) if step_ops[j].name in _BATCHED), None)
        if before is not None and after is not None:
            for j in range(before, after + 1):
                cats[j] = "attention"
    out: dict[str, float] = defaultdict(float)
    producer = "elementwise"
    for o, c in zip(step_ops, cats):
        if c != "elementwise":
            producer = c
        # an elementwise step fuses into the kernel of the step before it (an epilogue):
        # conv + bias + ReLU is a convolution problem even when, unfused, the two
        # elementwise passes move more bytes than the convolution
        out[producer if c == "elementwise" else c] += op_ms(o, gpu)
    return dict(out)


def classify(ops: Sequence[OpCost], truncated: bool = False) -> dict[str, Any]:
    """Level and category of a traced forward.

    Args:
        ops: the tracer's operators (:attr:`curate.cost.ForwardCost.ops`).
        truncated: the trace stopped early (:class:`curate.cost.TooManyKernels`).
    Returns:
        ``{"level": 1|2|3, "category": str, "steps": int, "heavy_steps": int,
        "library_share": roofline share in [0, 1] of the heavy steps (a static stand-in for
        the profiler's share of library kernels), "category_share": {category: share of
        roofline time in [0, 1]}, "category_steps": {category: steps of that category (each
        step's own, epilogues not folded)}, "distinct_ops": distinct ATen operators among the
        steps, "top_ops": [ATen names, most frequent first, at most 8]}``.
    """
    st = steps(ops)
    per = category_ms(st)
    total = sum(per.values())
    if not st:
        category = "data_movement"
    elif total <= 0:
        category = op_category(st[0])
    else:  # ties (equal roofline times) go to the earlier category of CATEGORIES
        category = max(CATEGORIES, key=lambda c: (per.get(c, -1.0), -CATEGORIES.index(c)))
    heavy_ms = sum(op_ms(o) for o in st if _is_heavy(o))
    raw_ms = sum(op_ms(o) for o in st)
    counts: dict[str, int] = defaultdict(int)
    per_cat: dict[str, int] = defaultdict(int)
    for o in st:
        counts[o.name] += 1
        per_cat[op_category(o)] += 1
    return {"level": level_of(st, truncated), "category": category, "steps": len(st),
            "heavy_steps": sum(1 for o in st if _is_heavy(o)),
            "library_share": heavy_ms / raw_ms if raw_ms > 0 else 0.0,
            "category_share": {c: round(v / total, 4) for c, v in per.items()} if total > 0 else {},
            "category_steps": dict(per_cat), "distinct_ops": len(counts),
            "top_ops": [n for n, _ in sorted(counts.items(), key=lambda kv: -kv[1])[:8]]}


def structure_task(code: str, init_args: list | None = None, input_spec: list[dict] | None = None,
                   small_spec: list[dict] | None = None, small_init: list | None = None,
                   max_kernels: int = MAX_KERNELS, dtype: str | None = None) -> dict[str, Any]:
    """Trace one problem's forward and classify it (run it in a sandboxed process).

    Args:
        code: KernelBench-format problem source.
        init_args, input_spec: the constructor arguments and inputs to trace on ``meta``;
            None: the code's own ``get_init_inputs()`` / ``get_inputs()``, called under
            ``torch.device("meta")`` (KernelBench's files, whose inputs take gigabytes).
        small_spec, small_init: a small shape to trace on real CPU tensors when the forward
            cannot run on ``meta`` (it reads tensor values); None: no such fallback.
        max_kernels: stop tracing past this many kernels (the problem is then level 3).
        dtype: the precision the problem runs in (a torch name such as ``bfloat16``, the
            ``dtype`` column of a precision variant): the model's floating parameters and
            buffers and every floating input are cast to it, as the harness does; None keeps
            the code's own dtypes.
    Returns:
        :func:`classify`'s dict plus ``ok: True``, ``traced_on`` (``meta`` or ``cpu``),
        ``kernels`` (kernel-launching operators traced), ``flops``, ``bytes`` (moved by all
        kernels), ``input_bytes``, ``output_bytes``, ``param_bytes`` (parameters and buffers)
        and ``seconds``; or ``{"ok": False, "error": str}`` when neither trace runs. A CPU
        trace is at the small shape: its sizes are not the problem's.
    """
    import torch

    from curate.cost import TooManyKernels, forward_cost
    from curate.problem import ProblemLoadError, build_inputs, cast_floating, load_problem, spec_bytes, spec_in_dtype

    t0 = time.monotonic()
    try:
        ns = load_problem(code)
    except ProblemLoadError as exc:
        return {"ok": False, "error": f"load: {exc}"[:300]}

    def trace(device: str, init: list | None, spec: list[dict] | None):
        torch.manual_seed(0)
        with torch.device(device):
            model = ns["Model"](*(ns["get_init_inputs"]() if init is None else init))
            inputs = (cast_floating(ns["get_inputs"](), dtype) if spec is None
                      else build_inputs(spec_in_dtype(spec, dtype), device, seed=0))
        if dtype:  # a precision variant: parameters too, or a bf16 input meets a float32 weight
            model = model.to(getattr(torch, dtype))
        try:
            return forward_cost(model, inputs, max_kernels=max_kernels), False
        except TooManyKernels as exc:
            return exc.cost, True

    attempts = [("meta", init_args, input_spec)]
    if small_spec is not None and spec_bytes(small_spec) <= 64 * 2**20:
        attempts.append(("cpu", small_init if small_init is not None else init_args, small_spec))
    error = ""
    for device, init, spec in attempts:
        try:
            cost, truncated = trace(device, init, spec)
        except Exception as exc:  # untrusted code; a meta failure falls back to the CPU
            error = f"{device}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
            continue
        out = classify(cost.ops, truncated)
        out.update(ok=True, traced_on=device, kernels=cost.kernels, truncated=truncated,
                   flops=cost.flops, bytes=cost.bytes, input_bytes=cost.input_bytes,
                   output_bytes=cost.output_bytes, param_bytes=cost.param_bytes,
                   seconds=time.monotonic() - t0)
        return out
    return {"ok": False, "error": error}
