"""Run a problem exactly the way a KernelBench-style harness does, and say why it fails.

Such a harness knows nothing of curate: it ``exec()``\\ s the problem's code into a fresh
dict (no module name, no file, nothing in ``sys.modules``), seeds and builds ``Model`` from
``get_init_inputs()``, seeds and builds a second ``Model`` the same way (the identity
``ModelNew`` a correct candidate must match), then for each trial seeds, calls
``get_inputs()``, casts every floating-point tensor input to float32, moves the inputs to
the device and compares the two outputs under ``torch.no_grad()``. :func:`check` does that,
with exact comparison: two builds of one model under one seed must agree bit for bit.

Integer and boolean inputs (embedding indices, class targets, masks) are kept as they are;
``all_float_inputs`` in the result tells whether every tensor input is floating point, for
harnesses that cast every input to float.

Reasons a problem fails (``reason`` of the result; ``None`` when it passes):

======================  ===================================================================
``exec_fails``          ``exec(code, {})`` raises, or it defines no ``Model``,
                        ``get_inputs`` or ``get_init_inputs``
``init_fails``          ``get_init_inputs()`` or ``Model(*init)`` raises, or moving the
                        model to the device does
``inputs_fail``         ``get_inputs()`` raises or returns no list/tuple
``forward_fails``       the forward raises (on CUDA: a tensor left on the CPU, say)
``non_tensor_output``   the forward returns something other than one tensor (a tuple, a
                        named tuple, a dict, a dataclass, None)
``dtype_unsupported``   run in a lower precision (``dtype``), the forward returns a tensor in
                        another floating-point dtype: the reference does not compute in it
``non_finite_output``   the output holds NaN or infinity: no candidate can match it
``non_deterministic``   the reference run twice on the same inputs disagrees with itself
                        (beyond measure's determinism tolerance: last-bit GPU differences pass)
``seed_unstable``       two builds under the same seed disagree (weights drawn at the first
                        forward, as lazy modules do, or from an unseeded generator)
``reference_warns``     the reference warns about its own misuse (see :func:`misuse_warning`:
                        a loss target that broadcasts, a torch call path torch deprecates,
                        an input whose channels are not the norm layer's ``num_features``)
======================  ===================================================================

The sandbox adds ``timeout``, ``memory`` and ``crash`` when the check runs in a worker
(:func:`check_task`). Untrusted code: call :func:`check` only inside an isolated process.

Imports only torch, the standard library and curate's torch-only output checks: GPU machines
run it without curate's other dependencies.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import traceback
import warnings
from typing import Any, Iterator

import torch

from curate import checks

#: Every reason :func:`check` returns, in the order the steps run.
REASONS = ("exec_fails", "init_fails", "inputs_fail", "forward_fails", "non_tensor_output",
           "dtype_unsupported", "non_finite_output", "non_deterministic", "seed_unstable",
           "reference_warns")

#: Warnings that mean the reference misuses an API whoever raises them: the problem computes
#: something its authors did not mean (a broadcast loss target, a norm over the wrong axis).
_MISUSE = re.compile(r"Using a target size .* different to the input size|does not match num_features|"
                     r"Implicit dimension choice")
#: Warnings that mean a deprecated call path when torch raises them (a library's warning about
#: its own parameters, in the problem's copied code, is the library's business).
_DEPRECATED = re.compile(r"[Dd]eprecat|will be removed")
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
#: What the compiler says of a source's text when the problem file is compiled (a regex
#: written ``"\s+"`` in a docstring or a pattern: a ``DeprecationWarning`` on Python 3.11, a
#: ``SyntaxWarning`` from 3.12): about how the code is spelt, not about what it computes.
_SOURCE_TEXT = re.compile(r"invalid (?:escape sequence|octal escape sequence|decimal literal)")


def misuse_warning(message: str, category: type | None = None, origin: str | None = None) -> bool:
    """Whether a warning raised while building or running a reference means its misuse.

    Args:
        message: the warning's text.
        category: its class.
        origin: the file of the code that called ``warnings.warn`` (see
            :func:`recorded_warnings`); None when unknown: a warning torch's C++ raises.
    Returns:
        True for a broadcast loss target, channels that are not a norm layer's
        ``num_features`` and an implicit softmax dimension (:func:`misuse_pattern`), and for
        a deprecation (``DeprecationWarning``/``FutureWarning``, or "deprecated" in the text)
        that torch raises: a library's warning about its own parameters, from the problem's
        copied code, is the library's business. False for what the compiler says of the
        source's text (an invalid escape sequence in a string, any ``SyntaxWarning``).
    """
    if misuse_pattern(message):
        return True
    if _SOURCE_TEXT.search(message) or isinstance(category, type) and issubclass(category, SyntaxWarning):
        return False
    deprecated = _DEPRECATED.search(message) is not None or (
        isinstance(category, type) and issubclass(category, (DeprecationWarning, FutureWarning)))
    return deprecated and (origin is None or os.path.realpath(origin).startswith(_TORCH_DIR))


def misuse_pattern(message: str) -> bool:
    """Whether ``message`` is a misuse warning whoever raises it (see :func:`misuse_warning`)."""
    return _MISUSE.search(message) is not None


@contextlib.contextmanager
def recorded_warnings() -> Iterator[tuple[list, dict[str, str]]]:
    """``warnings.catch_warnings(record=True)`` with every warning shown, yielding the caught
    list and ``{text: file of the code that called warnings.warn}``: ``stacklevel`` points a
    warning's own ``filename`` at the caller of the deprecated function, not at the library
    that deprecates it."""
    origins: dict[str, str] = {}
    original = warnings.warn

    def warn(message, category=None, stacklevel=1, source=None, **kw):
        try:
            origins.setdefault(str(message), sys._getframe(1).f_code.co_filename)
        except Exception:
            pass
        return original(message, category, stacklevel + 1, source, **kw)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn = warn
        try:
            yield caught, origins
        finally:
            warnings.warn = original


def _short(exc: BaseException) -> str:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-2)
    return (f"{type(exc).__name__}: {exc}"[:1200] + "\n" + "".join(tb)[-600:]).strip()


def _dtype_name(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return str(x.dtype).removeprefix("torch.")
    return type(x).__name__


def _prepare(inputs: Any, dev: torch.device, dtype: torch.dtype = torch.float32) -> list[Any]:
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            if x.is_floating_point():
                x = x.to(dtype)
            x = x.to(dev)
        out.append(x)
    return out


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two runs of the reference give the same output, within measure's determinism
    tolerance (:data:`curate.checks.SAME_TOL`: 1e-4, 1e-2 for half types), not bit for
    bit: kernels that accumulate with atomics (scatter_add, index_add, some cuDNN convolutions)
    differ run to run in the last bits on a GPU (8e-7 on 30 of 6,312 rows of an H200 run), far
    inside any harness's correctness tolerance; dropout left in training mode and unseeded random
    ops differ by far more."""
    return checks.close(a, b)


