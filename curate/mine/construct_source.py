"""What a mined class's source and its error messages say about constructor arguments, for
:class:`curate.mine.construct.ConstructorSearch`: strings a parameter is compared with, keys a
dict parameter is read with, values a failed ``assert`` or an error message lists, attributes a
class defines, parameters its attributes are built from. Pure functions of source text and
classes; only torch and the standard library are imported."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from typing import Any

from curate.mine.guess import C, Expr, compared_strings, is_int


def _leaves_to_subclasses(cls: type) -> bool:
    """Whether class ``cls`` is abstract or a method of its own only raises ``NotImplementedError``."""
    return inspect.isabstract(cls) or any(
        "NotImplementedError" in f.__code__.co_names for f in vars(cls).values() if inspect.isfunction(f))


def _defines(cls: type, attr: str) -> bool:
    """Whether class ``cls`` (of the problem file) has attribute ``attr``: a method or class
    attribute, or one its ``__init__`` sets (``self.max_seq_len = max_seq_len``)."""
    if attr in dir(cls) and attr not in dir(object):
        return True
    init = cls.__dict__.get("__init__")
    try:
        return inspect.isfunction(init) and re.search(rf"self\.{re.escape(attr)}\s*[:=]", inspect.getsource(init)) is not None
    except (OSError, TypeError):
        return False


def _string_keys(text: str, name: str) -> list[str]:
    """The string keys source ``text`` indexes ``name`` with (``name['thr']``, ``name["k"]``), in order."""
    keys = re.findall(rf"\b{re.escape(name)}\s*\[\s*['\"](\w+)['\"]\s*\]", text)
    return list(dict.fromkeys(keys))[:40]


def _derived_config_value(attr: str, config: Any) -> Any:
    """The value transformers' models derive for a configuration attribute left None, from
    the others: ``head_dim`` from the width and head count, key/value heads as many as the
    query heads; None for other attributes."""
    heads = getattr(config, "num_attention_heads", None)
    width = getattr(config, "hidden_size", None)
    if not is_int(heads) or heads <= 0:
        return None
    if attr == "head_dim" and is_int(width):
        return width // heads
    if re.fullmatch(r"num_(key_value|kv)_heads", attr):
        return heads
    return None


def _compared_strings(text: str, attr: str) -> list[str]:
    """The strings source ``text`` compares attribute ``attr`` with (``cfg.norm == "rms"``)."""
    found = re.findall(rf"\.{re.escape(attr)}\s*(?:==|!=)\s*['\"]([\w-]+)['\"]", text)
    return list(dict.fromkeys(found))


def _named_options(text: str, name: str, fallback: bool = True) -> list[str]:
    """Strings a parameter ``name`` is compared with anywhere in source ``text`` (``activation
    == 'relu'``, ``norm in ('batch', 'layer')``, ``'gelu' == act``), in order; for an activation
    or normalization named nowhere, the common names (``relu``, ``batch``)."""
    out = compared_strings(text, name, literal=r"[\w\-]+")
    if out or not fallback:
        return out
    if re.search(r"act|nonlin", name):
        out = ["relu", "gelu"]
    elif re.search(r"norm", name):
        out = ["batch", "layer", "bn"]
    return out


def _assert_repairs(kwargs: dict[str, Any], line: str, params: list[str],
                    ns: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Guesses satisfying a failed ``assert`` on constructor parameters, read from its test:
    ``assert mode in ("a", "b")`` takes a listed value (also where the list names constants of
    the file, ``{BINARY_MODE, MULTICLASS_MODE}``, looked up in ``ns``), ``assert x != None`` a
    value, ``assert n_bins <= fft_size`` numbers in that order, ``assert len(dims) == 3`` a list of that
    length, ``assert isinstance(depths, (list, tuple))`` a list, ``assert x is not None`` /
    ``assert exists(x)`` a value, ``assert isinstance(norm, nn.Module)`` an instance of the layer
    class guessed, ``assert in_dim == out_dim`` equal values (``x % y == 0`` is the caller's: all
    widths alike)."""
    try:
        node = ast.parse(line.strip().rstrip(",;"), mode="exec").body[0]
    except (SyntaxError, IndexError):
        return []
    if not isinstance(node, ast.Assert):
        return []

    def param(expr: ast.AST) -> str | None:
        name = expr.attr if isinstance(expr, ast.Attribute) else expr.id if isinstance(expr, ast.Name) else None
        return name if name in params else None

    out: list[dict[str, Any]] = []
    tests = node.test.values if isinstance(node.test, ast.BoolOp) else [node.test]
    for test in tests:
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left, op, right = test.left, test.ops[0], test.comparators[0]
            n = param(left)
            if n and isinstance(op, ast.Eq) and param(right) and is_int(kwargs.get(n)):  # ``in_dim == out_dim``
                out.append({**kwargs, param(right): kwargs[n]})
            elif n and isinstance(op, ast.In) and isinstance(right, (ast.List, ast.Tuple, ast.Set)):
                out += [{**kwargs, n: v} for v in [_constant(e, ns) for e in right.elts][:3]
                        if v is not _NO_CONSTANT]
            elif n and isinstance(op, (ast.IsNot, ast.NotEq)) and isinstance(right, ast.Constant) \
                    and right.value is None:
                out.append({**kwargs, n: C})
            elif n and param(right) and isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) \
                    and is_int(kwargs.get(n)) and is_int(kwargs.get(param(right))):
                # ``n_bins <= fft_size``: the left one moved to the right one's side
                other = kwargs[param(right)]
                out.append({**kwargs, n: other if isinstance(op, (ast.LtE, ast.GtE)) else
                            max(other // 2, 1) if isinstance(op, ast.Lt) else other * 2})
            elif (isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "len"
                  and left.args and param(left.args[0]) and isinstance(op, ast.Eq)
                  and isinstance(right, ast.Constant) and is_int(right.value) and 0 < right.value <= 8):
                n, v = param(left.args[0]), kwargs.get(param(left.args[0]))
                item = v[0] if isinstance(v, (list, tuple)) and v else v if is_int(v) else C
                if re.search(r"mult|ratio|scale|factor|rate", n):  # per-stage multipliers: 1x, not 64x
                    item = 1
                out.append({**kwargs, n: [item] * right.value})
        elif isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.args and param(test.args[0]):
            n = param(test.args[0])
            v = kwargs.get(n)
            if test.func.id == "isinstance" and re.search(r"\b(list|tuple|Sequence)\b", ast.unparse(test)):
                if is_int(v):
                    out += [{**kwargs, n: [v] * 4}, {**kwargs, n: (v, v)}]
            elif test.func.id == "isinstance" and re.search(r"\bModule\b", ast.unparse(test)):
                if isinstance(v, Expr) and re.fullmatch(r"[\w.]+", v.code):  # a layer class: an instance of it
                    out += [{**kwargs, n: Expr(f"{v.code}({C})")}, {**kwargs, n: Expr(f"{v.code}()")}]
            elif test.func.id in ("exists", "callable") and v is None:
                out.append({**kwargs, n: C})
    return out


_NO_CONSTANT = object()


def _constant(node: ast.AST, ns: dict[str, Any] | None) -> Any:
    """The value of a literal, or of a name of the file bound to a string or number
    (``BINARY_MODE``), or ``_NO_CONSTANT``."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and ns and isinstance(ns.get(node.id), (str, int, float)):
        return ns[node.id]
    return _NO_CONSTANT


def _literal_keys(text: str) -> list[Any]:
    """The constant keys of a dict display written in source (``{1: nn.Conv1d, 2: nn.Conv2d}``)."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return []
    if not isinstance(node, ast.Dict):
        return []
    return [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, (str, int))
            and not isinstance(k.value, bool)]


def _mapping_keys(ns: dict[str, Any], dotted: str) -> list[Any]:
    """The literal keys of the module-level dict ``dotted`` names in ``ns`` (``NORMS``,
    ``registry.TABLE``), or none."""
    obj: Any = ns
    for i, part in enumerate(dotted.split(".")):
        obj = obj.get(part) if i == 0 else getattr(obj, part, None)
        if obj is None:
            return []
    if not isinstance(obj, dict):
        return []
    return [k for k in obj if isinstance(k, (str, int)) and not isinstance(k, bool)]


def _listed_choices(msg: str) -> list[str]:
    """The values an error message lists as allowed (``must be one of a, b``, ``among choices
    {'a', 'b'}``, ``expected one of [a, b]``), in order."""
    m = re.search(r"(?:must be (?:one of|in)|among choices|expected one of|choose from|supported (?:values )?"
                  r"(?:are|is)|valid (?:options|values|choices) are|should be one of|not in)\s*:?\s*(.+)", msg,
                  re.I | re.S)
    if not m:
        return []
    listed = re.split(r",?\s*but\b|, got\b", m.group(1).split("\n")[0])[0]
    words = re.findall(r"-?\d+(?![\w.])|[A-Za-z_][\w\-.]*", listed)
    return [int(w) if re.fullmatch(r"-?\d+", w) else w for w in words
            if w not in ("or", "and", "None", "True", "False", "dict_keys")][:8]


def _attr_params(cls: type, params: set[str]) -> dict[str, list[str]]:
    """``self.attr = <expr>`` in ``cls.__init__``: the parameters each attribute is built from."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls.__init__)))
    except (OSError, TypeError, SyntaxError):
        return {}
    out: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            used = [n.id for n in ast.walk(node.value) if isinstance(n, ast.Name) and n.id in params]
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    out.setdefault(t.attr, []).extend(u for u in used if u not in out.get(t.attr, []))
    return out


def _takes_var_kw(cls: type) -> bool:
    init = cls.__init__
    try:
        return any(p.kind == p.VAR_KEYWORD for p in inspect.signature(init).parameters.values())
    except (TypeError, ValueError):
        return False


def _passed_to_parent(init: Any) -> tuple[int, set[str]]:
    """What an ``__init__(self, *args, **kwargs)`` passes to its parent's ``__init__`` before
    forwarding its own arguments: the number of leading positional arguments and the keywords
    (torch's ``GRU`` calls ``super().__init__("GRU", *args, **kwargs)``: one positional, so
    the parent's first parameter, ``mode``, is not the subclass's to take). (0, set()) where
    the source cannot be read or no parent ``__init__`` call is found."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return 0, set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__init__"):
            continue
        args = list(node.args)
        via_super = isinstance(node.func.value, ast.Call) and isinstance(node.func.value.func, ast.Name) \
            and node.func.value.func.id == "super"
        if not via_super and args and isinstance(args[0], ast.Name) and args[0].id == "self":
            args = args[1:]  # ``Parent.__init__(self, ...)``
        if not any(isinstance(a, ast.Starred) for a in args) and not any(k.arg is None for k in node.keywords):
            continue  # not the call that forwards the arguments
        leading = next((i for i, a in enumerate(args) if isinstance(a, ast.Starred)), len(args))
        return leading, {k.arg for k in node.keywords if k.arg}
    return 0, set()
