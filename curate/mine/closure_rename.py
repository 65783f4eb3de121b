"""Scope-aware renaming of a copied statement's globals (libcst, with a plain fast path),
for two definitions of one name from different files."""

from __future__ import annotations

import ast
import re
import symtable
from functools import lru_cache

import libcst as cst
from libcst.metadata import GlobalScope, MetadataWrapper, ScopeProvider

from curate.mine.closure_types import _BUILTINS


class _Renamer(cst.CSTTransformer):
    def __init__(self, targets: set[cst.CSTNode], mapping: dict[str, str], aliases: set[cst.ImportAlias]):
        self.targets = targets
        self.mapping = mapping
        self.aliases = aliases

    def visit_ImportAlias(self, node: cst.ImportAlias) -> bool:
        return False  # imported names are module attributes, not globals

    def leave_ImportAlias(self, original: cst.ImportAlias, updated: cst.ImportAlias) -> cst.ImportAlias:
        if original not in self.aliases:
            return updated
        local = original.evaluated_alias or original.evaluated_name.split(".")[0]
        return updated.with_changes(asname=cst.AsName(name=cst.Name(self.mapping[local])))

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        if original in self.targets:
            return updated.with_changes(value=self.mapping[original.value])
        return updated


def rename_globals(code: str, mapping: dict[str, str]) -> str:
    """``code`` with the module-level names in ``mapping`` renamed where they are defined and
    wherever they are read as globals (a local or attribute of the same name is untouched)."""
    return _rename_globals(code, tuple(sorted(mapping.items())))


@lru_cache(maxsize=4096)
def _rename_globals(code: str, items: tuple[tuple[str, str], ...]) -> str:
    mapping = dict(items)
    fast = _rename_plain_globals(code, mapping)
    if fast is not None:
        return fast
    wrapper = MetadataWrapper(cst.parse_module(code), unsafe_skip_copy=True)  # a fresh tree: no copy needed
    scopes = set(wrapper.resolve(ScopeProvider).values())
    targets: set[cst.CSTNode] = set()
    aliases: set[cst.ImportAlias] = set()
    for scope in scopes:
        if scope is None:
            continue
        for access in scope.accesses:
            node = access.node
            if not isinstance(node, cst.Name) or node.value not in mapping:
                continue
            # a read of a global: unresolved in the statement (defined elsewhere) or bound at its top
            if all(isinstance(a.scope, GlobalScope) for a in access.referents):
                targets.add(node)
        if isinstance(scope, GlobalScope):
            for name in mapping:
                for assignment in scope.assignments[name]:
                    node = getattr(assignment, "node", None)
                    if isinstance(node, (cst.ClassDef, cst.FunctionDef)):
                        targets.add(node.name)
                    elif isinstance(node, (cst.Import, cst.ImportFrom)):  # bind under the new name
                        aliases.update(a for a in node.names if isinstance(a, cst.ImportAlias)
                                       and (a.evaluated_alias or a.evaluated_name.split(".")[0]) == name)
                    elif isinstance(node, cst.Name):
                        targets.add(node)
                    elif node is not None:  # an assignment target: find the Name inside it
                        targets.update(_names_within(node, name))
    return wrapper.module.visit(_Renamer(targets, mapping, aliases)).code


_DEF_NAME = re.compile(rb"(?:async\s+)?(?:def|class)\s+([A-Za-z_][A-Za-z0-9_]*)")
_NO_FAST = tuple(getattr(ast, n) for n in ("Global", "Nonlocal", "Match", "TypeAlias") if hasattr(ast, n))


def _rename_plain_globals(code: str, mapping: dict[str, str]) -> str | None:
    """:func:`rename_globals` by ``ast`` positions, for the common statement where no name of
    ``mapping`` is ever bound in a nested scope (``symtable``), so every ``Name`` of it is the
    global; None where that does not hold or the statement has an import binding such a name
    (or ``*``), ``global``, ``match``, f-strings reading such a name or ``except ... as`` one
    (libcst's scope analysis then decides). About 10x cheaper than libcst on large classes
    (x-transformers, diffusers)."""
    try:
        tree = ast.parse(code)
        table = symtable.symtable(code, "<stmt>", "exec")
    except (SyntaxError, ValueError):
        return None

    def bound_inside(t: symtable.SymbolTable) -> bool:
        for child in t.get_children():
            for name in mapping:
                try:
                    sym = child.lookup(name)
                except KeyError:
                    continue
                if sym.is_local() or sym.is_free() or sym.is_parameter() or sym.is_declared_global():
                    return True
            if bound_inside(child):
                return True
        return False

    if bound_inside(table):
        return None
    data = code.encode()
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    edits: list[tuple[int, int, bytes]] = []
    has_import, defs_renamed = False, set()
    for node in _nodes(tree):
        if isinstance(node, _NO_FAST):
            return None
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            # an import holds no Name node: it matters only where it binds a renamed name
            if any(a.name == "*" or (a.asname or a.name.split(".")[0]) in mapping for a in node.names):
                return None
            has_import = True
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in mapping:
            defs_renamed.add(node)
        if isinstance(node, ast.JoinedStr) and any(isinstance(n, ast.Name) and n.id in mapping
                                                   for n in ast.walk(node)):
            return None
        if isinstance(node, ast.ExceptHandler) and node.name in mapping:
            return None
        if isinstance(node, ast.Name) and node.id in mapping:
            if node.lineno != node.end_lineno:
                return None
            a = starts[node.lineno - 1] + node.col_offset
            edits.append((a, starts[node.lineno - 1] + node.end_col_offset, mapping[node.id].encode()))
    if has_import and (not defs_renamed.issubset(tree.body) or not _BUILTINS.isdisjoint(mapping)):
        # where libcst decided these before imports took this path, and decides otherwise:
        # a definition inside an if/try block is renamed, a builtin's name is not
        return None
    for node in tree.body:  # module-level definitions: the statement itself
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in mapping:
            a = starts[node.lineno - 1] + node.col_offset
            m = _DEF_NAME.match(data, a)
            if m is None or m.group(1).decode() != node.name:
                return None
            edits.append((m.start(1), m.end(1), mapping[node.name].encode()))
    for a, b, new in sorted(edits, reverse=True):
        data = data[:a] + new + data[b:]
    return data.decode()


# fields holding no node that matters to a rename (names as strings, contexts, operators)
_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "name", "names", "asname", "module", "level",
                          "conversion", "is_async", "type_comment", "kind"})
_NODE_FIELDS: dict[type, tuple[str, ...]] = {}


def _nodes(tree: ast.AST) -> list[ast.AST]:
    """The nodes of ``tree`` but contexts, operators and import aliases, in no set order:
    several times cheaper than ``ast.walk``, which visits every operator and context."""
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        if not isinstance(node, ast.AST):
            continue  # a list's strings (MatchClass.kwd_attrs) or None (a dict's ** key)
        out.append(node)
        t = type(node)
        fields = _NODE_FIELDS.get(t)
        if fields is None:
            fields = _NODE_FIELDS[t] = tuple(f for f in t._fields if f not in _LEAF_FIELDS)
        for f in fields:
            v = getattr(node, f, None)
            if type(v) is list:
                stack.extend(v)
            elif v is not None:
                stack.append(v)
    return out


def _names_within(node: cst.CSTNode, name: str) -> list[cst.Name]:
    found: list[cst.Name] = []

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            if n.value == name:
                found.append(n)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

    node.visit(V())
    return found


_RUNTIME_CHECKS: dict[tuple[str, str], bool] = {}
