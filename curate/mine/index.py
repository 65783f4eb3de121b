"""Index one Python file: its top-level statements, what each defines and uses.

The index is plain data (picklable), so files are indexed in worker processes and the
dependency closure (:mod:`curate.mine.closure`) works without syntax trees.

Two indexers build the same :class:`FileIndex`:

- :func:`index_source_ast` with the standard library's ``ast`` (about 5x faster to parse than
  libcst on torch's own sources, see ``docs/figures.md``); statement source is cut from the file by
  line numbers, with comments attached the way libcst attaches them (a comment block belongs
  to the statement below it; trailing comments indented into a block belong to that block);
- :func:`curate.mine.index_cst.index_source_cst` with libcst, the reference, used when
  ``ast`` cannot parse the file (syntax newer than the running interpreter).

:func:`index_source` tries the first, then the second. :func:`may_define_class` is the cheap
prefilter deciding which files are indexed up front: only a file with a top-level
``class Name(...)`` statement can hold an ``nn.Module`` subclass; other files are indexed
only when a closure or a base-class lookup needs them.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass, field



@dataclass
class Stmt:
    """A top-level statement: its exact source, the names it binds and the names it reads."""

    code: str
    defines: list[str]
    uses: list[str]
    attrs: list[tuple[str, str]]  # (name, attr) of each `name.attr` read
    kind: str  # class | def | assign | block | call (a bare `name.method(...)` call)


@dataclass
class Binding:
    """``local = module`` (attr None, from ``import module as local``) or ``local = module.attr``."""

    module: str
    attr: str | None
    level: int = 0  # relative import level before resolution


@dataclass
class ClassInfo:
    stmt: int  # index into FileIndex.stmts
    bases: list[str]
    methods: list[str]
    line: int  # 1-based line of the first decorator or of `class`


@dataclass
class FileIndex:
    module: str  # dotted module path, e.g. "timm.layers.activations"
    is_package: bool
    stmts: list[Stmt] = field(default_factory=list)
    imports: dict[str, Binding] = field(default_factory=dict)
    star_imports: list[Binding] = field(default_factory=list)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    future: list[str] = field(default_factory=list)
    # names a package's ``if TYPE_CHECKING:`` block imports: the only readable bindings of a
    # lazy ``__init__`` (modelscope's, diffusers': ``sys.modules[__name__] = LazyImportModule``)
    lazy_imports: dict[str, Binding] = field(default_factory=dict)

    def resolve_module(self, b: Binding) -> str:
        """Absolute module name of a (possibly relative) binding."""
        if b.level == 0:
            return b.module
        parts = self.module.split(".")
        base = parts if self.is_package else parts[:-1]
        base = base[: len(base) - (b.level - 1)] if b.level > 1 else base
        return ".".join(base + ([b.module] if b.module else []))


# A top-level class with bases (or PEP 695 type parameters) starts a line with `class Name(`.
_CLASS_WITH_BASES = re.compile(rb"^class[ \t]+\w+[ \t]*[(\[\\]", re.M)


def may_define_class(data: bytes) -> bool:
    """Whether a file's bytes hold a top-level ``class Name(...)`` line: the prefilter.

    Conservative: a match inside a string literal only costs an index. A file without a
    match cannot define a top-level class with a base, so it holds no ``nn.Module``
    subclass; it may still be needed by other files' closures, which index it on demand.
    """
    return _CLASS_WITH_BASES.search(data) is not None


def index_source(text: str, module: str, is_package: bool = False) -> FileIndex:
    """Index Python source ``text`` of dotted module ``module`` (``ast``, libcst as fallback).

    Raises:
        libcst.ParserSyntaxError: the source parses with neither ``ast`` nor libcst.
    """
    try:
        return index_source_ast(text, module, is_package)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        from curate.mine.index_cst import index_source_cst

        return index_source_cst(text, module, is_package)


# --------------------------------------------------------------------------- ast indexer
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SIMPLE = (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Import, ast.ImportFrom,
           ast.Pass, ast.Delete, ast.Return, ast.Raise, ast.Assert, ast.Global, ast.Nonlocal,
           ast.Break, ast.Continue)


def _ast_dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _ast_dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def _ast_targets(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Starred):
        return _ast_targets(node.value)
    if isinstance(node, (ast.Tuple, ast.List)):
        return [n for e in node.elts for n in _ast_targets(e)]
    return []


# Fields that never hold a child whose names matter (strings, contexts, operators).
_NOT_CHILDREN = frozenset({"ctx", "op", "ops", "type_comment", "kind", "id", "attr", "arg", "name",
                           "names", "module", "level", "conversion", "is_async"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(t: type) -> tuple[str, ...]:
    fields = _CHILD_FIELDS[t] = tuple(f for f in t._fields if f not in _NOT_CHILDREN)
    return fields


def _ast_uses(nodes: list[ast.AST]) -> tuple[list[str], list[tuple[str, str]]]:
    """Names read by statements, with the same exclusions as libcst's :class:`_Uses`:
    attribute names, keyword names, parameter names and annotations are not reads; the
    names of defined functions and classes and of ``except ... as`` targets are."""
    names: set[str] = set()
    attrs: set[tuple[str, str]] = set()
    stack = list(nodes)
    push, grow = stack.append, stack.extend
    while stack:
        n = stack.pop()
        t = type(n)
        if t is ast.Name:
            names.add(n.id)
        elif t is ast.Attribute:
            v = n.value
            if type(v) is ast.Name:
                attrs.add((v.id, n.attr))
            push(v)
        elif t is ast.Constant or t is ast.MatchSingleton:
            v = n.value
            if v is None or v is True or v is False:  # libcst: keyword constants are Names
                names.add(str(v))
        elif n is None or t is ast.Import or t is ast.ImportFrom:
            continue
        elif t is ast.FunctionDef or t is ast.AsyncFunctionDef:
            names.add(n.name)
            grow(n.decorator_list)
            grow(n.args.defaults)
            grow(n.args.kw_defaults)
            grow(n.body)
        elif t is ast.Lambda:
            grow(n.args.defaults)
            grow(n.args.kw_defaults)
            push(n.body)
        elif t is ast.ClassDef:
            names.add(n.name)
            grow(n.decorator_list)
            grow(n.bases)
            grow(k.value for k in n.keywords)
            grow(n.body)
        elif t is ast.AnnAssign:
            push(n.target)
            push(n.value)
        elif t is ast.ExceptHandler:
            if n.name:
                names.add(n.name)
            push(n.type)
            grow(n.body)
        elif t is ast.Global or t is ast.Nonlocal:
            names.update(n.names)
        elif t is ast.MatchAs or t is ast.MatchStar:
            if n.name:
                names.add(n.name)
            push(getattr(n, "pattern", None))
        elif t is ast.MatchMapping:
            if n.rest:
                names.add(n.rest)
            grow(n.keys)
            grow(n.patterns)
        elif t is ast.MatchClass:
            names.update(n.kwd_attrs)
            push(n.cls)
            grow(n.patterns)
            grow(n.kwd_patterns)
        else:
            for f in _CHILD_FIELDS.get(t) or _child_fields(t):
                v = getattr(n, f)
                if type(v) is list:
                    grow(v)
                elif v is not None:
                    push(v)
    return sorted(names), sorted(attrs)


def _ast_registers(node: ast.stmt) -> bool:
    """Whether a top-level statement is a bare call of a method of a name (``Act.add(...)``):
    kept in the index (kind ``call``) because it may register into an object a closure copies;
    other bare expressions (docstrings, prints) are not part of any closure."""
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute) and isinstance(node.value.func.value, ast.Name))


def _ast_block_defines(node: ast.AST, dotted: set[str] | None = None) -> list[str]:
    """Names bound in an if/try block, in source order (libcst's :func:`_block_defines`);
    ``dotted`` collects the names bound only by ``import a.b`` (the package ``a``)."""
    names: list[str] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (*_FUNCS, ast.ClassDef)):
            names.append(n.name)
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                names.extend(_ast_targets(t))
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                if a.name != "*":
                    names.append(a.asname or a.name.split(".")[0])
                    if dotted is not None and isinstance(n, ast.Import) and a.asname is None and "." in a.name:
                        dotted.add(names[-1])
        else:
            stack.extend(reversed(list(ast.iter_child_nodes(n))))
    return names


def _ast_bindings(node: ast.Import | ast.ImportFrom) -> tuple[dict[str, Binding], list[Binding]]:
    out: dict[str, Binding] = {}
    if isinstance(node, ast.Import):
        for a in node.names:
            if a.asname is not None:
                out[a.asname] = Binding(a.name, None)
            else:  # `import a.b` binds `a`
                top = a.name.split(".")[0]
                out[top] = Binding(top, None)
        return out, []
    mod = node.module or ""
    if node.names and node.names[0].name == "*":
        return out, [Binding(mod, None, node.level)]
    for a in node.names:
        out[a.asname or a.name] = Binding(mod, a.name, node.level)
    return out, []


def _last_block(node: ast.stmt, lines: list[str]) -> list[ast.stmt]:
    """The statements of a compound statement's last clause (an ``elif`` chain followed)."""
    while True:
        if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            blocks = [node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody]
        elif isinstance(node, ast.Match):
            blocks = [c.body for c in node.cases]
        else:
            blocks = [getattr(node, "body", []), getattr(node, "orelse", [])]
        last = next((b for b in reversed(blocks) if b), [])
        if (isinstance(node, ast.If) and last is node.orelse and len(last) == 1
                and isinstance(last[0], ast.If) and lines[last[0].lineno - 1].lstrip().startswith("elif")):
            node = last[0]
            continue
        return last


def _block_indent(node: ast.stmt, lines: list[str]) -> str | None:
    """Leading whitespace of the last clause's indented block, None for a same-line suite."""
    block = _last_block(node, lines)
    if not block:
        return None
    line = lines[block[0].lineno - 1]
    indent = line[: len(line) - len(line.lstrip())]
    return indent if indent and len(indent.encode()) == block[0].col_offset else None


def _chunks(tree: ast.Module, lines: list[str]) -> list[tuple[list[ast.stmt], int, int]]:
    """Top-level statements grouped as libcst's lines (``a = 1; b = 2`` is one), each with its
    first and last source line (1-based, inclusive) including the comments libcst gives it."""
    groups: list[list[ast.stmt]] = []
    for s in tree.body:
        if groups and isinstance(s, _SIMPLE) and isinstance(groups[-1][-1], _SIMPLE) \
                and s.lineno == groups[-1][-1].end_lineno:
            groups[-1].append(s)
        else:
            groups.append([s])
    starts = [min([g[0].lineno] + [d.lineno for d in getattr(g[0], "decorator_list", ())]) for g in groups]
    out: list[tuple[list[ast.stmt], int, int]] = []
    prev_end = 0
    for i, g in enumerate(groups):
        first = starts[i] if i == 0 else prev_end + 1
        end = g[-1].end_lineno or g[-1].lineno
        if not isinstance(g[0], _SIMPLE):
            indent = _block_indent(g[0], lines)
            limit = starts[i + 1] - 1 if i + 1 < len(groups) else len(lines)
            if indent:
                for j in range(end + 1, limit + 1):  # libcst: the block's footer ends at the
                    if lines[j - 1].startswith(indent):  # last trailing line indented into it
                        end = j
        out.append((g, first, end))
        prev_end = end
    return out


def index_source_ast(text: str, module: str, is_package: bool = False) -> FileIndex:
    """Index ``text`` with the standard library's ``ast``; the same index as libcst's.

    Raises:
        SyntaxError, ValueError (NUL bytes), RecursionError, MemoryError: ``ast`` cannot parse it.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escape sequences in mined code
        tree = ast.parse(text)
    lines = text.split("\n")
    idx = FileIndex(module=module, is_package=is_package)
    for group, first, last in _chunks(tree, lines):
        node = group[0]
        code = "\n".join(lines[first - 1: last]) + "\n"
        if isinstance(node, _SIMPLE):
            if all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in group):
                for s in group:
                    if isinstance(s, ast.ImportFrom) and s.level == 0 and s.module == "__future__":
                        idx.future.extend(a.name for a in s.names)
                        continue
                    b, stars = _ast_bindings(s)
                    idx.imports.update(b)
                    idx.star_imports.extend(stars)
                continue
            defines: list[str] = []
            for s in group:
                if isinstance(s, ast.Assign):
                    for t in s.targets:
                        defines.extend(_ast_targets(t))
                elif isinstance(s, (ast.AnnAssign, ast.AugAssign)):
                    defines.extend(_ast_targets(s.target))
            if not defines and all(_ast_registers(s) for s in group):
                idx.stmts.append(Stmt(code, [], *_ast_uses(group), "call"))
                continue
            if not defines or "__all__" in defines:
                continue
            idx.stmts.append(Stmt(code, defines, *_ast_uses(group), "assign"))
        elif isinstance(node, ast.ClassDef):
            bases = [_ast_dotted(b) or "" for b in node.bases]
            methods = [b.name for b in node.body if isinstance(b, _FUNCS)]
            line = min([node.lineno] + [d.lineno for d in node.decorator_list])
            idx.classes[node.name] = ClassInfo(len(idx.stmts), bases, methods, line)
            idx.stmts.append(Stmt(code, [node.name], *_ast_uses([node]), "class"))
        elif isinstance(node, _FUNCS):
            idx.stmts.append(Stmt(code, [node.name], *_ast_uses([node]), "def"))
        elif isinstance(node, ast.If) and (_ast_dotted(node.test) or "").endswith("TYPE_CHECKING"):
            if is_package:
                for s in node.body:
                    if isinstance(s, (ast.Import, ast.ImportFrom)):
                        idx.lazy_imports.update(_ast_bindings(s)[0])
            continue
        elif isinstance(node, (ast.If, ast.Try)):
            dotted: set[str] = set()
            defines = _ast_block_defines(node, dotted)
            # `import torch.fft` in a version check binds the `torch` the module imported at
            # the top: not a definition of its own (it was renamed `torch_2`, and
            # `import torch.fft as torch_2` then bound the submodule)
            defines = [d for d in defines if d not in dotted or idx.imports.get(d) != Binding(d, None)]
            if defines:
                idx.stmts.append(Stmt(code, defines, *_ast_uses([node]), "block"))
    return idx
