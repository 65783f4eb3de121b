"""The op sequence of a problem's ``Model.forward``: a structural fingerprint.

Two programs that compute the same chain of torch operations (``conv2d, relu, add``)
have the same op sequence whatever their text looks like. Decontamination uses it to
catch a KernelBench problem rewritten beyond what MinHash on tokens sees.

What counts as an op, read statically from the parsed tree (no code runs):

- calls of ``torch.*``, ``torch.nn.functional.*`` and ``torch.nn.*`` (import aliases
  resolved: ``F.relu`` is ``torch.nn.functional.relu``), except a few that compute nothing on tensors
  (``torch.no_grad``, ``torch.is_tensor``, ...);
- calls of a layer built in ``__init__`` (``self.conv = nn.Conv2d(...)`` then
  ``self.conv(x)``): the layer's op (``conv2d``); an ``nn.Sequential`` of layer calls
  gives their ops in order; a layer whose class is defined in the file gives that
  class's forward ops;
- calls of the class's own methods, ``super().forward``, and module-level functions
  of the file: their ops, inlined (up to :data:`MAX_DEPTH` levels);
- tensor methods that are ops (``x.relu()``, ``x.matmul(y)``, ``x.sum()``), not the
  bookkeeping ones (``view``, ``size``, ``contiguous``);
- arithmetic on tensors (``+ - * / @ **`` and their augmented forms), which KernelBench
  level-2 problems use for bias adds and scalings; arithmetic inside shape expressions
  (subscripts, arguments of ``view``/``reshape``/``range``..., or touching ``.shape``,
  ``.size()``, ``len()``) is not an op.

Names are canonical: lower case, no underscores, in-place ``_`` dropped, ``Nd`` suffix of
norm layers dropped and a few aliases merged (``mm``/``bmm``/``@`` -> ``matmul``), so
``nn.ReLU()``, ``F.relu``, ``torch.relu`` and ``x.relu_()`` are all ``relu``.
"""

from __future__ import annotations

import ast
import re

import builtins

from curate.problem import INPUTS_MARKER

MAX_DEPTH = 4
UNRESOLVED = "?"
"""Marks a call that may run ops this static reading cannot see (``layer(x)`` over a
``ModuleList``, a layer built by a helper, ``nn.Sequential(*layers)``). A sequence holding
it is incomplete: see :func:`is_complete`."""

_NON_OPS = frozenset({
    "nograd", "enablegrad", "isgradenabled", "istensor", "isfloatingpoint", "device", "size",
    "dtype", "finfo", "iinfo", "jit", "assert", "manualseed", "numel", "getdefaultdtype",
    "setgradenabled", "inferencemode", "autocast", "compile", "script", "tensor", "astensor",
    "parameter", "moduledict", "modulelist", "parameterlist", "parameterdict", "identity",
})
_CONTAINERS = frozenset({"sequential"})
_TENSOR_METHOD_OPS = frozenset({
    "relu", "sigmoid", "tanh", "softmax", "logsoftmax", "gelu", "silu", "exp", "log", "log1p",
    "sqrt", "rsqrt", "abs", "neg", "pow", "sum", "mean", "max", "min", "amax", "amin", "argmax",
    "argmin", "prod", "cumsum", "cumprod", "std", "var", "norm", "clamp", "clip", "matmul", "mm",
    "bmm", "add", "sub", "mul", "div", "floor", "ceil", "round", "sin", "cos", "erf", "reciprocal",
    "square", "logsumexp", "masked_fill", "where", "softplus", "hardtanh", "leakyrelu",
    "sign", "tril", "triu", "einsum", "topk", "sort", "flip", "cat", "stack", "gather",
    "scatter", "scatteradd", "indexselect", "baddbmm", "addmm", "lerp", "maximum", "minimum",
})
_SHAPE_CALLS = frozenset({
    "view", "reshape", "expand", "repeat", "permute", "transpose", "size", "range", "len", "int",
    "float", "tuple", "list", "zeros", "ones", "empty", "full", "randn", "rand", "arange",
    "newzeros", "newones", "newempty", "newfull", "unflatten", "narrow", "split", "chunk",
    "unsqueeze", "squeeze", "flatten", "pad", "interpolate", "viewas", "expandas", "reshapeas",
})
_SHAPE_ATTRS = frozenset({"shape", "ndim"})
_SHAPE_FUNCS = frozenset({"size", "dim", "numel", "len"})
_ALIASES = {
    "mm": "matmul", "bmm": "matmul", "multiply": "mul", "divide": "div", "truedivide": "div",
    "subtract": "sub", "clip": "clamp", "swish": "silu", "absolute": "abs", "negative": "neg",
}
_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div",
           ast.MatMult: "matmul", ast.Pow: "pow", ast.FloorDiv: "floordiv", ast.Mod: "mod"}
