"""The libcst indexer: the reference for :func:`curate.mine.index.index_source_ast`.

Builds the same :class:`curate.mine.index.FileIndex` from a libcst tree. About 5x slower to
parse than ``ast`` (``docs/figures.md``), so :func:`curate.mine.index.index_source` uses it
only for files ``ast`` cannot parse; tests check both agree on real package source.
"""

from __future__ import annotations

import libcst as cst

from curate.mine.index import Binding, ClassInfo, FileIndex, Stmt

__all__ = ["index_source_cst", "dotted"]


def dotted(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for Name/Attribute chains, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr.value}" if head else None
    return None


class _Uses(cst.CSTVisitor):
    """Names read by a statement. Attribute names, keyword names and annotations are skipped
    (annotations are lazy: emitted files start with ``from __future__ import annotations``)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.attrs: set[tuple[str, str]] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if isinstance(node.value, cst.Name):  # `alias.attr`: needed when alias is a module
            self.attrs.add((node.value.value, node.attr.value))
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Annotation(self, node: cst.Annotation) -> bool:
        return False

    def visit_Param(self, node: cst.Param) -> bool:
        if node.default is not None:
            node.default.visit(self)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Import(self, node: cst.Import) -> bool:
        return False


def _uses(node: cst.CSTNode) -> tuple[list[str], list[tuple[str, str]]]:
    v = _Uses()
    node.visit(v)
    return sorted(v.names), sorted(v.attrs)


def _targets(node: cst.BaseExpression) -> list[str]:
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for e in node.elements for n in _targets(e.value)]
    return []


def _import_bindings(node: cst.Import | cst.ImportFrom) -> tuple[dict[str, Binding], list[Binding]]:
    out: dict[str, Binding] = {}
    stars: list[Binding] = []
    if isinstance(node, cst.Import):
        for alias in node.names:
            full = dotted(alias.name) or ""
            if alias.asname is not None:
                out[alias.asname.name.value] = Binding(full, None)
            else:  # `import a.b` binds `a`
                out[full.split(".")[0]] = Binding(full.split(".")[0], None)
        return out, stars
    level = len(node.relative)
    mod = dotted(node.module) if node.module is not None else ""
    if isinstance(node.names, cst.ImportStar):
        stars.append(Binding(mod or "", None, level))
        return out, stars
    for alias in node.names:
        name = alias.name.value if isinstance(alias.name, cst.Name) else dotted(alias.name)
        local = alias.asname.name.value if alias.asname is not None else name
        out[local] = Binding(mod or "", name, level)
    return out, stars


def _block_defines(node: cst.CSTNode) -> list[str]:
    """Names bound anywhere at the top of an if/try block's bodies."""
    names: list[str] = []

    class V(cst.CSTVisitor):
        def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
            names.append(n.name.value)
            return False

        def visit_ClassDef(self, n: cst.ClassDef) -> bool:
            names.append(n.name.value)
            return False

        def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
            names.extend(_targets(n.target))

        def visit_ImportAlias(self, n: cst.ImportAlias) -> None:
            if n.asname is not None and isinstance(n.asname.name, cst.Name):
                names.append(n.asname.name.value)
            else:
                d = dotted(n.name)
                if d:
                    names.append(d.split(".")[0] if "." in d else d)

    node.visit(V())
    return names


def _registers(node: cst.BaseSmallStatement) -> bool:
    """A bare ``name.method(...)`` call (see :func:`curate.mine.index._ast_registers`)."""
    return (isinstance(node, cst.Expr) and isinstance(node.value, cst.Call)
            and isinstance(node.value.func, cst.Attribute) and isinstance(node.value.func.value, cst.Name))


def _is_type_checking(node: cst.If) -> bool:
    return (dotted(node.test) or "").endswith("TYPE_CHECKING")


def index_source_cst(text: str, module: str, is_package: bool = False) -> FileIndex:
    """Index Python source ``text`` of dotted module ``module`` with libcst (the reference).

    Raises:
        libcst.ParserSyntaxError: the source does not parse.
    """
    tree = cst.parse_module(text)
    idx = FileIndex(module=module, is_package=is_package)
    next_line = 1 + len(tree.header)
    for node in tree.body:
        code = tree.code_for_node(node)
        start, next_line = next_line, next_line + code.count("\n")
        if isinstance(node, cst.SimpleStatementLine):
            small = node.body
            if all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in small):
                for s in small:
                    if isinstance(s, cst.ImportFrom) and dotted(s.module or cst.Name("x")) == "__future__":
                        idx.future.extend(a.name.value for a in s.names if isinstance(a, cst.ImportAlias))
                        continue
                    b, stars = _import_bindings(s)
                    idx.imports.update(b)
                    idx.star_imports.extend(stars)
                continue
            defines: list[str] = []
            for s in small:
                if isinstance(s, cst.Assign):
                    for t in s.targets:
                        defines.extend(_targets(t.target))
                elif isinstance(s, (cst.AnnAssign, cst.AugAssign)):
                    defines.extend(_targets(s.target))
            if not defines and all(_registers(s) for s in small):
                idx.stmts.append(Stmt(code, [], *_uses(node), "call"))
                continue
            if not defines:
                continue  # other bare expressions (docstrings, prints) are not part of any closure
            if "__all__" in defines:
                continue
            idx.stmts.append(Stmt(code, defines, *_uses(node), "assign"))
        elif isinstance(node, cst.ClassDef):
            bases = [dotted(a.value) or "" for a in node.bases if a.keyword is None]
            methods = [b.name.value for b in node.body.body if isinstance(b, cst.FunctionDef)]
            line = start + len(node.leading_lines)  # the first decorator or `class` line
            idx.classes[node.name.value] = ClassInfo(len(idx.stmts), bases, methods, line)
            idx.stmts.append(Stmt(code, [node.name.value], *_uses(node), "class"))
        elif isinstance(node, cst.FunctionDef):
            idx.stmts.append(Stmt(code, [node.name.value], *_uses(node), "def"))
        elif isinstance(node, cst.If) and _is_type_checking(node):
            if is_package and isinstance(node.body, cst.IndentedBlock):
                for line in node.body.body:
                    if isinstance(line, cst.SimpleStatementLine):
                        for s in line.body:
                            if isinstance(s, (cst.Import, cst.ImportFrom)):
                                idx.lazy_imports.update(_import_bindings(s)[0])
            continue
        elif isinstance(node, (cst.If, cst.Try)):
            defines = _block_defines(node)
            if defines:
                idx.stmts.append(Stmt(code, defines, *_uses(node), "block"))
    return idx
