"""Source generation for a found problem: the ``Model`` wrapper around the mined class, its
``get_inputs``/``get_init_inputs`` arguments, the imports a problem may use
(:func:`problem_imports`) and the rewrites that keep a closure runnable under ``exec()``
(:func:`exec_safe`: TorchScript/compile decorators removed, ``__name__`` set)."""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.metadata
import itertools
import pkgutil
import re
import sys
from typing import Any, Iterator

import torch
from torch import nn

from curate.scoped import scoped_items
from curate.mine.guess import ConfigArg, Expr, NamespaceArg
from curate.mine.inputs import _forward_params


def _forward_wrapper(specs: list[dict], module: nn.Module, main: bool = False) -> list[str]:
    """``Model.forward`` taking every input positionally, for inputs the mined forward takes by
    keyword or as a pair, and (``main``) returning the one tensor :data:`MAIN_TENSOR_SOURCE`
    picks from an output that is not a tensor; empty when the mined forward is fine as it is."""
    if not main and not any(s.get("arg") or s.get("pair") for s in specs):
        return []
    names = [n for n, _ in _forward_params(module)]
    params, pos, kw, i, j = [], [], [], 0, 0

    def fresh(name: str) -> str:
        base, k = name, 1
        while name in params or name == "self":
            name, k = f"{base}_{k}", k + 1
        return name

    while i < len(specs):
        s = specs[i]
        if s.get("pair"):
            a, b = fresh(f"{s['arg']}_0"), fresh(f"{s['arg']}_1")
            params += [a, b]
            value = f"({a}, {b})"
            i += 1
        else:
            name = fresh(s.get("arg") or (names[j] if j < len(names) else f"x{j}"))
            params.append(name)
            value = name
        if s.get("arg"):
            kw.append(f"{s['arg']}={value}")
        else:
            pos.append(value)
            j += 1
        i += 1
    body = f"super().forward({', '.join(pos + kw)})"
    if main:
        body = f"_main_tensor({body})  # the module returns several values: the problem's output is one tensor"
    return ["", f"    def forward(self, {', '.join(params)}):", f"        return {body}"]


#: Written into problems whose module returns a tuple, named tuple, list, dict or dataclass:
#: a KernelBench-style harness compares one output tensor.
MAIN_TENSOR_SOURCE = '''
def _main_tensor(out):
    """The problem's output: the first floating-point tensor of ``out`` (a tuple, named tuple,
    list, dict or dataclass walked depth first, in order), else its first tensor; for an
    output holding none, the same of an object's attributes, up to three objects deep."""
    import dataclasses

    found = []

    def walk(o):
        if isinstance(o, torch.Tensor):
            found.append(o)
        elif isinstance(o, dict):
            for v in o.values():
                walk(v)
        elif isinstance(o, (list, tuple)):
            for v in o:
                walk(v)
        elif dataclasses.is_dataclass(o) and not isinstance(o, type):
            for f in dataclasses.fields(o):
                walk(getattr(o, f.name, None))

    def held(o, depth):  # an object holding tensors in its attributes (a distribution, a value object)
        before = len(found)
        walk(o)
        if len(found) > before or depth <= 0:
            return
        if isinstance(o, (list, tuple)):
            items = list(o)
        elif isinstance(o, dict):
            items = list(o.values())
        elif isinstance(getattr(o, "__dict__", None), dict) and not isinstance(o, (type, torch.nn.Module)) \
                and not callable(o):
            items = list(vars(o).values())
        else:
            items = []
        for v in items:
            held(v, depth - 1)

    held(out, 3)
    return next((t for t in found if t.is_floating_point()), found[0] if found else out)
'''


def has_uninitialized(module: nn.Module) -> bool:
    """Whether ``module`` holds lazy parameters or buffers (``nn.LazyLinear`` and kin), which
    take their shapes, and draw their values, at the first forward."""
    lazy = (nn.parameter.UninitializedParameter, nn.parameter.UninitializedBuffer)
    return any(isinstance(t, lazy) for t in itertools.chain(module.parameters(), module.buffers()))


#: ``Model.__init__``'s last lines for a module with lazy parameters: a dry forward on the
#: problem's own inputs materializes them while the model is built, under the seed the
#: caller built it with, so two seeded builds agree (and a shape variant's inputs give the
#: layers that variant's sizes).
DRY_FORWARD = ["        with torch.no_grad():  # lazy layers take their shapes and weights here, under the build's seed",
               "            self(*get_inputs())"]


