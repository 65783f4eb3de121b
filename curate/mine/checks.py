"""Checks of a forward's output: tensors to compare (:func:`main_tensor`), determinism
across seeds (:func:`determinism`), finiteness, and whether it depends on the inputs
(:func:`sensitive_inputs`)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from curate.outputs import held_tensors
from curate.problem import build_inputs
from curate.mine.inputs import call
from curate.sensitivity import clearly_sensitive, margin_of, repaired


def _outputs_ok(out: Any) -> bool:
    tensors = held_tensors(out)
    return bool(tensors) and any(t.is_floating_point() or t.dtype in (torch.int64, torch.bool) for t in tensors)


def main_tensor(out: Any) -> torch.Tensor | None:
    """The tensor a problem returns for ``out``: ``out`` itself, else the first floating-point
    tensor of a tuple, named tuple, list, dict or dataclass output walked depth first in
    order (else its first tensor), or of the attributes of an object holding no such
    structure (:func:`curate.outputs.held_tensors`); None when it holds no tensor. Same rule as
    :data:`curate.mine.codegen.MAIN_TENSOR_SOURCE`."""
    found = held_tensors(out)
    return next((t for t in found if t.is_floating_point()), found[0] if found else None)


def _same(a: Any, b: Any) -> bool:
    ta, tb = held_tensors(a), held_tensors(b)
    return len(ta) == len(tb) and all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(ta, tb))


def determinism(module: nn.Module, specs: list[dict], out: Any) -> str:
    """``"ok"``, ``"eval"`` (deterministic once in eval mode: dropout the constructor could not
    switch off) or ``"random"``: ``module`` run again on the same inputs under other seeds."""
    args = build_inputs(specs, seed=0)
    with torch.no_grad():
        torch.manual_seed(1234)
        again = call(module, specs, args)
    if _same(out, again):
        return "ok"
    module.eval()
    with torch.no_grad():
        torch.manual_seed(1)
        a = call(module, specs, args)
        torch.manual_seed(2)
        b = call(module, specs, args)
    module.train()
    return "eval" if _same(a, b) else "random"


def _finite(out: Any) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in held_tensors(out) if t.is_floating_point())


# --------------------------------------------------------------------------- the task


def input_margin(module: nn.Module, specs: list[dict], out: Any = None, deadline: float | None = None) -> float:
    """The constant-answer margin (:mod:`curate.sensitivity`) of ``module``'s main output
    over input draws seeded 0, 1, ... (``out``: the output of draw 0 when already computed);
    the weights stay those built, so it asks whether the output depends on the inputs.

    Raises:
        curate.sensitivity.OutOfTime: past ``deadline`` (``time.monotonic()``); whatever the
        forward raises.
    """
    def run(k: int) -> Any:
        if k == 0 and out is not None:
            return main_tensor(out)
        with torch.no_grad():
            torch.manual_seed(k)
            return main_tensor(call(module, specs, build_inputs(specs, seed=k)))

    return margin_of(run, deadline=deadline)


def sensitive_inputs(module: nn.Module, specs: list[dict], out: Any,
                     deadline: float | None = None) -> tuple[list[dict], Any, float]:
    """The inputs found, with their size-1 axes grown or their index inputs drawn as signs
    when the output does not depend on them otherwise (a softmax over a channel axis of size
    1 outputs ones, :func:`curate.sensitivity.grow_singletons`; a ``CosineEmbeddingLoss``
    given class indices for targets is zero, :func:`curate.sensitivity.signed_targets`).

    Args:
        deadline: ``time.monotonic()`` past which no draw is started (a slow forward is not
            judged here: ``margin`` is then infinite, and diversify and measure judge it).
    Returns:
        ``(specs, out, margin)``: the inputs kept, their output at seed 0 and their margin
        (at most 1: a constant answer passes the verifier on them; infinite when a second
        draw alone shows it over :data:`curate.sensitivity.REPAIR_BELOW`,
        :func:`curate.sensitivity.clearly_sensitive`).
    """
    try:
        with torch.no_grad():
            torch.manual_seed(1)
            other = main_tensor(call(module, specs, build_inputs(specs, seed=1)))
        if clearly_sensitive(main_tensor(out), other):  # one forward settles most problems
            return specs, out, float("inf")
        m = input_margin(module, specs, out, deadline)
    except Exception:  # noqa: BLE001 - mined code, or out of time: the caller's checks judge the inputs
        return specs, out, float("inf")
    fixed = repaired(lambda sp: input_margin(module, sp, deadline=deadline), specs, m,
                     names=("singletons", "targets"))
    if fixed["spec"] is specs:
        return specs, out, m
    with torch.no_grad():
        torch.manual_seed(0)
        new_out = call(module, fixed["spec"], build_inputs(fixed["spec"], seed=0))
    return fixed["spec"], new_out, fixed["margin"]