_NORM_SUFFIX = re.compile(r"([123]d)$")
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_BUILTINS = frozenset(dir(builtins))
_NESTED_IMPORT = re.compile(r"\n[ \t]+(?:from|import)[ \t]")


def canonical_path(path: str) -> str:
    """Public spelling of a torch path: ``torch.nn.modules.conv.Conv2d`` -> ``torch.nn.Conv2d``."""
    for private, public in (("torch.nn.modules.", "torch.nn."), ("torch.nn.parameter.", "torch.nn.")):
        if path.startswith(private):
            return public + path.rsplit(".", 1)[-1]
    return path


def canonical_op(name: str) -> str:
    """``"BatchNorm2d"`` -> ``"batchnorm"``, ``"relu_"`` -> ``"relu"``, ``"bmm"`` -> ``"matmul"``."""
    n = name.lower().rstrip("_").replace("_", "")
    if "norm" in n:
        n = _NORM_SUFFIX.sub("", n)
    return _ALIASES.get(n, n)


def dotted(node: ast.AST) -> str | None:
    """``torch.nn.functional.relu`` for the call target ``Attribute(...)``, or ``None``."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _torch_op(path: str | None) -> str | None:
    if not path or not (path.startswith("torch.") or path == "torch"):
        return None
    op = canonical_op(path.rsplit(".", 1)[-1])
    return None if op in _NON_OPS else op


class _Program:
    """Classes and functions of one file, and the ops their code calls.

    Args:
        tree: the module as parsed.
        aliases: import aliases to resolve in dotted names (``F`` -> ``torch.nn.functional``).
        is_local: whether a bare called name is a local variable (a call that may run
            anything).
    """

    def __init__(self, tree: ast.Module, aliases: dict[str, str], is_local):
        self.classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        self.functions = {n.name: n for n in tree.body if isinstance(n, _FUNCS)}
        self._layers: dict[str, dict[str, list[str]]] = {}
        self.aliases = aliases
        self.is_local = is_local

    def dotted(self, node: ast.AST) -> str | None:
        """:func:`dotted`, with the root name's import alias resolved."""
        path = dotted(node)
        if path is None or not self.aliases:
            return path
        root, _, rest = path.partition(".")
        if root in self.aliases:
            path = self.aliases[root] + ("." + rest if rest else "")
            return canonical_path(path)
        return path

    # -- classes ------------------------------------------------------------------------
    def bases(self, cls: str) -> list[str]:
        node = self.classes.get(cls)
        if node is None:
            return []
        return [b.id for b in node.bases if isinstance(b, ast.Name) and b.id in self.classes]

    def method(self, cls: str, name: str, _seen: frozenset = frozenset()) -> tuple[str, ast.AST] | None:
        """``(defining class, FunctionDef)`` of ``cls.name``, searching in-file bases."""
        if cls in _seen or cls not in self.classes:
            return None
        for stmt in self.classes[cls].body:
            if isinstance(stmt, _FUNCS) and stmt.name == name:
                return cls, stmt
        for base in self.bases(cls):
            found = self.method(base, name, _seen | {cls})
            if found:
                return found
        return None

    def layers(self, cls: str, depth: int = 0) -> dict[str, list[str]]:
        """Attribute -> ops for layers built in ``__init__`` of ``cls`` and its in-file bases."""
        if cls in self._layers:
            return self._layers[cls]
        self._layers[cls] = {}  # guards against a class that builds itself
        out: dict[str, list[str]] = {}
        for base in reversed(self.bases(cls)):
            out.update(self.layers(base, depth))
        found = self.method(cls, "__init__")
        if found and found[0] == cls:
            fn = found[1]
            me = fn.args.args[0].arg if fn.args.args else None
            for node in ast.walk(fn):
                if not isinstance(node, ast.Assign):
                    continue
                if isinstance(node.value, ast.Call):
                    ops = self.constructed(node.value, depth)
                else:  # self.act = F.relu, or a module passed in: unknown
                    op = _torch_op(self.dotted(node.value))
                    ops = [op] if op else [UNRESOLVED]
                if ops is None:
                    continue
                for t in node.targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me:
                        out[t.attr] = ops
        self._layers[cls] = out
        return out

    def constructed(self, call: ast.Call, depth: int) -> list[str] | None:
        """Ops of the layer that ``call`` builds (``nn.Conv2d(...)`` -> ``["conv2d"]``)."""
        path = self.dotted(call.func)
        if path is None:
            return [UNRESOLVED]
        if path in self.classes:
            return self.forward_ops(path, depth + 1) if depth < MAX_DEPTH else [UNRESOLVED]
        if not path.startswith("torch."):
            return [UNRESOLVED]  # a helper or another library builds it
        op = _torch_op(path)
        if op is None or not path.startswith("torch.nn.") or path.startswith("torch.nn.functional."):
            return None  # a tensor or parameter, not a layer
        if op in _CONTAINERS:
            ops: list[str] = []
            for arg in call.args:
                if isinstance(arg, ast.Call):
                    ops += self.constructed(arg, depth) or []
                else:
                    ops.append(UNRESOLVED)
            return ops
        return [op]

    # -- forward ------------------------------------------------------------------------
    def forward_ops(self, cls: str, depth: int = 0) -> list[str]:
        found = self.method(cls, "forward")
        if not found:
            return []
        return self.function_ops(found[1], found[0], depth)

    def function_ops(self, fn: ast.AST, cls: str | None, depth: int) -> list[str]:
        me = fn.args.args[0].arg if cls is not None and fn.args.args else None
        ops: list[str] = []
        for stmt in fn.body:
            self._visit(stmt, cls, me, depth, ops, shape=False)
        return ops

    def _call_ops(self, call: ast.Call, cls: str | None, me: str | None, depth: int) -> list[str] | None:
        func = call.func
        if isinstance(func, ast.Subscript):
            return [UNRESOLVED]  # self.blocks[i](x)
        path = self.dotted(func)
        if path is not None:
            op = _torch_op(path)
            if op is not None:
                return [] if op in _CONTAINERS else [op]
            if path in self.functions:
                return self.function_ops(self.functions[path], None, depth + 1) \
                    if depth < MAX_DEPTH else [UNRESOLVED]
            if self.is_local(path) and path != me:
                return [UNRESOLVED]  # for layer in self.layers: x = layer(x)
        if isinstance(func, ast.Attribute):
            target = func.value
            if me is not None and isinstance(target, ast.Name) and target.id == me and cls is not None:
                layer = self.layers(cls, depth).get(func.attr)
                if layer is not None:
                    return list(layer)
                found = self.method(cls, func.attr)
                if found and depth < MAX_DEPTH:
                    return self.function_ops(found[1], found[0], depth + 1)
                return [UNRESOLVED]
            if (isinstance(target, ast.Call) and isinstance(target.func, ast.Name)
                    and target.func.id == "super" and cls is not None and depth < MAX_DEPTH):
                for base in self.bases(cls):
                    found = self.method(base, func.attr)
                    if found:
                        return self.function_ops(found[1], found[0], depth + 1)
                return [UNRESOLVED]  # torch's own base class
            name = canonical_op(func.attr)
            if name in _TENSOR_METHOD_OPS:
                return [_ALIASES.get(name, name)]
        return None

    def _visit(self, node: ast.AST, cls: str | None, me: str | None, depth: int,
               ops: list[str], shape: bool) -> None:
        """Append the ops of ``node`` in evaluation order (arguments before the call).

        ``shape``: ``node`` sits in a shape expression, where arithmetic is not an op."""
        if isinstance(node, (*_FUNCS, ast.ClassDef, ast.Lambda)):
            return  # a nested definition computes nothing until called
        if isinstance(node, ast.Call):
            callee = self.dotted(node.func) or ""
            last = canonical_op(node.func.attr if isinstance(node.func, ast.Attribute)
                                else callee.rsplit(".", 1)[-1])
            shape_call = last in _SHAPE_CALLS
            # the object a method is called on is evaluated first, as a value
            if isinstance(node.func, ast.Attribute):
                self._visit(node.func.value, cls, me, depth, ops, shape)
            for i, arg in enumerate([*node.args, *(k.value for k in node.keywords)]):
                # torch.reshape(x, dims), F.pad(x, pads): x is a value, the rest shapes
                value_arg = i == 0 and bool(node.args) and _torch_op(callee) is not None
                self._visit(arg, cls, me, depth, ops, shape or (shape_call and not value_arg))
            ops.extend(self._call_ops(node, cls, me, depth) or [])
            return
        if isinstance(node, (ast.BinOp, ast.AugAssign)):
            if isinstance(node, ast.BinOp):
                parts = [node.left, node.right]
            else:
                parts = [node.value]
            for p in parts:
                self._visit(p, cls, me, depth, ops, shape)
            if isinstance(node, ast.AugAssign):
                self._visit(node.target, cls, me, depth, ops, shape)
            op = _BINOPS.get(type(node.op))
            if op and not shape and not self._is_shape_arith(node):
                ops.append(op)
            return
        if isinstance(node, ast.Subscript):
            self._visit(node.value, cls, me, depth, ops, shape)
            self._visit(node.slice, cls, me, depth, ops, True)
            return
        for child in ast.iter_child_nodes(node):
            self._visit(child, cls, me, depth, ops, shape)

    @staticmethod
    def _is_shape_arith(node: ast.AST) -> bool:
        operands = [node.left, node.right] if isinstance(node, ast.BinOp) else [node.target, node.value]
        if all(isinstance(o, ast.Constant) for o in operands):
            return True
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and sub.attr in _SHAPE_ATTRS:
                return True
            if isinstance(sub, ast.Call):
                f = sub.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if name in _SHAPE_FUNCS:
                    return True
        return False