#: Parameters made with ``torch.empty`` and left for a model-level init (transformers'
#: ``_init_weights``, which a standalone block never runs) hold whatever memory held:
#: outputs that differ from run to run, or NaN.
_EMPTY_PARAM = re.compile(r"Parameter\(\s*torch\.empty\(")

#: Written into problems whose code makes such parameters; ``Model`` is built inside it.
FILLED_EMPTY_SOURCE = '''
@contextlib.contextmanager
def _filled_empty():
    """torch.empty filling floating tensors from N(0, 0.02) (transformers' initializer_range)
    while the module is built, for parameters its code leaves to a model-level init."""
    empty = torch.empty

    def filled(*args, **kwargs):
        t = empty(*args, **kwargs)
        if t.is_floating_point():
            with torch.no_grad():
                t.normal_(0.0, 0.02)
        return t

    torch.empty = filled
    try:
        yield
    finally:
        torch.empty = empty
'''
_filled_ns: dict[str, Any] = {"contextlib": contextlib, "torch": torch}
exec(FILLED_EMPTY_SOURCE, _filled_ns)
filled_empty = _filled_ns["_filled_empty"]


def needs_filled_empty(closure_source: str) -> bool:
    """Whether the closure makes parameters with ``torch.empty`` (see :data:`FILLED_EMPTY_SOURCE`)."""
    return bool(_EMPTY_PARAM.search(closure_source))


def model_wrapper(class_name: str, kwargs: dict[str, Any], doc: str, eval_mode: bool = False,
                  forward: list[str] = (), fill_empty: bool = False, main_tensor: bool = False,
                  dry_forward: bool = False) -> str:
    """Source of ``class Model(<class_name>)``.

    Literal arguments become ``Model``'s positional parameters (``get_init_inputs()``),
    configuration arguments too (as the dict of values the configuration is built with);
    :class:`~curate.mine.guess.Expr` arguments are written in place. With ``fill_empty``
    the base class is built inside :data:`FILLED_EMPTY_SOURCE`'s context; ``main_tensor``
    adds :data:`MAIN_TENSOR_SOURCE` (for a ``forward`` that calls it) and ``dry_forward``
    ends ``__init__`` with :data:`DRY_FORWARD`.
    """
    lines = [f"class Model({class_name}):", f'    """{doc}"""']
    if main_tensor:
        lines[:0] = [*MAIN_TENSOR_SOURCE.splitlines(), "", ""]
    if fill_empty:
        lines[:0] = ["import contextlib", *FILLED_EMPTY_SOURCE.splitlines(), "", ""]
    names = [n for n, v in kwargs.items() if not isinstance(v, Expr)]
    if kwargs or eval_mode or fill_empty or dry_forward:
        passed = []
        for n, v in kwargs.items():
            if isinstance(v, Expr):
                passed.append(f"{n}={v.code}")
            elif isinstance(v, ConfigArg):
                passed.append(f"{n}={v.cls_name}(**{n})")
                if isinstance(v, NamespaceArg) and "import types" not in lines:
                    lines.insert(0, "import types")
                    lines.insert(1, "")
            else:
                passed.append(f"{n}={n}")
        lines.append(f"    def __init__(self{''.join(', ' + n for n in names)}):")
        if fill_empty:
            lines += ["        with _filled_empty():", f"            super().__init__({', '.join(passed)})"]
        else:
            lines.append(f"        super().__init__({', '.join(passed)})")
        if eval_mode:
            lines.append("        self.eval()  # dropout inside is not configurable: keep the problem deterministic")
        if dry_forward:
            lines += DRY_FORWARD
    lines += list(forward)
    return "\n".join(lines) + "\n"


def init_args(kwargs: dict[str, Any]) -> list[Any]:
    """``get_init_inputs()`` for ``kwargs``: literals, and configuration values as dicts."""
    return [v.as_dict() if isinstance(v, ConfigArg) else v for v in kwargs.values() if not isinstance(v, Expr)]


def _literal_ok(value: Any) -> bool:
    try:
        return eval(repr(value), {"__builtins__": {}}) == value
    except Exception:
        return False


#: What a problem may import besides the packages its own top-level import lines name: the
#: standard library, torch, numpy and typing_extensions (the closure's contract,
#: :data:`curate.mine.closure.RUNTIME_MODULES`), and what torch itself requires (sympy,
#: networkx, jinja2, ...: present wherever torch is). Also setuptools and packaging, which
#: torch.utils.cpp_extension imports: every machine that builds CUDA candidates has them.
_RUNTIME = frozenset(sys.stdlib_module_names) | {"torch", "typing_extensions", "numpy", "curate",
                                                 "setuptools", "packaging"}


