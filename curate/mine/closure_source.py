"""Source-text helpers of the closure: the globals a statement reads, attribute chains,
imports (nested ones too), edits and module-dict and message-passing patterns."""

from __future__ import annotations

import ast
import importlib
import re
import symtable
from collections import deque
from functools import lru_cache

from curate.mine.closure_rename import _RUNTIME_CHECKS


@lru_cache(maxsize=65536)
def _global_reads(code: str) -> tuple[frozenset[str], bool]:
    """Global names a top-level statement reads (annotations excluded), and whether
    ``symtable`` decided them: on a statement it refuses, every name (False)."""
    try:
        top = symtable.symtable("from __future__ import annotations\n" + code, "<stmt>", "exec")
    except (SyntaxError, ValueError):
        names = {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)} if _parses(code) else set()
        return frozenset(names), False
    reads: set[str] = set()

    def walk(t: symtable.SymbolTable) -> None:
        for s in t.get_symbols():
            if t.get_type() == "module":
                if s.is_referenced():
                    reads.add(s.get_name())
            elif s.is_global() and (s.is_referenced() or s.is_declared_global()):
                reads.add(s.get_name())
        for c in t.get_children():
            walk(c)

    walk(top)
    reads.discard("annotations")
    return frozenset(reads), True


_DATACLASS_MARKER = re.compile(r"^\s+\w+\s*:\s*[\"']?(?:(\w+)\.)?(ClassVar|InitVar)\b", re.M)


def _dataclass_markers(code: str) -> frozenset[str]:
    """The names a class statement's ``x: ClassVar[...]`` / ``y: InitVar[...]`` annotations
    start with (``ClassVar``, or ``typing`` of ``typing.ClassVar``): annotations are no reads
    (:func:`_global_reads`), but ``dataclasses`` resolves these in the module's namespace, also
    under ``from __future__ import annotations``, to tell a class attribute from a field;
    without the name a dataclass gains a field with a default (olmo-core's ``Config``:
    ``_IGNORE_FIELDS: ClassVar[...] = ()``) and a subclass's required field cannot follow it."""
    return frozenset(m.group(1) or m.group(2) for m in _DATACLASS_MARKER.finditer(code))


_MODULE_DICT = re.compile(r"\bsys\.modules\[[^\[\]]+\]\.__dict__")
_CLASS_FILE = re.compile(r"(?<![\w.])inspect\.(getfile|getsourcelines)\(")
_CLASS_FILE_SAFE = {
    "getfile": '(lambda o, _i=inspect: "<problem>" if isinstance(o, type) else _i.getfile(o))(',
    "getsourcelines": "(lambda o, _i=inspect: ([], 0) if isinstance(o, type) else _i.getsourcelines(o))(",
}
# a message-passing layer (torch_geometric and the libraries built on it): its base class
# evaluates the type hints of forward, message and the like when the layer is built
_MESSAGE_PASSING = re.compile(r"self\.propagate\(|\bdef message\(")


@lru_cache(maxsize=16384)
def _capitalized(code: str) -> frozenset[str]:
    """Capitalized identifiers of a statement: among them the names its annotations use,
    which :func:`_global_reads` leaves out (a regex: cheaper than a syntax tree, and a name
    that is not an annotation is dropped by :meth:`Resolver._typing_name`)."""
    return frozenset(re.findall(r"\b([A-Z]\w*)\b", code))


@lru_cache(maxsize=16384)
def _attr_chains(code: str) -> frozenset[tuple[str, ...]]:
    """Attribute chains a statement reads on its global names (``("np", "random", "rand")``
    and ``("np", "random")``), for a statement :func:`_global_reads` decided with ``symtable``."""
    reads, _ = _global_reads(code)
    attrs = set()
    try:
        for n in ast.walk(ast.parse(code)):
            if isinstance(n, ast.Attribute):
                chain, node = [], n
                while isinstance(node, ast.Attribute):
                    chain.append(node.attr)
                    node = node.value
                if isinstance(node, ast.Name) and node.id in reads:
                    attrs.add((node.id, *reversed(chain)))
    except SyntaxError:
        pass
    return frozenset(attrs)


@lru_cache(maxsize=16384)
def _dynamic_getattrs(code: str) -> frozenset[tuple[str, ...]]:
    """Dotted chains a statement reads an attribute of by a computed name
    (``getattr(litgpt.model, self.mlp_class_name)``): the first argument of each ``getattr``
    whose second is not a string constant."""
    found = set()
    try:
        for n in ast.walk(ast.parse(code)):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr"
                    and len(n.args) >= 2 and not isinstance(n.args[1], ast.Constant)):
                continue
            chain, node = [], n.args[0]
            while isinstance(node, ast.Attribute):
                chain.append(node.attr)
                node = node.value
            if isinstance(node, ast.Name):
                found.add((node.id, *reversed(chain)))
    except SyntaxError:
        pass
    return frozenset(found)


#: string constants that could name a definition (``"LLaMAMLP"``)
_NAME_STRINGS = re.compile(r"""(?<![\w])['"]([A-Za-z_]\w*)['"]""")


@lru_cache(maxsize=16384)
def _name_strings(code: str) -> frozenset[str]:
    """Identifier-like string constants of a statement (a regex: a match inside a comment
    only costs a lookup)."""
    return frozenset(_NAME_STRINGS.findall(code))


@lru_cache(maxsize=16384)
def _import_nodes(code: str) -> tuple[ast.Import | ast.ImportFrom, ...]:
    """The import statements anywhere in a top-level statement (read only: the nodes are
    shared between calls). Cached: the same statements (a library's base classes, its
    configuration) are copied into closure after closure of one source."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return ()
    # imports are statements: the walk visits statement lists only, breadth-first in field
    # order, which keeps ast.walk's order (it decides the names nested imports claim)
    found, queue = [], deque([tree])
    while queue:
        node = queue.popleft()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        t = type(node)
        fields = _BLOCK_FIELDS.get(t)
        if fields is None:
            fields = _BLOCK_FIELDS[t] = tuple(f for f in t._fields if f in ("body", "handlers", "orelse",
                                                                            "finalbody", "cases"))
        for f in fields:
            queue.extend(getattr(node, f))
    return tuple(found)


_BLOCK_FIELDS: dict[type, tuple[str, ...]] = {}


def _apply_edits(code: str, edits: list) -> str:
    """Replace import statements (by ast position) with lines at the same indentation."""
    lines = code.splitlines(keepends=True)
    for lineno, col, end_lineno, end_col, new in sorted(edits, reverse=True):
        indent = " " * col
        first, last = lines[lineno - 1], lines[end_lineno - 1]
        text = first[:col] + ("\n" + indent).join(new) + last[end_col:]
        lines[lineno - 1:end_lineno] = [text]
    return "".join(lines)


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
        return True
    except SyntaxError:
        return False


def _runtime_is_module(module: str, attr: str) -> bool:
    key = (module, attr)
    if key not in _RUNTIME_CHECKS:
        ok = False
        try:
            import torch

            obj = getattr(importlib.import_module(module), attr)
            ok = isinstance(obj, type) and issubclass(obj, torch.nn.Module)
        except Exception:
            ok = False
        _RUNTIME_CHECKS[key] = ok
    return _RUNTIME_CHECKS[key]
