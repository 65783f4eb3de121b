"""The runs behind coverage pruning (:mod:`curate.export.prune_cover`): a line tracer over
the program's own frames (:func:`trace`) and the proof on the ``meta`` device that a pruned
program builds and runs every variant like the original (:func:`check_meta`).

The runs: the program at its proven inputs on the CPU (module, constructor, forward), then
each variant program sharing its module body on ``meta``. Mined code is untrusted: these run
inside the export's sandboxed pruning task, never in the exporting process.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any



@dataclass
class Coverage:
    """Lines of the module body each phase executed (1-based, the body's own numbering).

    Attributes:
        imported: lines run while the module was executed.
        built: lines run inside ``Model(*get_init_inputs())``.
        forward: lines run inside ``model(*get_inputs())``.
        overrides: ``(class, method)`` pairs of the program's classes whose method overrides
            an attribute of a class outside the program.
        failed: why a run failed before its forward (the first failure), or "": nothing
            is concluded then.
        partial: meta forwards of variants that raised inside torch (an operation meta
            tensors may lack; their lines up to the error are recorded): methods are then
            not pruned, since a forward that went further on a real device might call one.
            Assertions and the program's own raises fail alike on every device and are
            not listed.
        entries: per run, ``(first line of Model.forward, calls of it, inputs passed)``:
            the line is None when ``Model.forward`` is not the program's own function,
            calls counts every execution of its code in the run (module, constructor and
            forward; 1 when only the harness's ``model(*get_inputs())`` ran it), inputs is
            ``len(get_inputs())`` (None when it has no length).
    """

    imported: set[int] = field(default_factory=set)
    built: set[int] = field(default_factory=set)
    forward: set[int] = field(default_factory=set)
    overrides: set[tuple[str, str]] = field(default_factory=set)
    failed: str = ""
    partial: list[str] = field(default_factory=list)
    entries: list[tuple[int | None, int, int | None]] = field(default_factory=list)

    @property
    def any(self) -> set[int]:
        return self.imported | self.built | self.forward


def _run_traced(code: str, name: str, meta: bool, cov: Coverage) -> None:
    import torch

    from curate.problem import exec_source

    prefix = f"<{name} "
    phase = [cov.imported]
    entry: list = [None, 0]  # Model.forward's code object, how many times it was called

    def local(frame, event, arg):
        if event == "line":
            phase[0].add(frame.f_lineno)
        return local

    def trace(frame, event, arg):
        if frame.f_code.co_filename.startswith(prefix):
            if frame.f_code is entry[0]:
                entry[1] += 1
            phase[0].add(frame.f_lineno)
            return local
        return None  # torch's own frames run untraced

    torch.manual_seed(0)
    ctx = torch.device("meta") if meta else torch.device("cpu")
    sys.settrace(trace)
    try:
        with ctx:
            ns = exec_source(code, name)
            fwd = getattr(ns.get("Model"), "forward", None)
            code_obj = getattr(fwd, "__code__", None)
            if code_obj is not None and code_obj.co_filename.startswith(prefix):
                entry[0] = code_obj
            init = ns["get_init_inputs"]()
            phase[0] = cov.built
            model = ns["Model"](*init)
            if meta:
                model.to("meta")  # a constructor that wraps torch.empty builds on the CPU
            phase[0] = cov.imported
            inputs = ns["get_inputs"]()
            phase[0] = cov.forward
            try:
                with torch.no_grad():
                    model(*inputs)
            except Exception as exc:  # untrusted code: anything
                if not meta:
                    raise
                if not _own_failure(exc, prefix):
                    cov.partial.append(f"{type(exc).__name__}: {exc}"[:200])
    finally:
        sys.settrace(None)
    try:
        n_inputs = len(inputs)
    except TypeError:
        n_inputs = None
    cov.entries.append((entry[0].co_firstlineno if entry[0] is not None else None, entry[1], n_inputs))
    for v in list(ns.values()):
        if isinstance(v, type) and v.__module__ == name:
            outside = [c for c in v.__mro__[1:] if c.__module__ != name]
            cov.overrides.update((v.__name__, k) for k in vars(v) if any(hasattr(c, k) for c in outside))


def _own_failure(exc: BaseException, prefix: str) -> bool:
    """An assertion, or an exception the program raised itself (its own ``raise``): it
    fails the same way on any device, so the run is complete where it stopped. Anything
    raised inside torch may be an operation meta tensors lack."""
    if isinstance(exc, AssertionError):
        return True
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return bool(last and last.startswith(prefix))


def trace(code: str, variants: list[str]) -> Coverage:
    """Run ``code`` on the CPU and each of ``variants`` on the ``meta`` device (module,
    constructor, forward) under a line tracer of the program's own frames.

    Args:
        code: a program (module body + inputs block) at inputs a CPU runs quickly.
        variants: programs with the same module body and other inputs blocks.
    Returns:
        :class:`Coverage` over all runs; ``failed`` says which run raised (the caller then
        concludes nothing). The runs' modules are left out of ``sys.modules``.
    """
    cov = Coverage()
    runs = [(code, False)] + [(v, True) for v in dict.fromkeys(variants) if v != code]
    for j, (program, meta) in enumerate(runs):
        name = f"_curate_cover{j}"
        try:
            _run_traced(program, name, meta, cov)
        except Exception as exc:  # untrusted code: anything
            cov.failed = f"{'meta' if meta else 'cpu'} run {j}: {type(exc).__name__}: {exc}"[:300]
            return cov
        finally:
            sys.modules.pop(name, None)
    return cov


def _meta_signature(code: str, name: str, forward_error: bool = False) -> list:
    """Structure, dtypes and shapes of the outputs and ``state_dict`` on ``meta``; with
    ``forward_error``, an exception of the forward is the signature (type and message)."""
    import torch

    from curate.export.prune import _flatten

    from curate.problem import exec_source

    torch.manual_seed(0)
    try:
        with torch.device("meta"):
            ns = exec_source(code, name)
            model = ns["Model"](*ns["get_init_inputs"]())
            model.to("meta")  # a constructor that wraps torch.empty builds on the CPU
            inputs = ns["get_inputs"]()
            try:
                with torch.no_grad():
                    out = model(*inputs)
            except Exception as exc:
                if not forward_error:
                    raise
                return [("raised", type(exc).__name__, str(exc)[:200])]
    finally:
        sys.modules.pop(name, None)
    flat: list = []
    _flatten(out, flat)
    sig = [("tensor", x.dtype, tuple(x.shape)) if isinstance(x, torch.Tensor) else x for x in flat]
    sig += [(k, v.dtype, tuple(v.shape)) for k, v in model.state_dict().items()]
    return sig


def check_meta(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Build and run each ``(original, pruned)`` variant pair on the ``meta`` device and
    compare outputs and ``state_dict`` by structure, dtype and shape (meta tensors hold no
    values).

    An original whose forward raises on ``meta`` (an assertion on a shape, an op meta
    tensors lack) is matched by the same exception type and message.

    Returns:
        ``{"same": bool, "detail": str}``; a failure of an original outside its forward
        propagates.
    """
    for j, (original, pruned) in enumerate(pairs):
        ref = _meta_signature(original, f"_curate_meta_o{j}", forward_error=True)
        try:
            new = _meta_signature(pruned, f"_curate_meta_p{j}", forward_error=True)
        except Exception as exc:  # untrusted code: anything
            return {"same": False, "detail": f"pruned variant failed: {type(exc).__name__}: {exc}"[:500]}
        if len(ref) != len(new) or any(not _eq(a, b) for a, b in zip(ref, new)):
            return {"same": False, "detail": "variant outputs differ"}
    return {"same": True, "detail": ""}


def _eq(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return type(a) is type(b)