@functools.lru_cache(maxsize=1)
def _torch_requirements() -> frozenset[str]:
    """Top-level import names of torch's required distributions, transitively."""
    seen: set[str] = set()
    todo = ["torch"]
    names: set[str] = set()
    while todo:
        dist = todo.pop()
        if dist in seen:
            continue
        seen.add(dist)
        try:
            d = importlib.metadata.distribution(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        todo += [re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0].lower().replace("_", "-")
                 for r in d.requires or [] if "extra ==" not in r]
        for f in d.files or []:
            top = f.parts[0]
            if top != ".." and not top.endswith((".dist-info", ".data", ".pth")):
                names.add(top.removesuffix(".py"))
    return frozenset(names)


@contextlib.contextmanager
def problem_imports(closure_source: str) -> Iterator[None]:
    """While synthesizing a closure, make every package installed here that a problem may not
    import look absent to it (``sys.modules[name] = None``: ``import scipy`` raises
    ModuleNotFoundError, ``importlib.util.find_spec("scipy")`` returns None, as where only
    torch and numpy are). Allowed: :data:`_RUNTIME`, torch's requirements and the packages the
    closure's top-level imports name (a source marked importable). A problem then cannot lean
    on a package this machine happens to have, and outcomes do not depend on the machine."""
    named: set[str] = set()
    try:
        for node in ast.parse(closure_source).body:
            if isinstance(node, ast.Import):
                named |= {a.name.partition(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                named.add(node.module.partition(".")[0])
    except SyntaxError:
        pass
    allowed = _RUNTIME | _torch_requirements() | named
    blocked = {m.name for m in pkgutil.iter_modules() if m.name not in allowed and not m.name.startswith("_")}
    with scoped_items(sys.modules, dict.fromkeys(blocked)):
        yield


EXEC_SAFE_LINE = '__name__ = globals().get("__name__") or "builtins"  # as classes get under exec() into {}'


#: Decorators that compile or trace what they decorate (TorchScript, ``torch.compile``); dotted
#: names as written, ``torch.`` optional. Called forms (``@torch.jit.ignore(drop=True)``) count.
_EAGER_DECORATORS = frozenset({
    "jit.script", "jit.script_method", "jit.ignore", "jit.unused", "jit.export", "jit.script_if_tracing",
    "jit._script_if_tracing", "jit.interface", "jit._overload_method", "jit.trace", "jit.trace_module",
    "compile", "compiler.disable", "_dynamo.disable", "_dynamo.optimize",
    # TorchScript's overload registry, which reads the defining module's name (None under exec())
    "_jit_internal._overload_method", "_jit_internal._overload",
    # mixed-precision casts around an autograd function: nothing to cast in full precision, and
    # ``torch.amp.custom_fwd`` without ``device_type`` fails when the class is defined
    "amp.custom_fwd", "amp.custom_bwd", "cuda.amp.custom_fwd", "cuda.amp.custom_bwd", "custom_fwd", "custom_bwd",
})


def _eager_decorator(node: ast.expr) -> bool:
    """Whether a decorator compiles or traces (:data:`_EAGER_DECORATORS`)."""
    target = node.func if isinstance(node, ast.Call) else node
    try:
        name = ast.unparse(target)
    except Exception:  # noqa: BLE001 - an odd node is not a compile decorator
        return False
    return name.removeprefix("torch.") in _EAGER_DECORATORS


def _without_script_decorators(source: str) -> str:
    """``source`` with TorchScript, tracing, ``torch.compile`` and autocast decorators removed, so the
    decorated code runs eagerly and computes the same: ``@torch.jit.script``,
    ``@torch.jit.script_method``, ``@torch.jit.ignore``/``unused``/``export`` (with or without
    arguments), ``@torch.compile(...)``. TorchScript reads a function's source file, which code
    ``exec()``-ed from a string has none of (a KernelBench-style harness's load fails); a
    ``ScriptModule``'s script methods are compiled under one qualified name per class, so the
    second build of the class in a process fails (``Can't redefine method: forward on class:
    __torch__...``); and a compiled reference would be timed as Inductor's code, not eager."""
    if not any(w in source for w in ("jit.", "_jit_internal", "compile", "_dynamo", "custom_fwd", "custom_bwd")):
        return source
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    drop: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for d in node.decorator_list:
                if _eager_decorator(d):
                    # the decorator's lines, with the "@" on the line before its expression starts
                    drop.update(range(d.lineno, d.end_lineno + 1))
    if not drop:
        return source
    lines = source.splitlines(keepends=True)
    for k in drop:  # a multi-line decorator may share no line with code; check and keep it safe
        if not lines[k - 1].lstrip().startswith("@") and k - 1 not in drop:
            return source
    return "".join(line for k, line in enumerate(lines, 1) if k not in drop)


#: Keywords asking a model factory for downloaded weights (torchvision's, timm's, research
#: code's ``resnet50(pretrained=True)``) when given ``True``.
_PRETRAINED_FLAGS = re.compile(r"(pretrained|pretrained_backbone|use_pretrained|load_pretrained|imagenet_pretrained)")
#: torchvision's weight selectors (``weights=ResNet50_Weights.IMAGENET1K_V2``, ``weights="DEFAULT"``):
#: the parameters that take them by name, and the names of the weights
_WEIGHTS_KEYWORDS = re.compile(r"(\w+_)?weights(_backbone)?")
_WEIGHTS_NAME = re.compile(r"DEFAULT|[A-Z][A-Z0-9_]*_V\d+")


def _asks_for_weights(arg: str | None, v: ast.expr | None) -> str | None:
    """What the value ``v`` of keyword (or parameter default) ``arg`` becomes when it asks
    for downloaded weights, else None."""
    if not arg or v is None:
        return None
    if _PRETRAINED_FLAGS.fullmatch(arg) and isinstance(v, ast.Constant) and v.value is True:
        return "False"
    # an enum member of a ``*_Weights`` class, whatever the parameter's name (``vgg_weights=``)
    if isinstance(v, ast.Attribute) and _WEIGHTS_NAME.fullmatch(v.attr) and \
            ast.unparse(v.value).endswith("Weights"):
        return "None"
    if _WEIGHTS_KEYWORDS.fullmatch(arg) and isinstance(v, ast.Constant) and isinstance(v.value, str) \
            and _WEIGHTS_NAME.fullmatch(v.value):
        return "None"
    return None


def _without_pretrained_weights(source: str) -> str:
    """``source`` with calls and parameter defaults asking for downloaded weights
    (``pretrained=True``, ``weights=ResNet18_Weights.DEFAULT``, ``weights="IMAGENET1K_V1"``,
    ``def f(weights_backbone=ResNet50_Weights.IMAGENET1K_V1)``) asking for none: the
    model is built with its own random initialization, as every problem's is (a problem holds
    no data files, and its sandbox reaches no network). The layers, shapes and computation
    are those of the pretrained model."""
    if "pretrained" not in source and "weights" not in source:
        return source
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    pairs: list[tuple[str | None, ast.expr | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            pairs += [(kw.arg, kw.value) for kw in node.keywords]
        elif isinstance(node, ast.arguments):  # defaults: torchvision's ``weights_backbone=ResNet50_Weights...``
            positional = node.posonlyargs + node.args
            pairs += [(a.arg, d) for a, d in zip(positional[len(positional) - len(node.defaults):], node.defaults)]
            pairs += [(a.arg, d) for a, d in zip(node.kwonlyargs, node.kw_defaults)]
    edits = [(v, new) for arg, v in pairs if (new := _asks_for_weights(arg, v)) is not None]
    if not edits:
        return source
    lines = source.splitlines(keepends=True)
    # from the end, so earlier positions stay valid; a value spanning lines is replaced whole
    for v, new in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
        first, last = lines[v.lineno - 1], lines[v.end_lineno - 1]
        head = first.encode()[:v.col_offset].decode()
        tail = last.encode()[v.end_col_offset:].decode()
        lines[v.lineno - 1:v.end_lineno] = [head + new + tail]
    return "".join(lines)


def exec_safe(closure_source: str) -> str:
    """``closure_source`` runnable after a plain ``exec()`` into an empty dict: without
    TorchScript decorators (:func:`_without_script_decorators`) and downloaded weights
    (:func:`_without_pretrained_weights`), and with
    :data:`EXEC_SAFE_LINE` after its docstring and ``__future__`` imports when it reads
    ``__module__``."""
    closure_source = _without_pretrained_weights(_without_script_decorators(closure_source))
    if "__module__" not in closure_source:
        return closure_source
    try:
        body = ast.parse(closure_source).body
    except SyntaxError:
        return closure_source
    end = 0
    for k, node in enumerate(body):
        doc = k == 0 and isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant)
        if doc or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            end = node.end_lineno
        else:
            break
    lines = closure_source.splitlines(keepends=True)
    return "".join(lines[:end]) + EXEC_SAFE_LINE + "\n" + "".join(lines[end:])
