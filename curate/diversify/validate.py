"""Validate candidate shape variants by running the problem's model on them.

:func:`validate_task` runs inside a :class:`curate.sandbox.Sandbox` child (the code is
untrusted) on the CPU. It builds ``Model(*init_args)`` once (seed 0), runs the original
inputs, then tries candidate specs in order until ``want`` pass. A candidate passes when

- its input bytes, and its input + output bytes, are within the memory budget;
- the forward runs (first on the ``meta`` device when the model can be built there: a
  shape error is found without computing, and FLOPs and output sizes come for free), then
  for real on CPU tensors;
- the real output is finite.

The original must first pass :func:`curate.conform.check` on the CPU (plain ``exec``, two
seeded builds, one output tensor); otherwise the problem is rejected with that check's reason.

FLOPs come from ``torch.utils.flop_counter.FlopCounterMode`` (0 when no counted op runs,
e.g. elementwise-only models: the counter covers matmuls, convolutions and attention).
A candidate whose estimated CPU time (the original's time scaled by the FLOP, or else byte,
ratio) would overrun ``deadline_s`` is skipped (``over_time``), so one huge variant cannot
time the whole problem out.

Imports only torch, the standard library and curate's torch-only modules.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from curate.conform import check as conformance_check
from curate.measure.checks import all_finite, output_bytes
from curate.problem import ProblemLoadError, build_inputs, load_problem, spec_bytes


def _meta_inputs(spec: list[dict]) -> list[Any]:
    return build_inputs(spec, "meta")


def _forward(model: torch.nn.Module, inputs: list[Any]) -> tuple[Any, int]:
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        out = model(*inputs)
    return out, int(counter.get_total_flops())


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]


def validate_task(code: str, init_args: list, input_spec: list[dict], candidates: list[tuple[str, list]],
                  want: int, mem_budget_bytes: int, deadline_s: float) -> dict[str, Any]:
    """Run the original and candidate input specs; keep the first ``want`` valid candidates.

    Args:
        code: KernelBench-format problem source.
        init_args: constructor arguments.
        input_spec: the original forward inputs.
        candidates: ``(label, spec)`` pairs in the order to try.
        want: valid variants to find.
        mem_budget_bytes: largest input + output bytes of a variant.
        deadline_s: seconds after which no further candidate is started.
    Returns:
        ``{"ok": False, "detail": ...}`` when the original does not run (with ``reason``
        when a KernelBench-style harness cannot run it, see :mod:`curate.conform`); otherwise
        ``{"ok": True, "original": {flops, bytes, seconds, finite}, "variants": [{label,
        spec, flops, bytes}], "tried": [[label, verdict], ...], "meta": bool}``.
    """
    t0 = time.monotonic()
    conf = conformance_check(code, "cpu", trials=1)
    if conf["reason"]:  # a KernelBench-style harness could not use the problem: no variants of it
        return {"ok": False, "reason": conf["reason"], "detail": conf["detail"]}
    try:
        ns = load_problem(code)
        torch.manual_seed(0)
        model = ns["Model"](*init_args)
        inputs = build_inputs(input_spec, "cpu", seed=0)
        t = time.monotonic()
        out, flops = _forward(model, inputs)
        seconds = time.monotonic() - t
    except ProblemLoadError as exc:
        return {"ok": False, "detail": f"load: {exc}"}
    except Exception as exc:  # untrusted code
        return {"ok": False, "detail": _short(exc)}
    orig_bytes = spec_bytes(input_spec) + output_bytes(out)
    original = {"flops": flops, "bytes": orig_bytes, "seconds": seconds, "finite": all_finite(out)}
    del out, inputs

    meta_model = None
    try:
        with torch.device("meta"):
            torch.manual_seed(0)
            meta_model = ns["Model"](*init_args)
        _forward(meta_model, _meta_inputs(input_spec))
    except Exception:  # data-dependent code cannot run on meta: validate for real only
        meta_model = None

    variants: list[dict[str, Any]] = []
    tried: list[list[str]] = []
    for label, spec in candidates:
        if len(variants) >= want:
            break
        verdict, info = _try(model, meta_model, spec, original, mem_budget_bytes,
                             deadline_s - (time.monotonic() - t0))
        tried.append([label, verdict])
        if verdict == "ok":
            variants.append({"label": label, "spec": spec, **info})
    return {"ok": True, "original": original, "variants": variants, "tried": tried,
            "meta": meta_model is not None}


def _try(model, meta_model, spec, original, budget, time_left) -> tuple[str, dict[str, Any]]:
    in_bytes = spec_bytes(spec)
    if in_bytes > budget:
        return "over_budget", {}
    flops = None
    if meta_model is not None:
        try:
            out, flops = _forward(meta_model, _meta_inputs(spec))
        except Exception as exc:
            return f"error: {_short(exc)}", {}
        total = in_bytes + output_bytes(out)
        if total > budget:
            return "over_budget", {}
        ratio = (flops / original["flops"]) if original["flops"] and flops else total / max(1, original["bytes"])
        if original["seconds"] * ratio > time_left:
            return "over_time", {}
    if time_left <= 0:
        return "over_time", {}
    try:
        inputs = build_inputs(spec, "cpu", seed=0)
        out, real_flops = _forward(model, inputs)
    except MemoryError:
        return "memory", {}
    except Exception as exc:
        msg = _short(exc)
        return ("memory" if "allocate" in msg or "out of memory" in msg else f"error: {msg}"), {}
    total = in_bytes + output_bytes(out)
    if total > budget:
        return "over_budget", {}
    if not all_finite(out):
        return "non_finite", {}
    return "ok", {"flops": real_flops if flops is None else flops, "bytes": total}
