"""KernelBench-format problems: input specs, rendering and loading.

A problem's ``code`` is one self-contained Python file in the KernelBench format
(ScalingIntelligence/KernelBench): it defines ``class Model(nn.Module)``,
``get_inputs()`` (the forward arguments) and ``get_init_inputs()`` (the positional
constructor arguments). curate appends the two functions after a marker line so later
stages (diversify) can swap the inputs without re-parsing the module body.

An *input spec* is a JSON-serialisable list, one entry per forward argument:

- ``{"kind": "tensor", "shape": [8, 64, 32, 32], "dtype": "float32"}``: ``torch.randn``; with
  ``"unit_interval": true``, values uniform in [0.01, 0.99] (``torch.rand(...) * 0.98 + 0.01``):
  probabilities, and inputs of ``log``, ``sqrt`` or ``atanh``, which normal samples make NaN;
  with ``"draw_scale": true``, each draw also picks one factor ``f = 2 ** U(-1, 1)`` for the
  whole tensor (in [0.5, 2]): a normal tensor is multiplied by it, a unit-interval one raised
  to its power (staying inside (0, 1)); a loss or norm that averages many elements then
  differs from draw to draw as a training batch's does, instead of converging to one number
  any constant answer matches (see :func:`curate.checks.constant_answer`)
- ``{"kind": "index", "shape": [8, 128], "high": 1000, "dtype": "int64"}``: ``torch.randint(0, high)``;
  an optional ``"low"`` gives ``torch.randint(low, high)`` (``low=T, high=T+1``: sequence
  lengths all equal to ``T``)
- ``{"kind": "mask", "shape": [8, 128], "dtype": "bool"}``: ``torch.rand(...) > 0.5``
- ``{"kind": "value", "value": 3}``: a plain Python value (int, float, bool, str, None)

A tensor or index entry may carry ``"then"``: steps applied in order after the draw, as a
KernelBench-format file's ``get_inputs()`` writes them (:data:`THEN_STEPS`; read from such files
by :mod:`curate.mine.kernelbench`): ``["mul", c]``, ``["add", c]``, ``["rsub", c]`` (``c - x``),
``["triu", k]``, ``["tril", k]``, ``["softmax", dim]``, ``["log_softmax", dim]``,
``["symmetric"]`` (``x + x.transpose(-2, -1)``), ``["abs"]``, ``["float"]``, ``["mul_rand"]``
(``x * torch.rand(())``: one random factor for the whole tensor).

:class:`InputSpec` is the typed form of one entry (:func:`parse_input_spec` reads a whole spec,
checking each entry); rendering and building inputs go through it. The JSON form stays what
tables and journals hold: ``InputSpec.from_dict(d).to_dict() == d``.

This module imports only torch and the standard library: GPU workers load it on machines
where the rest of curate's dependencies are absent.
"""

from __future__ import annotations

import hashlib
import json
import linecache
import math
import sys
import types
from dataclasses import dataclass
from typing import Any

INPUTS_MARKER = "# ---- curate: inputs (generated) ----"

_DTYPE_BYTES = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "complex64": 8,
}


class ProblemLoadError(Exception):
    """The problem's code could not be executed or lacks Model/get_inputs/get_init_inputs."""


INPUT_KINDS = ("tensor", "index", "mask", "value")
#: ``then`` steps: name -> (number of arguments, the expression template of ``x``)
THEN_STEPS = {"mul": (1, "({x} * {0!r})"), "add": (1, "({x} + {0!r})"), "rsub": (1, "({0!r} - {x})"),
              "triu": (1, "torch.triu({x}, {0!r})"), "tril": (1, "torch.tril({x}, {0!r})"),
              "softmax": (1, "{x}.softmax({0!r})"), "log_softmax": (1, "{x}.log_softmax({0!r})"),
              "symmetric": (0, "(lambda a: a + a.transpose(-2, -1))({x})"), "abs": (0, "{x}.abs()"),
              "float": (0, "{x}.float()"), "mul_rand": (0, "({x} * torch.rand(()))")}
