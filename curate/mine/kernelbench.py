"""KernelBench-format files as problems with their own inputs.

A KernelBench-format file (ScalingIntelligence/KernelBench's layout) already is a problem:
``class Model(nn.Module)``, ``get_inputs()`` (the forward arguments) and
``get_init_inputs()`` (the constructor arguments) at its top level. ``curate mine`` takes
such files from a ``kernelbench`` source (a folder of them, :mod:`curate.mine.sources`), and
recognizes them in any other source by that shape, instead of synthesizing inputs for their
``Model`` class. :func:`kernelbench_task` (run in a sandboxed worker: the code is untrusted)
turns one file into a row:

1. ``get_init_inputs()`` runs on the CPU: the constructor arguments, which must be plain
   values (numbers, strings, lists and tuples of them: ``unserialisable_args`` otherwise);
2. ``get_inputs()`` runs on the ``meta`` device, under a recorder of the torch calls that made
   each returned tensor (:func:`input_spec_of`), so that inputs of gigabytes cost nothing: a
   ``torch.randn`` tensor is a ``tensor`` entry of the input spec, ``torch.rand`` a
   ``unit_interval`` one, ``torch.randint`` an ``index``, a comparison with a threshold or a
   ``bool()`` of random bits a ``mask``, and a few steps after them are kept as the entry's
   ``then`` steps (:data:`curate.problem.THEN_STEPS`: a scale or shift, ``triu``, ``tril``,
   ``softmax``, symmetrizing ``(A + A.T)``, ``abs``, ``float``); anything else is rejected
   ``unsupported_inputs`` rather than replaced by inputs of another distribution;
3. the file's own sizes are kept as ``input_spec`` (a GPU measures and ranks the problem as
   its author sized it); a smaller shape for the CPU (:func:`cpu_shape`: the input axes the
   forward accepts at other sizes, found as diversify finds them, shrunk until the forward
   needs at most :data:`CPU_PEAK_BYTES` and :data:`CPU_FLOPS`) goes to ``mined_input_spec``
   and ``mined_init_args`` with ``shape_source = "source"``, which the CPU paths of diversify,
   measure and rank use in place of the file's sizes (:func:`curate.problem.mined_inputs`);
4. the file's ``get_inputs`` and ``get_init_inputs`` are replaced by curate's generated ones
   (the inputs marker, :func:`curate.problem.assemble`), and the problem at the CPU shape is
   run as a KernelBench-style harness runs it (:func:`curate.conform.check`).

Imports only torch, the standard library and curate's torch-only modules.
"""

from __future__ import annotations

import ast
import time
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from curate.problem import INPUTS_MARKER, ProblemLoadError, assemble, build_inputs, load_problem, \
    parse_input_spec, spec_bytes

#: The forward at the CPU shape needs at most this many bytes (parameters, inputs and the peak
#: of live activations) and FLOPs: a CPU checks and times it in well under a second.
CPU_PEAK_BYTES = 8 * 2**20
CPU_FLOPS = 2 * 10**8
#: Shrink steps tried per scaling family (each a quarter of the last scale).
SHRINK_STEPS = 12
ENTRY_POINTS = ("Model", "get_inputs", "get_init_inputs")


class UnsupportedInputs(ValueError):
    """``get_inputs()`` makes an input the input spec cannot describe (the message says which)."""


def kernelbench_names(text: str) -> set[str] | None:
    """Which of ``class Model``, ``def get_inputs``, ``def get_init_inputs`` a file defines
    at its top level, or None when it does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None
    found = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            found.add("Model")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ENTRY_POINTS[1:]:
            found.add(node.name)
    return found


def is_kernelbench_file(text: str) -> bool:
    """True when ``text`` defines ``class Model``, ``get_inputs`` and ``get_init_inputs``."""
    return kernelbench_names(text) == set(ENTRY_POINTS)


def module_body(text: str) -> str:
    """``text`` without its top-level ``get_inputs`` / ``get_init_inputs`` definitions (and
    the decorators above them), which curate's generated ones replace."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    drop: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in ENTRY_POINTS[1:]:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            drop.update(range(start - 1, node.end_lineno or node.lineno))
    return "".join(line for k, line in enumerate(lines) if k not in drop).rstrip() + "\n"


# ---- the input spec of get_inputs(), read from the torch calls that made each tensor ----

_FACTORIES = {"randn": "tensor", "randn_like": "tensor", "rand": "unit", "rand_like": "unit",
              "randint": "index", "randint_like": "index"}
