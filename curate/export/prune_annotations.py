"""Remove the parameter and return annotations of a program's functions when they are never evaluated.

Under ``from __future__ import annotations`` a function's annotations are stored as strings
and evaluated only by code that asks for them (``typing.get_type_hints``, ``inspect.signature``,
``torch.jit.script``, ``functools.singledispatch``, Triton's ``tl.constexpr`` parameters). Mined closures keep them although the
names they use (``Optional``, ``Tensor``, ``Callable``) are often not even imported: they cost
prompt tokens and read as dangling names. :func:`strip_annotations` deletes them when the
program has the ``__future__`` import and names none of :data:`INTROSPECTION`; class-level
and module-level annotated assignments (dataclass and ``NamedTuple`` fields) are left alone.
Lines are edited in place (same line count, nothing re-printed); an annotation that spans
lines, or whose arrow or colon is not where expected, is kept.
"""

from __future__ import annotations

import ast
import re

_DEFAULT = re.compile(rb"\s*=\s*")

#: Names whose presence means annotations may be read at run time: nothing is removed.
INTROSPECTION = frozenset({
    "get_type_hints", "__annotations__", "signature", "getfullargspec", "get_annotations",
    "script", "singledispatch", "singledispatchmethod", "eval_type",
    # Triton and numba kernels: their compilers read parameter annotations (tl.constexpr)
    "triton", "constexpr", "numba"})


def _future_annotations(tree: ast.Module) -> bool:
    return any(isinstance(s, ast.ImportFrom) and s.module == "__future__"
               and any(a.name == "annotations" for a in s.names) for s in tree.body)


def _mentioned(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.alias):
            out.add((n.asname or n.name).rpartition(".")[2])
            out.add(n.name.rpartition(".")[2])
    return out


def strip_annotations(code: str) -> tuple[str, int]:
    """``code`` without its functions' parameter and return annotations.

    Args:
        code: Python source (a module body; the inputs block may be included).
    Returns:
        ``(code, removed)``: the edited source and how many annotations went; the input
        and 0 when it does not parse, lacks ``from __future__ import annotations``, names
        an introspection helper, or the edit would not compile.
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code, 0
    if not _future_annotations(tree) or INTROSPECTION & _mentioned(tree):
        return code, 0
    lines = code.splitlines(keepends=True)
    raw = [ln.encode() for ln in lines]
    spans: list[tuple[int, int, int, bytes]] = []  # (0-based line, start, end byte, replacement)
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = fn.args
        params = a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]
        for p in params:
            ann = p.annotation
            if ann is None or p.lineno != ann.end_lineno:
                continue
            row = p.lineno - 1
            start = p.col_offset + len(p.arg.encode())
            if not raw[row][start:ann.col_offset].strip() == b":":
                continue
            end, put = ann.end_col_offset, b""
            default = _DEFAULT.match(raw[row], end)
            if default:  # ``x: int = 3`` becomes ``x=3``
                end, put = default.end(), b"="
            spans.append((row, start, end, put))
        ret = fn.returns
        if ret is not None and ret.lineno == ret.end_lineno:
            row = ret.lineno - 1
            before = raw[row][:ret.col_offset]
            arrow = before.rfind(b"->")
            if arrow >= 0 and not before[arrow + 2:].strip():
                start = len(before[:arrow].rstrip())
                if before[:start].rstrip().endswith(b")"):
                    spans.append((row, start, ret.end_col_offset, b""))
    if not spans:
        return code, 0
    for row, start, end, put in sorted(spans, key=lambda s: (s[0], -s[1])):
        raw[row] = raw[row][:start] + put + raw[row][end:]
    new = "".join(r.decode() for r in raw)
    try:
        compile(new, "<annotations-stripped>", "exec")
    except SyntaxError:
        return code, 0
    return new, len(spans)