#: a ``unit_interval`` tensor is ``rand * UNIT_SCALE + UNIT_LOW``: in [0.01, 0.99], away from
#: the poles of ``log(p)`` and ``log(1 - p)``
UNIT_SCALE, UNIT_LOW = 0.98, 0.01
#: a ``draw_scale`` tensor's factor per draw is ``2 ** (DRAW_SCALE_SPAN * (u - 0.5))``, ``u``
#: uniform in [0, 1): in [0.5, 2]. A unit-interval tensor raised to that power keeps its
#: smallest value 1e-4 (0.01 ** 2), inside float16's normal range.
DRAW_SCALE_SPAN = 2.0
_SPEC_KEYS = ("kind", "shape", "dtype", "low", "high", "value")


@dataclass(frozen=True)
class InputSpec:
    """One forward argument of a problem, typed (the JSON form: the module docstring).

    Attributes:
        kind: ``tensor``, ``index``, ``mask`` or ``value``.
        shape: dimensions (tensor, index, mask), as the JSON gives them; None for a value.
        dtype: torch dtype name (``float32`` when a tensor gives none); None where absent.
        low, high: ``torch.randint`` bounds of an index (low 0 when absent).
        value: the plain Python value of a ``value`` argument.
        extra: keys of the JSON form outside these fields (``arg``, ...), kept for the round trip.
    """

    kind: str
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    low: int | None = None
    high: int | None = None
    value: Any = None
    extra: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def from_dict(cls, spec: Any) -> "InputSpec":
        """The typed form of one JSON entry (an :class:`InputSpec` is returned as is).

        Raises:
            ValueError: not a mapping, an unknown ``kind``, a tensor/index/mask without an
                integer ``shape``, an index without ``high``, or a value without ``value``.
        """
        if isinstance(spec, InputSpec):
            return spec
        if not isinstance(spec, dict):
            raise ValueError(f"input spec entry must be a mapping, got {type(spec).__name__}")
        kind = spec.get("kind")
        if kind not in INPUT_KINDS:
            raise ValueError(f"unknown input kind {kind!r}")
        shape = None
        if kind != "value":
            raw = spec.get("shape")
            if not isinstance(raw, (list, tuple)):
                raise ValueError(f"{kind} input needs a shape (a list of ints), got {raw!r}")
            # the dimensions as given: torch judges them where the inputs are built, with the
            # errors mining's repairs read
            shape = tuple(raw)
        if kind == "index" and spec.get("high") is None:
            raise ValueError("index input needs high")
        if kind == "value" and "value" not in spec:
            raise ValueError("value input needs value")
        _check_then(spec.get("then"), kind)
        return cls(kind=kind, shape=shape, dtype=spec.get("dtype"),
                   low=None if spec.get("low") is None else int(spec["low"]),
                   high=None if spec.get("high") is None else int(spec["high"]),
                   value=spec.get("value"),
                   extra=tuple((k, v) for k, v in spec.items() if k not in _SPEC_KEYS))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``from_dict(d).to_dict() == d`` for every well-formed entry (keys a
        kind does not use and fields left None are left out, as producers write them)."""
        out: dict[str, Any] = {"kind": self.kind}
        if self.shape is not None:
            out["shape"] = list(self.shape)
        for name in ("dtype", "low", "high"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.kind == "value":
            out["value"] = self.value
        out.update(self.extra)
        return out

    @property
    def numel(self) -> int:
        """Elements of a tensor, index or mask argument; 0 for a value."""
        return math.prod(self.shape) if self.shape is not None else 0

    @property
    def nbytes(self) -> int:
        """Bytes the argument occupies (0 for a value; a dtype curate does not know counts 4)."""
        return self.numel * _DTYPE_BYTES.get(self.dtype or "float32", 4) if self.kind != "value" else 0

    @property
    def unit_interval(self) -> bool:
        """A tensor drawn uniform in [0.01, 0.99] instead of normal (the module docstring)."""
        return self.kind == "tensor" and dict(self.extra).get("unit_interval") is True

    @property
    def then(self) -> list[list]:
        """The ``then`` steps applied after the draw (the module docstring); [] when none."""
        return list(dict(self.extra).get("then") or [])

    @property
    def draw_scale(self) -> bool:
        """A tensor given one random factor per draw (the module docstring)."""
        return self.kind == "tensor" and dict(self.extra).get("draw_scale") is True

    def expr(self) -> str:
        """The ``get_inputs()`` expression that makes the argument."""
        x = self._draw_expr()
        for step in self.then:
            x = THEN_STEPS[step[0]][1].format(*step[1:], x=x)
        return x

    def _draw_expr(self) -> str:
        if self.kind == "tensor":
            dt = self.dtype or "float32"
            extra = "" if dt == "float32" else f", dtype={_torch_dtype_expr(dt)}"
            factor = f"2 ** ({DRAW_SCALE_SPAN:g} * (torch.rand(()).item() - 0.5))"
            if self.unit_interval:
                base = f"(torch.rand({_shape_tuple(self.shape)}{extra}) * {UNIT_SCALE} + {UNIT_LOW})"
                return f"{base} ** ({factor})" if self.draw_scale else base
            base = f"torch.randn({_shape_tuple(self.shape)}{extra})"
            return f"{base} * {factor}" if self.draw_scale else base
        if self.kind == "index":
            return f"torch.randint({self.low or 0}, {self.high}, {_shape_tuple(self.shape)})"
        if self.kind == "mask":
            return f"torch.rand({_shape_tuple(self.shape)}) > 0.5"
        return repr(self.value)


def _check_then(then: Any, kind: str) -> None:
    """Raises ValueError for a ``then`` list that is not of :data:`THEN_STEPS`."""
    if then is None:
        return
    if kind not in ("tensor", "index") or not isinstance(then, (list, tuple)):
        raise ValueError(f"'then' steps are a list, on a tensor or index input (got {then!r} on {kind})")
    for step in then:
        if not isinstance(step, (list, tuple)) or not step or step[0] not in THEN_STEPS:
            raise ValueError(f"unknown 'then' step {step!r}; known: {', '.join(THEN_STEPS)}")
        if len(step) - 1 != THEN_STEPS[step[0]][0] or not all(
                isinstance(a, (int, float)) and not isinstance(a, bool) for a in step[1:]):
            raise ValueError(f"'then' step {step!r}: {THEN_STEPS[step[0]][0]} number(s) expected")


def apply_then(x: Any, then: list[list], generator: Any = None) -> Any:
    """``x`` with the ``then`` steps applied (a torch tensor; see the module docstring);
    ``generator`` draws the factor of ``mul_rand``."""
    import torch

    for step in then:
        name, args = step[0], step[1:]
        if name == "mul":
            x = x * args[0]
        elif name == "add":
            x = x + args[0]
        elif name == "rsub":
            x = args[0] - x
        elif name in ("triu", "tril"):
            x = getattr(torch, name)(x, int(args[0]))
        elif name in ("softmax", "log_softmax"):
            x = getattr(x, name)(int(args[0]))
        elif name == "symmetric":
            x = x + x.transpose(-2, -1)
        elif name == "abs":
            x = x.abs()
        elif name == "float":
            x = x.float()
        elif name == "mul_rand":
            x = x * torch.rand((), dtype=x.dtype, device=x.device, generator=generator)
        else:
            raise ValueError(f"unknown 'then' step {step!r}")
    return x


def parse_input_spec(input_spec: Any) -> list[InputSpec]:
    """The typed form of an input spec: a JSON string, or a list of entries (dicts or
    :class:`InputSpec`).

    Raises:
        ValueError: malformed JSON, not a list, or a malformed entry (its position named).
    """
    if isinstance(input_spec, str):
        input_spec = json.loads(input_spec)
    if not isinstance(input_spec, (list, tuple)):
        raise ValueError(f"input spec must be a list, got {type(input_spec).__name__}")
    out = []
    for i, entry in enumerate(input_spec):
        try:
            out.append(InputSpec.from_dict(entry))
        except ValueError as exc:
            raise ValueError(f"input {i}: {exc}") from None
    return out


def _torch_dtype_expr(dtype: str) -> str:
    return f"torch.{dtype}"


def render_inputs(input_spec: list[dict] | list[InputSpec], init_args: list[Any]) -> str:
    """Render ``get_inputs()`` and ``get_init_inputs()`` for ``input_spec`` and ``init_args``.

    Args:
        input_spec: forward arguments, see the module docstring (dicts or :class:`InputSpec`).
        init_args: positional constructor arguments; each must be ``repr``-able Python
            (numbers, strings, bools, None, lists and tuples of them).
    Returns:
        Python source (str) starting with :data:`INPUTS_MARKER`.
    Raises:
        ValueError: a malformed spec entry (:func:`parse_input_spec`).
    """
    lines = [INPUTS_MARKER, "", "", "def get_inputs():"]
    if not input_spec:
        lines.append("    return []")
    else:
        exprs = [spec.expr() for spec in parse_input_spec(input_spec)]
        lines.append("    return [")
        lines.extend(f"        {e}," for e in exprs)
        lines.append("    ]")
    lines += ["", "", "def get_init_inputs():", f"    return {list(init_args)!r}", ""]
    return "\n".join(lines)


def _shape_tuple(shape: list[int]) -> str:
    if len(shape) == 1:
        return f"({int(shape[0])},)"
    return "(" + ", ".join(str(int(s)) for s in shape) + ")"


def assemble(module_source: str, input_spec: list[dict], init_args: list[Any]) -> str:
    """Join a self-contained module body (defining ``Model``) with rendered inputs."""
    return module_source.rstrip() + "\n\n\n" + render_inputs(input_spec, init_args)


def replace_inputs(code: str, input_spec: list[dict], init_args: list[Any]) -> str:
    """Return ``code`` with its generated inputs block replaced.

    Raises:
        ValueError: ``code`` has no :data:`INPUTS_MARKER` (it was not written by curate).
    """
    head, sep, _ = code.partition(INPUTS_MARKER)
    if not sep:
        raise ValueError("code has no curate inputs marker")
    return assemble(head, input_spec, init_args)


#: ``shape_source`` values of rows whose ``input_spec`` was sized for a GPU and not run on this
#: CPU: ``estimated`` (diversify's estimates alone) and ``source`` (a KernelBench-format file's
#: own sizes, :mod:`curate.mine.kernelbench`, which can take gigabytes).
GPU_SIZED = ("estimated", "source")


def mined_inputs(row: dict[str, Any], estimated_only: bool = True) -> tuple[list, list] | None:
    """``(input_spec, init_args)`` a row was mined with, for work a CPU must do on a problem
    whose shapes were sized for a GPU (columns ``mined_input_spec``/``mined_init_args``).

    Args:
        estimated_only: only for rows whose shapes were sized for a GPU and never run here
            (``shape_source`` in :data:`GPU_SIZED`); False: for any row that has them.
    Returns:
        The mined spec and constructor arguments, or None when the row has none (or, with
        ``estimated_only``, was sized on a GPU).
    Raises:
        ValueError: the columns hold malformed JSON.
    """
    if not row.get("mined_input_spec") or (estimated_only and row.get("shape_source") not in GPU_SIZED):
        return None
    init = row.get("mined_init_args")
    return json.loads(row["mined_input_spec"]), (json.loads(init) if init else [])


def spec_numel(spec: dict | InputSpec) -> int:
    """Elements of one argument (0 for a value)."""
    return InputSpec.from_dict(spec).numel


def spec_bytes(input_spec: list[dict] | list[InputSpec]) -> int:
    """Bytes the forward inputs occupy (sum over tensor arguments)."""
    return sum(s.nbytes for s in parse_input_spec(input_spec))


def dumps(obj: Any) -> str:
    """Stable JSON used for the ``init_args`` and ``input_spec`` columns."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


