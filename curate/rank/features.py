"""The features the difficulty predictor reads: a problem's traced structure and its code.

:func:`features` turns one problem (its ``code`` and its meta-device trace,
:func:`curate.structure.structure_task`) into a flat ``{name: float}`` dict; the predictor
(:mod:`curate.rank.predict`) and its fit (``benchmarks/fit_difficulty.py``) read the same
names. Two groups:

- from the trace (``trace_ok`` 1, else all 0): the level (``level2``, ``level3``), the share
  of roofline time per operator category (``share_<category>``), the steps of some categories
  (``log_conv_steps``, ``log_matmul_steps``, ``log_reduction_steps``, ...: ``log2(1 + n)``),
  program size (``log_steps``, ``log_kernels``, ``log_distinct_ops``, ``truncated``), the
  arithmetic intensity (``log_intensity``: FLOPs per byte moved) and how much smaller the
  output is than the input (``log_out_in``: a reduction to a scalar loss is very negative).
  Absolute sizes are left out on purpose: one problem at two sizes is one problem to write a
  kernel for (KernelBench's sizes of 2024 and of now differ by up to 100x);
- from the code (:func:`code_features`, always present): lines of code, the ``nn`` layers
  the model builds (convolutions, transposed, 3-D, grouped or dilated ones, recurrent
  layers, attention, normalizations), whether it calls reductions or softmaxes and loss
  functions, loops and branches in the forwards, and the module classes defined.

Pure Python (``ast``): the GPU side may import it.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

from curate.problem import INPUTS_MARKER

#: Categories whose roofline share is a feature (the rest of :data:`curate.structure.CATEGORIES`
#: sums to one minus these).
SHARE_CATEGORIES = ("matmul", "conv", "attention", "normalization", "pooling", "reduction",
                    "embedding", "data_movement", "elementwise")
STEP_CATEGORIES = ("conv", "matmul", "reduction", "normalization", "pooling", "elementwise",
                   "data_movement", "embedding")
_RECURRENT = re.compile(r"\bnn\.(LSTM|GRU|RNN)\b|\b(LSTM|GRU|RNN)(Cell)?\(")
#: Normalization layers and their functional forms (a kernel for one needs a reduction over the
#: normalized axes and is judged against PyTorch's numerics: a common cause of wrong kernels).
_NORMALIZATIONS = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "LayerNorm", "RMSNorm",
                   "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LocalResponseNorm",
                   "batch_norm", "group_norm", "layer_norm", "instance_norm", "rms_norm",
                   "local_response_norm", "normalize")
#: Reductions, scans and softmaxes called in the code (method or function form).
_REDUCTIONS = ("sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "prod", "cumsum",
               "cumprod", "logsumexp", "softmax", "log_softmax", "Softmax", "LogSoftmax", "var", "std",
               "norm")
#: Loss functions in functional form (``nn.*Loss`` modules are matched by their suffix).
_LOSSES = ("cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
           "kl_div", "binary_cross_entropy", "triplet_margin_loss", "hinge_embedding_loss",
           "margin_ranking_loss", "cosine_similarity", "cosine_embedding_loss")


def _log2p(x: float) -> float:
    return math.log2(1.0 + max(0.0, float(x)))


def module_source(code: str) -> str:
    """``code`` without curate's generated inputs and without top-level ``get_inputs`` /
    ``get_init_inputs`` functions: the program a kernel is written for."""
    head = code.split(INPUTS_MARKER)[0]
    try:
        tree = ast.parse(head)
    except (SyntaxError, ValueError, RecursionError):
        return head
    lines = head.splitlines(keepends=True)
    drop: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in ("get_inputs", "get_init_inputs"):
            drop.update(range(node.lineno - 1, node.end_lineno or node.lineno))
    return "".join(x for k, x in enumerate(lines) if k not in drop)


def _layer_calls(tree: ast.AST) -> dict[str, int]:
    """Calls by final name (``nn.Conv2d(...)`` -> ``Conv2d``, ``F.relu`` -> ``relu``)."""
    out: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name:
                out[name] = out.get(name, 0) + 1
    return out


def code_features(code: str) -> dict[str, float]:
    """Features read from the code alone (see the module docstring); every value a float."""
    src = module_source(code)
    lines = [x for x in src.splitlines() if x.strip() and not x.strip().startswith("#")]
    out: dict[str, float] = {"log_loc": _log2p(len(lines))}
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError, RecursionError):
        tree = None
    calls = _layer_calls(tree) if tree is not None else {}
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)] if tree is not None else []
    forwards = [f for c in classes for f in c.body if isinstance(f, ast.FunctionDef) and f.name == "forward"]
    loops = sum(1 for f in forwards for n in ast.walk(f) if isinstance(n, (ast.For, ast.While, ast.comprehension)))
    branches = sum(1 for f in forwards for n in ast.walk(f) if isinstance(n, (ast.If, ast.IfExp)))
    forward_stmts = sum(1 for f in forwards for n in ast.walk(f) if isinstance(n, ast.stmt))

    def n(*names: str) -> int:
        return sum(v for k, v in calls.items() if k in names)

    norms = n(*_NORMALIZATIONS)
    reductions = n(*_REDUCTIONS)
    losses = sum(v for k, v in calls.items() if k.endswith("Loss") or k in _LOSSES)
    convs = n("Conv1d", "Conv2d", "Conv3d", "conv1d", "conv2d", "conv3d")
    transposed = n("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "conv_transpose1d",
                   "conv_transpose2d", "conv_transpose3d")
    out.update({
        "log_classes": _log2p(len(classes)),
        "log_forward_stmts": _log2p(forward_stmts),
        "forward_loops": float(min(loops, 4)),
        "forward_branches": float(min(branches, 4)),
        "code_conv": float(convs + transposed > 0),
        "code_conv_transposed": float(transposed > 0),
        "code_conv3d": float(n("Conv3d", "ConvTranspose3d", "conv3d", "conv_transpose3d") > 0),
        "code_conv_grouped": float(bool(re.search(r"\bgroups\s*=\s*(?!1\b)", src))
                                   or "depthwise" in src.lower()),
        "code_conv_dilated": float(bool(re.search(r"\bdilation\s*=\s*(?!1\b)", src))),
        "code_recurrent": float(bool(_RECURRENT.search(src))),
        "code_attention": float(n("MultiheadAttention", "scaled_dot_product_attention") > 0
                                or "attn" in src.lower() or "attention" in src.lower()),
        "code_linear": float(n("Linear", "linear", "matmul", "mm", "bmm", "einsum") > 0),
        "log_layers": _log2p(sum(v for k, v in calls.items() if k[:1].isupper())),
        "code_norm": float(norms > 0),
        "code_reduction": float(reductions > 0),
        "code_loss": float(losses > 0),
    })
    return out


def trace_features(st: dict[str, Any] | None) -> dict[str, float]:
    """Features read from a structure trace (zeros and ``trace_ok`` 0 when it failed)."""
    names = (["trace_ok", "level2", "level3", "truncated", "log_steps", "log_kernels",
              "log_distinct_ops", "heavy_steps", "log_intensity", "log_out_in"]
             + [f"share_{c}" for c in SHARE_CATEGORIES] + [f"log_{c}_steps" for c in STEP_CATEGORIES])
    out = {k: 0.0 for k in names}
    if not st or not st.get("ok"):
        return out
    shares = st.get("category_share") or {}
    steps = st.get("category_steps") or {}
    flops, moved = float(st.get("flops") or 0), float(st.get("bytes") or 0)
    inb, outb = float(st.get("input_bytes") or 0), float(st.get("output_bytes") or 0)
    out.update({
        "trace_ok": 1.0, "level2": float(st.get("level") == 2), "level3": float(st.get("level") == 3),
        "truncated": float(bool(st.get("truncated"))), "log_steps": _log2p(st.get("steps") or 0),
        "log_kernels": _log2p(st.get("kernels") or 0),
        "log_distinct_ops": _log2p(st.get("distinct_ops") or len(st.get("top_ops") or [])),
        "heavy_steps": float(min(int(st.get("heavy_steps") or 0), 8)),
        "log_intensity": math.log10(1.0 + flops / moved) if moved > 0 else 0.0,
        "log_out_in": max(-6.0, min(3.0, math.log10((outb + 1.0) / (inb + 1.0)))) if inb > 0 else 0.0,
    })
    for c in SHARE_CATEGORIES:
        out[f"share_{c}"] = float(shares.get(c) or 0.0)
    for c in STEP_CATEGORIES:
        out[f"log_{c}_steps"] = _log2p(steps.get(c) or 0)
    return out


#: Categories whose share counts on its own for a single operator (level 1): one matmul is a
#: kernel models write correctly most of the time, one convolution rarely (on KernelBench's
#: results, 0.76 and 0.23 of the samples); in a fused chain (level 2) the convolution is mostly
#: left to the library and the epilogue written.
LEVEL1_CATEGORIES = ("matmul", "conv", "reduction", "elementwise", "normalization", "pooling")


def interactions(x: dict[str, float]) -> dict[str, float]:
    """``x`` with the level-1 category shares added (``l1_<category>``: the share where the
    problem is level 1, else 0); idempotent."""
    level1 = x.get("trace_ok", 0.0) and not x.get("level2") and not x.get("level3")
    return {**x, **{f"l1_{c}": x.get(f"share_{c}", 0.0) if level1 else 0.0 for c in LEVEL1_CATEGORIES}}


def features(code: str, st: dict[str, Any] | None) -> dict[str, float]:
    """All features of one problem: :func:`trace_features`, :func:`code_features` and their
    :func:`interactions`."""
    return interactions({**trace_features(st), **code_features(code)})