def check(code: str, device: str = "cpu", trials: int = 3, seed: int = 42,
          dtype: str | None = None) -> dict[str, Any]:
    """Build and run ``code`` as a KernelBench-style harness would; never raises for bad code.

    Args:
        code: the problem's source (``Model``, ``get_inputs``, ``get_init_inputs``).
        device: ``cpu`` or ``cuda[:n]``.
        trials: input sets compared (trial ``k`` draws its inputs after
            ``torch.manual_seed(seed + 1 + k)``).
        seed: the seed both models are built under.
        dtype: the precision the harness runs the problem in (``"bfloat16"``, ``"float16"``,
            ``"float32"``), as KernelBench's precision setting does: both models are cast
            to it (``model.to(dtype)``: floating parameters and buffers) and so is every
            floating-point input; None: the models as built, the inputs in float32. The
            output must then come back in ``dtype`` when the float32 run's would be floating
            point (``dtype_unsupported`` otherwise: the reference does not run in it).
    Returns:
        ``{"reason": str | None, "detail": str, "torch": torch.__version__, "device": str,
        "input_dtypes": [str, ...] (one per ``get_inputs()`` entry: a torch dtype name, or the
        Python type of a plain value), "all_float_inputs": bool | None (every tensor input
        floating point; None when the inputs were not made), "output_shape": [int, ...] |
        None, "output_dtype": str | None, "warnings": [str, ...] (up to 5 texts raised while
        building and running)}``.
    """
    dev = torch.device(device)
    res: dict[str, Any] = {"reason": None, "detail": "", "torch": torch.__version__, "device": str(dev),
                           "input_dtypes": None, "all_float_inputs": None, "output_shape": None,
                           "output_dtype": None, "warnings": []}
    step = "exec_fails"
    with recorded_warnings() as (caught, origins):
        try:
            ns: dict[str, Any] = {}
            exec(code, ns)  # noqa: S102 - the harness's own load, on purpose
            missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not callable(ns.get(n))]
            if missing:
                res["reason"], res["detail"] = "exec_fails", f"missing {', '.join(missing)}"
                return res
            step = "init_fails"
            # On a GPU, weights and inputs are drawn on the device itself (a default-device
            # context around the problem's own calls): a harness drawing GPU-sized inputs on
            # the host and copying them spends seconds per problem on that alone, and the
            # check compares two seeded runs on one device either way.
            place = torch.device(dev) if dev.type == "cuda" else contextlib.nullcontext()
            with torch.no_grad(), place:
                init = list(ns["get_init_inputs"]())
                init = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in init]
                torch.manual_seed(seed)
                ref = ns["Model"](*init).to(dev)
                torch.manual_seed(seed)
                new = ns["Model"](*init).to(dev)
                if dtype is not None:
                    ref, new = ref.to(getattr(torch, dtype)), new.to(getattr(torch, dtype))
            for k in range(trials):
                step = "inputs_fail"
                torch.manual_seed(seed + 1 + k)
                with (torch.device(dev) if dev.type == "cuda" else contextlib.nullcontext()):
                    raw = ns["get_inputs"]()
                if not isinstance(raw, (list, tuple)):
                    res["reason"], res["detail"] = step, f"get_inputs() returned {type(raw).__name__}"
                    return res
                res["input_dtypes"] = [_dtype_name(x) for x in raw]
                res["all_float_inputs"] = all(x.is_floating_point() for x in raw if isinstance(x, torch.Tensor))
                inputs = _prepare(raw, dev, getattr(torch, dtype or "float32"))
                step = "forward_fails"
                with torch.no_grad():
                    a = ref(*inputs)
                    b = new(*inputs)
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
                    res["reason"] = "non_tensor_output"
                    res["detail"] = f"forward returned {type(a).__module__}.{type(a).__qualname__}"
                    return res
                res["output_shape"], res["output_dtype"] = list(a.shape), _dtype_name(a)
                if dtype is not None and a.is_floating_point() and a.dtype != getattr(torch, dtype):
                    res["reason"] = "dtype_unsupported"
                    res["detail"] = (f"run in {dtype}, the forward returns a {_dtype_name(a)} tensor: "
                                     f"the reference does not compute in {dtype}")
                    return res
                if (a.is_floating_point() or a.is_complex()) and not bool(torch.isfinite(a).all()):
                    res["reason"], res["detail"] = "non_finite_output", f"trial {k}: NaN or infinity in the output"
                    return res
                if not _same(a, b):
                    with torch.no_grad():
                        again = ref(*inputs)
                    why = "non_deterministic" if not _same(a, again) else "seed_unstable"
                    diff = ((a.double() - b.double()).abs().max().item()
                            if a.shape == b.shape and a.dtype == b.dtype and a.is_floating_point() else None)
                    res["reason"] = why
                    res["detail"] = (f"trial {k}: outputs differ (shape {list(a.shape)} vs {list(b.shape)}, "
                                     f"max abs diff {diff})")
                    return res
        except BaseException as exc:  # untrusted code: SystemExit included
            res["reason"], res["detail"] = step, _short(exc)
            return res
        finally:
            res["warnings"] = [str(w.message)[:300] for w in caught[:5]]
            misuse = [w for w in caught
                      if misuse_warning(str(w.message), w.category, origins.get(str(w.message)))]
    if misuse:
        w = misuse[0]
        res["reason"] = "reference_warns"
        res["detail"] = f"{w.category.__name__}: {w.message}"[:1200]
    return res


def check_task(code: str, devices: tuple[str, ...] = ("cpu",), trials: int = 3,
               seed: int = 42) -> list[dict[str, Any]]:
    """Sandbox entry point: :func:`check` on each device in turn; stops at the first failure.

    Returns:
        one :func:`check` result per device checked.
    """
    out = []
    for d in devices:
        r = check(code, d, trials, seed)
        out.append(r)
        if r["reason"]:
            break
    return out


def passed_here(checked: str | None, device: str = "cpu") -> bool:
    """Whether a ``checked_torch`` value lists a pass with this torch on ``device``'s type (the
    check need not run again for the same program)."""
    return f"{torch.__version__}@{torch.device(device).type}" in (checked or "").split(",")


def checked_torch(results: list[dict[str, Any]], previous: str | None = None) -> str:
    """The ``checked_torch`` column: ``"<torch version>@<device type>"`` entries, comma-separated
    and without repeats, for the passed checks in ``results`` appended to ``previous``."""
    seen = [s for s in (previous or "").split(",") if s]
    for r in results:
        if r.get("reason") is None:
            entry = f"{r['torch']}@{torch.device(r['device']).type}"
            if entry not in seen:
                seen.append(entry)
    return ",".join(seen)