_SOURCES: list[str] = []  # linecache entries made by exec_source, oldest first


def exec_source(code: str, name: str) -> dict[str, Any]:
    """Execute ``code`` as a module named ``name``; return its namespace.

    The module stays registered in ``sys.modules`` under ``name`` (until the next module of
    that name replaces it): ``dataclasses`` looks a class's module up there to read string
    annotations (``from __future__ import annotations``) while the code runs, and
    torch_geometric's ``MessagePassing`` reads its subclass's module globals when built. Its
    source is put in ``linecache`` under a file name unique to the code, so
    ``inspect.getsource`` works on its functions:
    Triton's ``@jit`` reads a kernel's source that way and refuses (ValueError "@jit functions
    should be defined in a Python file") code that has none. Exceptions propagate.
    """
    module = types.ModuleType(name)
    sys.modules[name] = module
    filename = f"<{name} {hashlib.sha1(code.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    _SOURCES.append(filename)
    while len(_SOURCES) > 64:  # a persistent worker loads thousands of problems
        linecache.cache.pop(_SOURCES.pop(0), None)
    try:
        exec(compile(code, filename, "exec"), module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module.__dict__


def load_problem(code: str, name: str = "problem") -> dict[str, Any]:
    """Execute KernelBench-format ``code`` in a fresh namespace.

    Returns:
        The namespace, holding ``Model``, ``get_inputs`` and ``get_init_inputs``.
    Raises:
        ProblemLoadError: the code raised while executing or lacks one of the three names.
    """
    try:
        namespace = exec_source(code, f"curate_problem_{name}")
    except Exception as exc:  # untrusted code: any failure is a load error
        raise ProblemLoadError(f"{type(exc).__name__}: {exc}") from exc
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in namespace]
    if missing:
        raise ProblemLoadError(f"missing {', '.join(missing)}")
    return namespace