def is_complete(ops: tuple[str, ...]) -> bool:
    """True when no op of the sequence is :data:`UNRESOLVED`."""
    return UNRESOLVED not in ops


def forward_ops(code: str) -> tuple[str, ...]:
    """Canonical op names of ``Model.forward`` in ``code`` in evaluation order (see the
    module docstring); ``()`` when the file defines no ``Model`` or its forward calls none.
    Import aliases are resolved while reading dotted names, and a called bare name that the
    file neither defines nor imports, and that is no builtin, is a local (a call that may
    run anything).

    Raises:
        SyntaxError, ValueError: ``code`` does not parse.
    """
    body = code.split(INPUTS_MARKER, 1)[0]
    tree = ast.parse(body)
    if not any(isinstance(n, ast.ClassDef) and n.name == "Model" for n in tree.body):
        return ()
    aliases: dict[str, str] = {}
    known = set(_BUILTINS)
    # names the module binds: its definitions, imports and assignments, also inside
    # module-level if/try/with blocks (not inside functions and classes); imports
    # anywhere (normalization resolves those too)
    stack = list(tree.body)
    if _NESTED_IMPORT.search(body):
        stack += [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.name != "*" and node.module and not node.level:
                    aliases[a.asname or a.name] = canonical_path(f"{node.module}.{a.name}")
                known.add(a.asname or a.name)
        elif isinstance(node, (ast.ClassDef, *_FUNCS)):
            known.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            known.add(node.id)
        elif not isinstance(node, ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))
    known |= set(aliases)
    program = _Program(tree, aliases, lambda name: "." not in name and name not in known)
    return tuple(program.forward_ops("Model"))