_TRANSPOSES = {"t", "T", "mT", "transpose", "__get__"}


class _Recorder(TorchFunctionMode):
    """Remembers, for every tensor a torch call returns, the call: ``(name, args, kwargs)``."""

    def __init__(self) -> None:
        super().__init__()
        self.made: dict[int, tuple[str, tuple, dict, torch.Tensor]] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if isinstance(out, torch.Tensor):
            self.made[id(out)] = (getattr(func, "__name__", str(func)), args, kwargs, out)
        return out


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x)


def _entry(rec: _Recorder, x: torch.Tensor, depth: int = 0) -> dict[str, Any]:
    """The input spec entry of a tensor ``get_inputs()`` returned (see the module docstring).

    Raises:
        UnsupportedInputs: the tensor was not made by a factory and steps the spec knows.
    """
    if depth > 8:
        raise UnsupportedInputs("more than 8 steps after the random draw")
    call = rec.made.get(id(x))
    if call is None:
        raise UnsupportedInputs("an input made outside torch's random factories (a literal, numpy)")
    name, args, kwargs, _ = call
    shape = [int(d) for d in x.shape]
    dtype = str(x.dtype).removeprefix("torch.")
    kind = _FACTORIES.get(name)
    if kind == "index":
        low, high = (0, args[0]) if len(args) < 2 or isinstance(args[1], (tuple, list, torch.Size)) else args[:2]
        if "high" in kwargs:
            low, high = kwargs.get("low", 0), kwargs["high"]
        return {"kind": "index", "shape": shape, "dtype": dtype, "low": int(low), "high": int(high)} \
            if int(low) else {"kind": "index", "shape": shape, "dtype": dtype, "high": int(high)}
    if kind is not None:
        out = {"kind": "tensor", "shape": shape, "dtype": dtype}
        if kind == "unit":
            out["unit_interval"] = True
        return out
    src = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if src is None:
        raise UnsupportedInputs(f"an input made by torch.{name}, not a random draw")
    base = _entry(rec, src, depth + 1)
    other = [a for a in args if a is not src]
    step = _step(name, src, other, kwargs, rec)
    if step == ["bool"] or (step and step[0] == "mask"):
        if base["kind"] == "index" and base.get("high") == 2 and not base.get("low") and step == ["bool"] \
                or base.get("unit_interval") and step[0] == "mask":
            return {"kind": "mask", "shape": shape, "dtype": "bool"}
        raise UnsupportedInputs(f"a mask made by torch.{name} of {base}")
    then = list(base.get("then") or []) + [step]
    base["then"] = then
    base["shape"] = shape
    if step == ["float"]:
        base["dtype"] = base["dtype"] if base["kind"] == "index" else "float32"
    return base


def _then(name: str, *args: Any) -> list:
    """One ``then`` step as the input spec writes it: ``[name, *args]``."""
    return [name, *args]


def _step(name: str, src: torch.Tensor, other: list, kwargs: dict, rec: _Recorder) -> list:
    """One ``then`` step (:data:`curate.problem.THEN_STEPS`) for a call on an input tensor."""
    num = _number(other[0]) if len(other) == 1 else None
    if name in ("mul", "__mul__", "__rmul__") and num is not None:
        return _then("mul", num)
    if name in ("mul", "__mul__", "__rmul__") and len(other) == 1 and isinstance(other[0], torch.Tensor) \
            and other[0].dim() == 0 and (rec.made.get(id(other[0])) or ("",))[0] == "rand":
        return _then("mul_rand")
    if name in ("div", "__truediv__") and num is not None and num != 0:
        return _then("mul", 1.0 / num)
    if name in ("add", "__add__", "__radd__") and num is not None:
        return _then("add", num)
    if name in ("sub", "__sub__") and num is not None:
        return _then("add", -num)
    if name in ("rsub", "__rsub__") and num is not None:
        return _then("rsub", num)
    if name in ("add", "__add__") and len(other) == 1 and isinstance(other[0], torch.Tensor):
        made = rec.made.get(id(other[0]))
        if made is not None and made[0] in _TRANSPOSES and made[1] and made[1][0] is src:
            return _then("symmetric")
    if name in ("triu", "tril"):
        k = other[0] if other else kwargs.get("diagonal", 0)
        return _then(name, int(k))
    if name in ("softmax", "log_softmax"):
        dim = other[0] if other else kwargs.get("dim", -1)
        return [name, int(dim)]
    if name == "abs" and not other:
        return _then("abs")
    if name in ("float", "bool") and not other:
        return [name]
    if name == "to" and len(other) == 1 and other[0] in (torch.float32, torch.bool):
        return ["float" if other[0] is torch.float32 else "bool"]
    if name in ("gt", "__gt__", "ge", "lt", "__lt__", "le") and num is not None:
        return _then("mask")
    raise UnsupportedInputs(f"an input transformed by torch.{name}")