def build_inputs(input_spec: list[dict], device: str = "cpu", seed: int | None = None) -> list[Any]:
    """Materialise ``input_spec`` directly on ``device`` (no CPU round trip on CUDA).

    Tensors are built on the target device, which on a GPU avoids the multi-GB host
    allocations that KernelBench's ``get_inputs()`` then ``.cuda()`` pattern pays for. On
    ``meta`` (shapes and dtypes only, nothing drawn) ``seed`` is ignored: torch has no
    generator for that device ("META device type not an accelerator").
    """
    import torch

    gen = None
    if seed is not None and torch.device(device).type != "meta":
        gen = torch.Generator(device=device).manual_seed(seed)
    out: list[Any] = []
    for spec in parse_input_spec(input_spec):
        if spec.kind == "tensor":
            dt = getattr(torch, spec.dtype or "float32")
            if spec.unit_interval:
                x = torch.rand(spec.shape, dtype=dt, device=device, generator=gen) * UNIT_SCALE + UNIT_LOW
            else:
                x = torch.randn(spec.shape, dtype=dt, device=device, generator=gen)
            if spec.draw_scale and x.device.type != "meta":  # drawn after the tensor, as rendered
                u = float(torch.rand((), device=device, generator=gen))
                f = 2 ** (DRAW_SCALE_SPAN * (u - 0.5))
                x = x ** f if spec.unit_interval else x * f
            out.append(apply_then(x, spec.then, gen) if spec.then else x)
        elif spec.kind == "index":
            x = torch.randint(spec.low or 0, spec.high, spec.shape, device=device, generator=gen)
            out.append(apply_then(x, spec.then, gen) if spec.then else x)
        elif spec.kind == "mask":
            out.append(torch.rand(spec.shape, device=device, generator=gen) > 0.5)
        else:
            out.append(spec.value)
    return out


