"""In-worker guards against candidates that pass without writing a kernel.

- :class:`LaunchCounter` counts launches of the candidate's own kernels: Triton
  ``@triton.jit`` launches (``JITFunction.run`` and, under ``TRITON_INTERPRET=1``,
  ``InterpretedFunction.run``; ``triton.autotune``/``heuristics`` wrappers end in these) and
  calls into modules built by ``torch.utils.cpp_extension.load_inline``/``load``.
  It patches those entry points, so it must be installed before the candidate is executed;
  the patched loaders also build each candidate's extension in a folder of its own
  (:mod:`curate.verify.extensions`: same-named extensions of different code never meet).
- :class:`OpRecorder` (a ``TorchDispatchMode``) records the ATen operators a forward runs
  *outside* kernel launches, and how often. A candidate whose PyTorch code runs every compute
  operator of the reference as often as the reference does is doing the work in PyTorch,
  whatever decoy kernel it also launches (:func:`runs_reference_ops`; the
  design notes' "calling the reference's PyTorch ops instead of a kernel"; KernelGYM
  detects such decoys with the profiler, this is the cheap CPU-and-GPU equivalent).
- :func:`snapshot` / :func:`tampered` detect a candidate replacing the clocks, the
  comparison functions or the guards themselves.
- side streams (CUDA): :class:`LaunchCounter` counts Triton launches made while the current
  stream is not the device's default stream (the harness's), and
  :func:`side_stream_kernels` profiles one forward and names every GPU kernel that ran on
  another stream than the harness's (``load_inline`` kernels that create their own streams
  included).

These checks run in the same process as the candidate, so they raise the bar rather than
make cheating impossible; the process boundary (curate.sandbox) is the hard isolation.
Imports only torch, triton (when installed) and the standard library.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: ATen operators that allocate, view, copy or query tensors: a kernel's wrapper may call them,
#: so they are not counted as the reference's computation.
BOOKKEEPING_OPS = frozenset("""
empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones
ones_like new_ones full full_like new_full fill_ zero_ arange scalar_tensor lift_fresh
lift_fresh_copy view _unsafe_view reshape _reshape_alias view_as expand expand_as permute
transpose t contiguous clone copy_ _to_copy to as_strided squeeze unsqueeze flatten unflatten
select slice narrow detach alias split split_with_sizes chunk unbind resize_ set_ size stride
numel dim is_contiguous is_same_size sym_size sym_stride sym_numel sym_storage_offset item
_local_scalar_dense _has_compatible_shallow_copy_type
""".split())


class LaunchCounter:
    """Counts custom-kernel launches; ``in_kernel`` is true while one runs."""

    def __init__(self) -> None:
        self.count = 0
        self.depth = 0
        #: Triton launches made while a CUDA stream other than the default one was current
        self.side_stream = 0
        self.installed: list[str] = []

    @property
    def in_kernel(self) -> bool:
        return self.depth > 0

    def _wrap_run(self, original):
        counter = self

        def run(self, *args, grid, warmup, **kwargs):
            if warmup:
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            counter.count += 1
            counter.depth += 1
            if _on_side_stream():
                counter.side_stream += 1
            try:
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            finally:
                counter.depth -= 1

        run.__wrapped__ = original
        return run

    def _wrap_callable(self, fn):
        counter = self

        def call(*args, **kwargs):
            counter.count += 1
            counter.depth += 1
            try:
                return fn(*args, **kwargs)
            finally:
                counter.depth -= 1

        call.__wrapped__ = fn
        return call

    def install(self) -> None:
        """Patch Triton's launch paths and ``cpp_extension.load_inline``/``load``
        (:meth:`uninstall` puts the originals back, for a worker that verifies again).
        Extensions are also built each in a folder of its own
        (:func:`curate.verify.extensions.isolated`)."""
        self._saved: list[tuple[Any, str, Any]] = []
        try:
            from triton.runtime.jit import JITFunction
            self._saved.append((JITFunction, "run", JITFunction.__dict__["run"]))
            JITFunction.run = self._wrap_run(JITFunction.run)
            self.installed.append("triton.JITFunction")
        except ImportError:
            pass
        try:
            from triton.runtime.interpreter import InterpretedFunction
            self._saved.append((InterpretedFunction, "run", InterpretedFunction.__dict__["run"]))
            InterpretedFunction.run = self._wrap_run(InterpretedFunction.run)
            self.installed.append("triton.InterpretedFunction")
        except ImportError:
            pass
        import torch.utils.cpp_extension as cpp

        from curate.verify.extensions import isolated

        for name in ("load_inline", "load"):
            original = getattr(cpp, name)
            self._saved.append((cpp, name, original))
            counter = self

            def loader(*args, _build=isolated(original, name), **kwargs):
                module = _build(*args, **kwargs)
                return _CountingModule(module, counter) if module is not None else module

            loader.__wrapped__ = original
            setattr(cpp, name, loader)
            self.installed.append(f"cpp_extension.{name}")


    def uninstall(self) -> None:
        """Restore what :meth:`install` patched (in reverse order)."""
        for owner, name, original in reversed(getattr(self, "_saved", [])):
            setattr(owner, name, original)
        self._saved = []


def _on_side_stream() -> bool:
    """True when CUDA is in use and the current stream is not the default stream."""
    if not torch.cuda.is_initialized():
        return False
    return torch.cuda.current_stream() != torch.cuda.default_stream()


def side_stream_kernels(fn) -> dict[str, Any]:
    """Run ``fn()`` under the profiler (CUDA activity) between two marker kernels on the
    current stream; report the GPU work that ran on any other stream.

    Returns:
        ``{"out": fn's result, "streams": [stream ids seen], "harness_stream": id,
        "kernels_on_side_streams": [names]}``; when the profiler cannot tell (no marker
        recorded), ``harness_stream`` is None and nothing is reported.
    """
    from torch.autograd import DeviceType
    from torch.autograd.profiler import profile

    marker = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    # the autograd profiler that torch.profiler.profile wraps, used directly: the wrapper
    # looks up torch._inductor's settings on start, which imports TorchInductor and dynamo
    # (seconds of a reward worker's first call) in a process that compiles nothing
    with profile(use_device="cuda", use_cpu=False, use_kineto=True) as prof:
        marker.add_(1)
        out = fn()
        torch.cuda.synchronize()
        marker.add_(1)
    events = [e for e in prof.kineto_results.events() if e.device_type() == DeviceType.CUDA]
    events.sort(key=lambda e: e.start_ns())
    if not events:
        return {"out": out, "streams": [], "harness_stream": None, "kernels_on_side_streams": []}
    harness = events[0].device_resource_id()  # the first marker
    side = [e.name()[:120] for e in events if e.device_resource_id() != harness]
    return {"out": out, "streams": sorted({e.device_resource_id() for e in events}),
            "harness_stream": harness, "kernels_on_side_streams": side}


class _CountingModule:
    """A compiled extension module whose callables count as kernel launches."""

    def __init__(self, module: Any, counter: LaunchCounter) -> None:
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "_counter", counter)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._module, name)
        if callable(attr) and not isinstance(attr, type):
            return self._counter._wrap_callable(attr)
        return attr


class OpRecorder(TorchDispatchMode):
    """Records the names of ATen operators run while no custom kernel is launching.

    Args:
        counter: the launch counter whose ``in_kernel`` suspends recording (the Triton
            interpreter and extension modules call ATen themselves).
    """

    def __init__(self, counter: LaunchCounter | None = None) -> None:
        super().__init__()
        self.counter = counter
        self.ops: Counter[str] = Counter()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ in dynamo.disable unless told not to, and
        # that imports torch._dynamo on the first operator: seconds of a reward worker's first
        # call. Nothing compiles under this recorder (it watches uncompiled forwards only).
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.counter is None or not self.counter.in_kernel:
            self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))

    def compute_ops(self) -> set[str]:
        """Recorded operators that are not :data:`BOOKKEEPING_OPS`."""
        return set(self.compute_counts())

    def compute_counts(self) -> Counter[str]:
        """How many times each recorded operator that is not bookkeeping ran."""
        return Counter({op: n for op, n in self.ops.items() if op not in BOOKKEEPING_OPS})


def runs_reference_ops(reference: Counter[str], candidate: Counter[str]) -> bool:
    """True when the candidate ran, outside its kernels, every compute operator of the
    reference at least as many times as the reference did: the whole computation in PyTorch,
    whatever kernel it launched beside it. A candidate that replaced some of the calls (one of
    a network's thirteen convolution + ReLU pairs fused into a kernel) runs fewer and passes
    this rule; its output is still compared."""
    return bool(reference) and all(candidate[op] >= n for op, n in reference.items())


def snapshot(extra: dict[str, tuple[Any, str]] | None = None) -> dict[str, int]:
    """Identities of the objects timing and comparison depend on.

    Args:
        extra: more ``{label: (owner, attribute)}`` pairs (e.g. the worker's own functions).
    Returns:
        ``{label: id(object)}``; compare two snapshots with :func:`tampered`.
    """
    pairs: dict[str, tuple[Any, str]] = {
        "time.perf_counter": (time, "perf_counter"),
        "time.perf_counter_ns": (time, "perf_counter_ns"),
        "time.time": (time, "time"),
        "torch.cuda.Event": (torch.cuda, "Event"),
        "torch.cuda.Event.record": (torch.cuda.Event, "record"),
        "torch.cuda.Event.elapsed_time": (torch.cuda.Event, "elapsed_time"),
        "torch.cuda.Event.synchronize": (torch.cuda.Event, "synchronize"),
        "torch.cuda.synchronize": (torch.cuda, "synchronize"),
        "torch.equal": (torch, "equal"),
        "torch.isnan": (torch, "isnan"),
        "torch.isinf": (torch, "isinf"),
        "torch.linalg.vector_norm": (torch.linalg, "vector_norm"),
        "torch.Tensor.abs": (torch.Tensor, "abs"),
        "torch.Tensor.to": (torch.Tensor, "to"),
        "torch.Tensor.__sub__": (torch.Tensor, "__sub__"),
        "torch.Tensor.__gt__": (torch.Tensor, "__gt__"),
        "torch.Tensor.any": (torch.Tensor, "any"),
        "torch.Tensor.clone": (torch.Tensor, "clone"),
        "torch.manual_seed": (torch, "manual_seed"),
        "torch.default_generator": (torch, "default_generator"),
        "torch.cuda.default_generators": (torch.cuda, "default_generators"),
        "threading.Thread.start": (threading.Thread, "start"),
    }
    pairs.update(extra or {})
    return {label: id(getattr(owner, attr, None)) for label, (owner, attr) in pairs.items()}


def tampered(before: dict[str, int], after: dict[str, int]) -> list[str]:
    """Labels whose object changed between two :func:`snapshot` calls."""
    return sorted(k for k in before if after.get(k) != before[k])


def python_threads() -> int:
    """Live Python threads (a candidate must not leave any behind)."""
    return threading.active_count()


#: Namespaces whose callables a persistent verification worker watches across calls: a
#: candidate that replaces one of them (``torch.relu = ...``) would change what the next
#: call's reference computes, so the worker is retired instead of reused.
_WATCHED = ("torch", "torch.nn.functional", "torch.Tensor", "torch.nn.Module", "torch.cuda",
            "torch.linalg", "torch.fft", "torch.special", "torch._C._VariableFunctions",
            "torch._C._nn", "torch._C.TensorBase", "builtins", "time", "math", "random")


def _settings() -> dict[str, Any]:
    cudnn = torch.backends.cudnn
    return {
        "default_dtype": str(torch.get_default_dtype()), "grad": torch.is_grad_enabled(),
        "matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "cudnn": (cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32),
        "cuda_tf32": torch.backends.cuda.matmul.allow_tf32,
        "threads": torch.get_num_threads(),
        "function_modes": torch._C._len_torch_function_stack(),
        "dispatch_modes": torch._C._len_torch_dispatch_stack(),
        "global_hooks": sum(len(getattr(torch.nn.modules.module, h, {})) for h in (
            "_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
            "_global_module_registration_hooks", "_global_parameter_registration_hooks",
            "_global_buffer_registration_hooks")),
    }


def process_state() -> dict[str, Any]:
    """What one call's candidate could leave behind for the next call in the same process:
    the identities of the callables in :data:`_WATCHED` (and of every ``nn`` layer's
    ``forward``), torch's global settings, pushed torch function/dispatch modes, global
    module hooks, tracing functions and live Python threads. Compare with :func:`changed`."""
    import importlib
    import sys

    ids: dict[str, int] = {}
    for name in _WATCHED:
        head, _, tail = name.partition(".")
        try:
            obj = importlib.import_module(head)
            for part in tail.split(".") if tail else []:
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            continue
        space = getattr(obj, "__dict__", None)
        if not isinstance(space, dict) and space is not None:
            space = dict(space)  # a class's mappingproxy
        if space is None:
            # attributes looked up through an instance: dunders are new bound wrappers each time
            space = {a: getattr(obj, a, None) for a in dir(obj) if not a.startswith("__")}
        for attr, value in list(space.items()):
            if callable(value) or isinstance(value, (staticmethod, classmethod, property)):
                ids[f"{name}.{attr}"] = id(value)
    for attr, cls in list(vars(torch.nn).items()):
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module):
            ids[f"torch.nn.{attr}.forward"] = id(cls.__dict__.get("forward"))
    return {"ids": ids, "settings": _settings(), "threads": python_threads(),
            "trace": (sys.gettrace() is not None, sys.getprofile() is not None)}


def changed(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two :func:`process_state` results (labels; empty when nothing)."""
    out = [k for k, v in before["ids"].items() if after["ids"].get(k) != v]
    out += [f"new {k}" for k in after["ids"] if k not in before["ids"]]
    out += [f"setting {k}" for k, v in before["settings"].items() if after["settings"].get(k) != v]
    if after["threads"] > before["threads"]:
        out.append(f"{after['threads'] - before['threads']} thread(s) left running")
    if after["trace"] != before["trace"]:
        out.append("sys.settrace/setprofile")
    return sorted(out)


def interpreter_hooks() -> tuple:
    """What lets code run inside the verifier's own steps without being called: pushed torch
    function and dispatch modes (they see every operator the comparison runs), trace and
    profile functions, and garbage-collector callbacks. A candidate's forward must leave
    these as it found them; compare two results with ``!=``."""
    import gc
    import sys

    return (torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack(),
            id(sys.gettrace()), id(sys.getprofile()), tuple(map(id, gc.callbacks)),
            id(threading.gettrace()), id(threading.getprofile()))


def output_problem(out: Any, expected: Any = None, path: str = "out") -> str | None:
    """Why ``out`` is not an output whose values exist now; None when it is.

    Every tensor in the output must be exactly a ``torch.Tensor`` (or exactly the class of
    the reference's tensor at that place, e.g. ``nn.Parameter``): a subclass, with its own
    ``__torch_function__``/``__torch_dispatch__``, could compute its values only when the
    checker reads them, and so could an instance attribute that shadows a tensor method
    (``out.detach = ...``). Tuples, lists and dicts are walked; other leaves are left to the
    comparison.
    """
    if isinstance(out, torch.Tensor):
        allowed = {torch.Tensor}
        if isinstance(expected, torch.Tensor):
            allowed.add(type(expected))
        if type(out) not in allowed:
            return (f"{path} is a {type(out).__module__}.{type(out).__qualname__}, a torch.Tensor "
                    "subclass: outputs must be plain torch.Tensor whose values exist when forward returns")
        shadowed = sorted(k for k in getattr(out, "__dict__", {}) if hasattr(torch.Tensor, k))
        if shadowed:
            return f"{path} carries its own {', '.join(shadowed[:3])}: outputs must be plain torch.Tensor"
        return None
    if isinstance(out, (tuple, list)):
        exp = expected if isinstance(expected, (tuple, list)) and len(expected) == len(out) else [None] * len(out)
        for i, (o, e) in enumerate(zip(out, exp)):
            why = output_problem(o, e, f"{path}[{i}]")
            if why:
                return why
    elif isinstance(out, dict):
        for k, o in out.items():
            why = output_problem(o, expected.get(k) if isinstance(expected, dict) else None, f"{path}[{k!r}]")
            if why:
                return why
    return None