def input_spec_of(get_inputs: Any) -> list[dict[str, Any]]:
    """The input spec of a KernelBench-format ``get_inputs`` (see the module docstring),
    read on the ``meta`` device.

    Raises:
        UnsupportedInputs: an input the spec cannot describe; whatever ``get_inputs`` raises.
    """
    rec = _Recorder()
    with torch.device("meta"), rec:
        made = get_inputs()
    if not isinstance(made, (list, tuple)):
        raise UnsupportedInputs(f"get_inputs() returned {type(made).__name__}, not a list")
    spec: list[dict[str, Any]] = []
    for x in made:
        if isinstance(x, torch.Tensor):
            spec.append(_entry(rec, x))
        elif x is None or isinstance(x, (bool, int, float, str)):
            spec.append({"kind": "value", "value": x})
        else:
            raise UnsupportedInputs(f"an input of type {type(x).__name__}")
    parse_input_spec(spec)  # what build_inputs will read
    return spec


def plain_args(x: Any) -> bool:
    """True when constructor arguments can be written as JSON and rendered back."""
    if x is None or isinstance(x, (bool, int, str)):
        return True
    if isinstance(x, float):
        return x == x and abs(x) != float("inf")
    if isinstance(x, (list, tuple)):
        return all(plain_args(y) for y in x)
    return False


def _lists(x: Any) -> Any:
    """Tuples as lists, nested too (the JSON form, which shape families edit in place)."""
    return [_lists(y) for y in x] if isinstance(x, (list, tuple)) else x


# ---- a CPU-sized shape of the problem ----

#: Kernels a pricing forward may trace (an LSTM unrolled on the meta device runs thousands of
#: operators per forward, seconds each): past it the cost seen so far stands for the forward,
#: and the shape found is run for real before it is kept.
PRICE_KERNELS = 1000


def _CappedPricer(ns: dict, init: list, spec: list[dict], gpu: Any):
    """A :class:`curate.diversify.plan.Pricer` whose meta forwards stop at
    :data:`PRICE_KERNELS` kernels."""
    from curate.cost import TooManyKernels, forward_cost
    from curate.diversify.plan import Pricer

    class Capped(Pricer):
        def cost(self, spec_: list[dict], init_: list):
            if not self.meta:
                return super().cost(spec_, init_)
            try:
                return forward_cost(self._model(init_), build_inputs(spec_, "meta"), max_kernels=PRICE_KERNELS)
            except TooManyKernels as exc:
                self.truncated = True
                return exc.cost

    return Capped(ns, init, spec, gpu)