#: Floating-point dtypes a problem can be run in (``curate diversify --dtypes``), by torch name.
RUN_DTYPES = ("float32", "bfloat16", "float16")
#: Short names of :data:`RUN_DTYPES` (problem ids of dtype variants, prompts' headings).
DTYPE_SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def spec_in_dtype(input_spec: list[dict], dtype: str | None) -> list[dict]:
    """``input_spec`` with every floating-point tensor entry in ``dtype`` (a torch name; index,
    mask, value and integer or complex tensor entries kept), as a harness run in that precision
    casts the inputs; ``dtype`` None returns the spec unchanged."""
    if dtype is None:
        return input_spec
    return [{**s, "dtype": dtype} if s.get("kind") == "tensor" and _is_float_name(s.get("dtype") or "float32")
            else s for s in input_spec]


def _is_float_name(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat", "half", "double"))


def cast_floating(values: list[Any], dtype: str | None) -> list[Any]:
    """``values`` with every floating-point tensor cast to ``dtype`` (a torch name), others
    kept: the inputs of a problem run in that precision (KernelBench's harness casts so);
    ``dtype`` None returns ``values`` unchanged."""
    if dtype is None:
        return values
    import torch

    dt = getattr(torch, dtype)
    return [v.to(dt) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


#: Fields of an input spec entry as the exported dataset stores it (a struct per argument):
#: ``value`` is JSON text in ``value_json`` (one column type for ints, floats, strings ...),
#: keys the struct does not know go, JSON-encoded, to ``extra_json``.
SPEC_FIELDS = ("kind", "shape", "dtype", "low", "high", "value_json", "extra_json")


def spec_record(spec: dict) -> dict:
    """One input spec entry (see the module docstring) as a flat record of :data:`SPEC_FIELDS`."""
    extra = {k: v for k, v in spec.items() if k not in ("kind", "shape", "dtype", "low", "high", "value")}
    return {
        "kind": spec.get("kind"),
        "shape": [int(s) for s in spec["shape"]] if spec.get("shape") is not None else None,
        "dtype": spec.get("dtype"),
        "low": int(spec["low"]) if spec.get("low") is not None else None,
        "high": int(spec["high"]) if spec.get("high") is not None else None,
        "value_json": json.dumps(spec["value"]) if "value" in spec else None,
        "extra_json": json.dumps(extra, sort_keys=True) if extra else None,
    }


def plain_input_spec(input_spec: Any) -> list[dict] | None:
    """An input spec in the plain form :func:`render_inputs` takes, from any stored form.

    Accepts a JSON string, a list of plain spec dicts, or a list of records as the exported
    dataset's ``input_spec`` column holds them (:data:`SPEC_FIELDS`, absent fields None, as
    ``datasets`` and pyarrow return structs). None stays None.

    Raises:
        ValueError: not a list of spec entries.
    """
    if input_spec is None:
        return None
    if isinstance(input_spec, str):
        input_spec = json.loads(input_spec)
    if not isinstance(input_spec, (list, tuple)):
        raise ValueError(f"input spec must be a list, got {type(input_spec).__name__}")
    out = []
    for rec in input_spec:
        if not isinstance(rec, dict) or "kind" not in rec:
            raise ValueError(f"not an input spec entry: {rec!r}")
        if "value_json" not in rec and "extra_json" not in rec:
            out.append(dict(rec))
            continue
        spec = {k: rec[k] for k in ("kind", "shape", "dtype", "low", "high") if rec.get(k) is not None}
        if spec.get("shape") is not None:
            spec["shape"] = [int(s) for s in spec["shape"]]
        if rec.get("value_json") is not None:
            spec["value"] = json.loads(rec["value_json"])
        if rec.get("extra_json"):
            spec.update(json.loads(rec["extra_json"]))
        out.append(spec)
    return out


def plain_shape_variants(shape_variants: Any) -> list[dict]:
    """Held-out shapes as ``[{"input_spec": [plain spec ...], "init_args": list | None}]``.

    Accepts a JSON string, a list of input specs, or a list of ``{"input_spec",
    "init_args"}`` dicts whose ``input_spec`` is in any form :func:`plain_input_spec` takes
    and whose ``init_args`` is a list, JSON text or None (the exported dataset's
    ``shape_variants`` column). None gives ``[]``.

    Raises:
        ValueError: an item in none of these forms.
    """
    if shape_variants is None:
        return []
    if isinstance(shape_variants, str):
        shape_variants = json.loads(shape_variants) if shape_variants.strip() else []
    out = []
    for item in shape_variants:
        if isinstance(item, dict) and "input_spec" in item:
            init = item.get("init_args")
            out.append({"input_spec": plain_input_spec(item["input_spec"]),
                        "init_args": json.loads(init) if isinstance(init, str) else init})
        elif isinstance(item, (list, tuple)):
            out.append({"input_spec": plain_input_spec(item), "init_args": None})
        else:
            raise ValueError(f"not a shape variant: {item!r}")
    return out