def cpu_shape(ns: dict, init: list, spec: list[dict], deadline: float) -> tuple[list[dict], list, dict]:
    """A shape of the problem a CPU runs quickly: ``(spec, init, info)``.

    The free input axes and the axes tied to constructor arguments are found as diversify
    finds them (:func:`curate.diversify.plan._classify`, on the ``meta`` device). The free
    axes shrink together (batch and sequence or spatial sizes, each by the same factor), by
    quarters of the scale, until the forward needs at most :data:`CPU_PEAK_BYTES` and
    :data:`CPU_FLOPS` or an axis cannot shrink further; then, if still needed, the widths
    (channels, features, with their constructor arguments). The shape found must then run
    on real CPU tensors (the meta device does not check everything: a channel count a
    convolution does not take); else the batch alone is tried. ``info``: ``{"family",
    "scale", "peak_bytes", "flops", "fits"}``; ``fits`` False when the smallest shape
    reached is still over the budget.
    """
    from curate.cost import gpu_profile
    from curate.diversify.plan import _classify
    from curate.diversify.shapes import apply_family, axes, family, init_paths

    pricer = _CappedPricer(ns, init, spec, gpu_profile("h100"))
    if not pricer.meta:
        raise UnsupportedInputs("the forward does not run on the meta device at the file's sizes")
    cost = pricer.cost(spec, init)

    def fits(c) -> bool:
        return c.peak_bytes <= CPU_PEAK_BYTES and c.flops <= CPU_FLOPS

    info = {"family": "source", "scale": 1.0, "peak_bytes": cost.peak_bytes, "flops": cost.flops,
            "fits": fits(cost), "truncated": getattr(pricer, "truncated", False)}
    if info["fits"]:
        return spec, init, info
    free, width, paths = _classify(pricer, spec, init, axes(spec), deadline)

    def shrink(routes: list[dict]) -> tuple[list[dict], list, dict]:
        cur_spec, cur_init, cur_cost, names, scales = spec, init, cost, [], []
        for fam in routes:
            s, last = 1.0, None
            for _ in range(SHRINK_STEPS):
                if fits(cur_cost) or time.monotonic() > deadline:
                    break
                s /= 4.0
                try:
                    new_spec, new_init = apply_family(cur_spec, cur_init, fam, s)
                    if last is not None and (new_spec, new_init) == last[:2]:
                        break  # every axis of the family is at its floor
                    c = pricer.cost(new_spec, new_init)
                except Exception:  # noqa: BLE001 - a size the model rejects ends this family
                    break
                last = (new_spec, new_init, c, s)
                if fits(c):
                    break
            if last is not None:
                cur_spec, cur_init, cur_cost = last[:3]
                names.append(fam["name"])
                scales.append(last[3])
        return cur_spec, cur_init, {"family": "+".join(names) or "source", "scale": scales,
                                    "peak_bytes": cur_cost.peak_bytes, "flops": cur_cost.flops,
                                    "fits": fits(cur_cost), "truncated": getattr(pricer, "truncated", False)}

    def routes_for(tied: list) -> list[list[dict]]:
        """Shrink routes when the axes in ``tied`` move with the constructor arguments of
        their size (channels, features) and the other free axes alone."""
        fr = [a for a in free if a not in tied]
        wd = width + tied
        pt = {**paths, **{f"{a.name}:{a.size}:{a.positions}": init_paths(init, a.size) for a in tied}}
        widths = [family("width", wd, pt)] if wd else []
        frees = [family("free", fr)] if fr else []
        batch = [a for a in fr if a.name == "batch"]
        # parameters that alone fill the budget shrink only with the widths: those first
        out = [widths + frees] if cost.param_bytes > CPU_PEAK_BYTES // 2 else [frees + widths]
        if batch and len(batch) < len(fr):
            out.append([family("batch", batch)] + widths)
        return out

    # an axis the size of a constructor argument in a channel or feature position moves with
    # that argument, even where the meta device lets it move alone (a transposed convolution
    # there takes any channel count); failing that, any axis of such a size does
    tries = routes_for([a for a in free if a.tied_guess and init_paths(init, a.size)])
    tries += routes_for([a for a in free if a.name != "batch" and init_paths(init, a.size)])
    # last: every size-like constructor argument (hidden widths no input shows) with the input
    # axes of the same sizes, then the free axes
    sizes = sorted({v for v in _ints(init) if v >= 16})
    if sizes:
        axes_ = [{"name": f"size={v}", "size": v, "init": init_paths(init, v),
                  "positions": [[i, d] for i, e in enumerate(spec) for d, n in enumerate(e.get("shape") or [])
                                if n == v and not (d == 0 and any(a.name == "batch" and [i, 0] in
                                                                  [list(p) for p in a.positions] for a in free))]}
                 for v in sizes]
        rest = [a for a in free if a.size not in sizes]
        tries.append([{"name": "sizes", "axes": axes_}] + ([family("free", rest)] if rest else []))
    reached = []
    for routes in tries:
        got = shrink(routes)
        reached.append(got)
        # a real run only where it is cheap (a shape far over the budget is not tried)
        if got[2]["peak_bytes"] <= 2 * CPU_PEAK_BYTES and got[2]["flops"] <= 8 * CPU_FLOPS \
                and _runs(ns, got[1], got[0]):
            return got
    # none ran within the budget: the cheapest shape reached (the caller's check runs it)
    return min(reached, key=lambda g: (g[2]["flops"], g[2]["peak_bytes"])) if reached else (spec, init, info)


def _ints(x: Any) -> list[int]:
    """The ints (not bools) in nested constructor arguments."""
    if isinstance(x, bool):
        return []
    if isinstance(x, int):
        return [x]
    if isinstance(x, (list, tuple)):
        return [v for y in x for v in _ints(y)]
    return []


def _runs(ns: dict, init: list, spec: list[dict]) -> bool:
    """Whether the forward runs on real CPU tensors at a (small) shape."""
    try:
        torch.manual_seed(0)
        with torch.no_grad():
            ns["Model"](*init)(*build_inputs(spec, "cpu", seed=0))
        return True
    except Exception:  # noqa: BLE001 - untrusted code; any failure rules the shape out
        return False


def kernelbench_task(text: str, budget_s: float = 60.0) -> dict[str, Any]:
    """Sandbox entry point: one KernelBench-format file as a problem (the module docstring).

    Returns:
        ``{"ok": True, "code", "init_args", "input_spec" (the file's sizes),
        "mined_input_spec", "mined_init_args" (the CPU shape), "cpu_shape" (how it was
        found), "output_shapes", "input_dtypes", "all_float_inputs", "checked_torch",
        "seconds"}``, or ``{"ok": False, "reason", "detail"}`` with reasons ``exec_fails``,
        ``init_fails``, ``inputs_fail`` (:mod:`curate.conform`'s), ``unserialisable_args``,
        ``unsupported_inputs``, ``inputs_too_large`` (no CPU-sized shape) and the
        conformance reasons of the CPU-sized problem.
    """
    from curate.conform import check as conformance_check

    t0 = time.monotonic()
    deadline = t0 + 0.6 * budget_s
    try:
        ns = load_problem(text, "kernelbench")
    except ProblemLoadError as exc:
        return {"ok": False, "reason": "exec_fails", "detail": str(exc)[:2000]}
    try:
        torch.manual_seed(0)
        init = list(ns["get_init_inputs"]())
    except Exception as exc:  # noqa: BLE001 - untrusted code
        return {"ok": False, "reason": "init_fails", "detail": f"get_init_inputs(): {type(exc).__name__}: {exc}"[:2000]}
    if not plain_args(init):
        return {"ok": False, "reason": "unserialisable_args", "detail": repr(init)[:300]}
    init = _lists(init)
    try:
        spec = input_spec_of(ns["get_inputs"])
    except UnsupportedInputs as exc:
        return {"ok": False, "reason": "unsupported_inputs", "detail": str(exc)[:2000]}
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "reason": "inputs_fail", "detail": f"get_inputs(): {type(exc).__name__}: {exc}"[:2000]}
    try:
        small_spec, small_init, how = cpu_shape(ns, init, spec, deadline)
    except Exception as exc:  # noqa: BLE001 - e.g. a forward that reads tensor values
        small_spec, small_init = spec, init
        how = {"family": "source", "scale": 1.0, "fits": spec_bytes(spec) <= CPU_PEAK_BYTES // 4,
               "error": f"{type(exc).__name__}: {exc}"[:300]}
    if not how.get("fits") and spec_bytes(small_spec) > CPU_PEAK_BYTES:
        return {"ok": False, "reason": "inputs_too_large",
                "detail": f"no shape of at most {CPU_PEAK_BYTES >> 20} MiB found for the CPU: {how}"[:2000]}
    body = module_body(text)
    code = assemble(body, spec, init)
    small_code = assemble(body, small_spec, small_init)
    conf = conformance_check(small_code, "cpu", trials=2)
    if conf["reason"]:
        return {"ok": False, "reason": conf["reason"], "detail": conf["detail"][:2000]}
    out_shapes: list = [conf["output_shape"]] if conf.get("output_shape") is not None else []
    try:  # the output at the file's sizes, on meta (the CPU shape's is the fallback), unless
        # pricing showed a forward of thousands of operators (an unrolled RNN: minutes on meta)
        if how.get("truncated"):
            raise ValueError("too many operators to trace")
        with torch.device("meta"):
            torch.manual_seed(0)
            out = ns["Model"](*init)(*build_inputs(spec, "meta"))
        if isinstance(out, torch.Tensor):
            out_shapes = [list(out.shape)]
    except Exception:  # noqa: BLE001 - informative only: the CPU shape ran
        pass
    return {"ok": True, "code": code, "init_args": init, "input_spec": spec,
            "mined_input_spec": small_spec, "mined_init_args": small_init, "cpu_shape": how,
            "output_shapes": out_shapes, "input_dtypes": conf["input_dtypes"],
            "all_float_inputs": conf["all_float_inputs"], "checked_torch": f"{conf['torch']}@cpu",
            "seconds": time.monotonic() - t0}


__all__ = ["INPUTS_MARKER", "UnsupportedInputs", "cpu_shape", "input_spec_of", "is_kernelbench_file",
           "kernelbench_names", "kernelbench_task", "module_body", "plain_args"]
