"""Prune a problem's reference code to what ``Model``, ``get_inputs`` and ``get_init_inputs`` reach.

Mined closures copy whole modules' worth of context: configuration classes, helpers the
forward never calls, licence headers, comments and long docstrings. They cost prompt
tokens (the policy reads the reference) and teach nothing. :func:`prune_source` removes:

- top-level definitions (``def``, ``class``, simple ``NAME = ...`` assignments, imports)
  whose names are not reachable from ``Model`` and the two input functions, following
  names through function and class bodies, bases, decorators, default arguments,
  annotations and identifier-like string constants (``getattr(mod, "Name")``, forward
  references);
- docstrings, other bare string statements and ``__doc__ = ...`` assignments (with the
  note tables only they read), except ``Model``'s own docstring (the provenance and
  licence line written by mining) when it is short;
- with ``drop_entries``, entries of lookup tables that a run never used (see
  :func:`table_entries` and :mod:`curate.export.prune_usage`), then what only they reached;
- comments, except the inputs marker line (:data:`curate.problem.INPUTS_MARKER`);
- functions' parameter and return annotations where they are never evaluated
  (:mod:`curate.export.prune_annotations`), then what only they named (``Optional``, ``Tensor``).

It is conservative where names cannot be followed: code that calls ``globals()``,
``vars()``, ``locals()``, ``eval``, ``exec`` or ``__import__``, or reads ``sys.modules``,
keeps every definition (docstrings and comments are still removed unless the code reads
``__doc__``); a statement that runs code at import time which may change a kept object
(a call of a module-level function, an assignment to an attribute or item, a decorator
defined in the module, ``if``/``try``/``for``/``with`` blocks, bare expressions) is always
kept. Formatting is preserved: whole lines are deleted, nothing is re-printed.

The pass is static; :func:`check_task` is the runtime proof (original and pruned
programs, same seed, outputs and parameters compared exactly) that
:mod:`curate.export.prune_table` runs in a sandbox before a pruned program replaces its
original. Standard library only (the check imports torch inside the task).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Any, Iterable

from curate.export.prune_annotations import strip_annotations
from curate.problem import INPUTS_MARKER

#: Roots of reachability besides the names the inputs block uses.
ROOTS = ("Model", "get_inputs", "get_init_inputs")
#: Longest ``Model`` docstring (characters) kept as the problem's provenance header.
MAX_HEADER_DOC = 500
#: Names whose use makes module-level name lookups dynamic: every definition is kept.
DYNAMIC_NAMES = frozenset({"globals", "vars", "locals", "eval", "exec", "__import__", "importlib"})
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Bump when the pass changes: cached checks of an older pass are redone.
PRUNE_VERSION = 7


@dataclass
class Pruned:
    """What :func:`prune_source` did.

    Attributes:
        code: the pruned program (the input unchanged when nothing could be removed).
        removed: names of the top-level statements removed (``def``/``class`` names,
            assignment targets, import aliases), in source order.
        dynamic: the code looks names up dynamically, so no definition was removed.
        docstrings: docstrings and bare strings removed.
        comments: comments removed.
        annotations: function parameter and return annotations removed
            (:func:`curate.export.prune_annotations.strip_annotations`).
    """

    code: str
    removed: list[str] = field(default_factory=list)
    dynamic: bool = False
    docstrings: int = 0
    comments: int = 0
    annotations: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.removed or self.docstrings or self.comments or self.annotations)


# ---------------------------------------------------------------- name analysis

def _string_idents(node: ast.AST) -> set[str]:
    """Identifier-like words in the string constants under ``node`` (docstrings excluded by
    the caller), so ``getattr(module, "Helper")`` or a ``"Helper"`` forward reference keeps
    ``Helper``."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and len(n.value) < 200:
            out.update(_IDENT.findall(n.value))
    return out


def _docstring_nodes(tree: ast.AST, doc_assignments: bool = False) -> set[int]:
    """ids of the Expr nodes that are bare string statements (docstrings and the like) and,
    with ``doc_assignments``, of ``__doc__ = ...`` statements (removed with them, so what
    only they read is not reached)."""
    found = set()
    for n in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(n, name, None)
            for stmt in block if isinstance(block, list) else []:
                if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                        and isinstance(stmt.value.value, str):
                    found.add(id(stmt))
                elif doc_assignments and _sets_doc(stmt):
                    found.add(id(stmt))
    return found


def _refs(stmt: ast.AST, bare: set[int]) -> set[str]:
    """Every name ``stmt`` may read: Name loads anywhere inside it (function bodies,
    decorators, defaults, annotations, class bodies), ``global`` declarations, attribute
    roots, and identifier-like words of its string constants other than bare strings."""
    names: set[str] = set()
    skip: set[int] = set()
    for n in ast.walk(stmt):
        if id(n) in bare:
            skip.update(id(c) for c in ast.walk(n))
    for n in ast.walk(stmt):
        if id(n) in skip:
            continue
        if isinstance(n, ast.Name):
            names.add(n.id)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            names.update(n.names)
        elif isinstance(n, ast.Attribute):
            names.add(n.attr)  # obj.__dict__ / sys.modules show up for the dynamic check
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and len(n.value) < 200:
            names.update(_IDENT.findall(n.value))
    return names


def _bound(stmt: ast.stmt) -> list[str] | None:
    """Names a removable statement binds, or None when the statement must be kept."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, ast.Import):
        return [(a.asname or a.name).partition(".")[0] for a in stmt.names]
    if isinstance(stmt, ast.ImportFrom):
        if stmt.module == "__future__" or any(a.name == "*" for a in stmt.names):
            return None
        return [a.asname or a.name for a in stmt.names]
    if isinstance(stmt, ast.Assign):
        if all(isinstance(t, ast.Name) for t in stmt.targets):
            return [t.id for t in stmt.targets]
        return None
    if isinstance(stmt, ast.AnnAssign):
        return [stmt.target.id] if isinstance(stmt.target, ast.Name) else None
    return None


def _import_time(stmt: ast.stmt) -> list[ast.AST]:
    """The parts of a definition or assignment that run when the module is executed."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        a = stmt.args
        return [*stmt.decorator_list, *a.defaults, *[d for d in a.kw_defaults if d is not None]]
    if isinstance(stmt, ast.ClassDef):
        parts: list[ast.AST] = [*stmt.decorator_list, *stmt.bases, *stmt.keywords]
        for s in stmt.body:
            parts += _import_time(s) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                       ast.ClassDef)) else [s]
        return parts
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        return [stmt.value] if stmt.value is not None else []
    return []


def _calls_local(parts: list[ast.AST], local: set[str]) -> bool:
    """Whether import-time code calls (or decorates with) something defined in the module:
    that may register into or mutate a kept object, so the statement is kept."""
    for part in parts:
        for n in ast.walk(part):
            target = n.func if isinstance(n, ast.Call) else None
            while isinstance(target, (ast.Attribute, ast.Call, ast.Subscript)):
                target = target.value if not isinstance(target, ast.Call) else target.func
            if isinstance(target, ast.Name) and target.id in local:
                return True
    return False


def _decorated_by_local(stmt: ast.stmt, local: set[str]) -> bool:
    decorators = getattr(stmt, "decorator_list", [])
    return any(isinstance(n, ast.Name) and n.id in local for d in decorators for n in ast.walk(d))


def reachable_statements(tree: ast.Module, extra_roots: set[str], doc_assignments: bool = False
                         ) -> tuple[list[bool], bool]:
    """Which top-level statements of ``tree`` to keep (``doc_assignments``: ``__doc__ = ...``
    statements are removed, so what only they read is not reached).

    Returns:
        ``(keep, dynamic)``: one bool per statement of ``tree.body``, and whether dynamic
        name lookups forced every statement to be kept.
    """
    bare = _docstring_nodes(tree, doc_assignments)
    body = tree.body
    bound = [_bound(s) for s in body]
    local = {n for b in bound if b for n in b}
    refs = [_refs(s, bare) for s in body]
    keep = [False] * len(body)
    for i, s in enumerate(body):
        if isinstance(s, ast.Expr) and id(s) in bare:
            continue  # a bare string: removed as a docstring, never needed
        if bound[i] is None or _calls_local(_import_time(s), local) or _decorated_by_local(s, local):
            keep[i] = True
    wanted = set(ROOTS) | extra_roots
    for i in range(len(body)):
        if keep[i]:
            wanted |= refs[i]
    binders: dict[str, list[int]] = {}
    for i, b in enumerate(bound):
        for n in b or []:
            binders.setdefault(n, []).append(i)
    todo = list(wanted)
    seen = set(todo)
    while todo:
        name = todo.pop()
        for i in binders.get(name, []):
            if not keep[i]:
                keep[i] = True
                for r in refs[i] - seen:
                    seen.add(r)
                    todo.append(r)
    wanted |= seen
    dynamic = bool(DYNAMIC_NAMES & set().union(*(refs[i] for i in range(len(body)) if keep[i]))) \
        or ("sys" in wanted and "modules" in wanted)
    if dynamic:
        keep = [not (isinstance(s, ast.Expr) and id(s) in bare) for s in body]
    return keep, dynamic


# ---------------------------------------------------------------- text surgery

_STRING_TOKENS = {tokenize.STRING} | {getattr(tokenize, t) for t in ("FSTRING_MIDDLE", "FSTRING_END")
                                      if hasattr(tokenize, t)}


def _string_lines(code: str) -> set[int]:
    """1-based numbers of the lines a multi-line string token spans (their text, trailing
    spaces and blank lines are part of a value and must not be touched)."""
    inside: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.end[0] > tok.start[0] and tok.type in _STRING_TOKENS:
            inside.update(range(tok.start[0], tok.end[0] + 1))
    return inside


def _strip_comments(lines: list[str], keep_lines: set[int]) -> int:
    """Remove comments in place (a comment-only line becomes empty; None marks deletion)."""
    code = "".join(lines)
    n = 0
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type != tokenize.COMMENT:
            continue
        row, col = tok.start
        if row in keep_lines:
            continue
        line = lines[row - 1]
        before = line[:col].rstrip()
        lines[row - 1] = (before + "\n") if before else None
        n += 1
    return n


def _stmt_lines(stmt: ast.stmt) -> tuple[int, int]:
    start = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
    return start, stmt.end_lineno or stmt.lineno


def _shares_line(stmt: ast.AST, line_text: list[str]) -> bool:
    """Whether ``stmt`` does not own its lines (another statement on the first or last line)."""
    # ast's column offsets count UTF-8 bytes
    first = line_text[stmt.lineno - 1].encode()
    last = line_text[(stmt.end_lineno or stmt.lineno) - 1].encode()
    return bool(first[:stmt.col_offset].strip()) or bool(
        last[stmt.end_col_offset:].split(b"#", 1)[0].strip())


def _sets_doc(stmt: ast.stmt) -> bool:
    """``__doc__ = ...``: torch's conv and pooling classes build their docstrings so, from
    long tables of shared notes."""
    return isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
        and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == "__doc__"


def _docstring_edits(tree: ast.Module, line_text: list[str], keep_doc: set[int]
                     ) -> tuple[set[int], dict[int, str], int]:
    """Lines to delete and lines to replace (with ``pass``) to drop bare strings."""
    delete: set[int] = set()
    replace: dict[int, str] = {}
    count = 0
    for n in ast.walk(tree):
        for attr in ("body", "orelse", "finalbody"):
            block = getattr(n, attr, None) or []
            if not isinstance(block, list):
                continue
            strings = [s for s in block if (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                       and isinstance(s.value.value, str) and id(s) not in keep_doc) or _sets_doc(s)]
            strings = [s for s in strings if not _shares_line(s, line_text)]
            if not strings:
                continue
            count += len(strings)
            for s in strings:
                delete.update(range(s.lineno, s.end_lineno + 1))
            if len(strings) == len(block) and not isinstance(n, ast.Module):
                first = strings[0]
                delete.discard(first.lineno)
                indent = line_text[first.lineno - 1].encode()[:first.col_offset].decode()
                replace[first.lineno] = indent + "pass\n"
    return delete, replace, count


def _tidy(lines: list[str], protected: set[int]) -> str:
    """Drop trailing spaces, blank lines right after a block opener and runs of blank lines
    (at most two before top-level code, one inside a block); string lines untouched."""
    out: list[str] = []
    blank_run = 0
    for i, line in enumerate(lines, 1):
        if i in protected:
            out.append(line)
            blank_run = 0
            continue
        text = line.rstrip() + "\n"
        if not text.strip():
            blank_run += 1
            out.append("\n")
            continue
        if blank_run:
            indent = len(text) - len(text.lstrip())
            limit = 2 if indent == 0 else 1
            prev = next((x for x in reversed(out) if x.strip()), "")
            if prev.rstrip().endswith(":") and indent > 0:
                limit = 0
            del out[len(out) - blank_run + limit:]
            blank_run = 0
        out.append(text)
    while out and not out[-1].strip():
        out.pop()
    while out and not out[0].strip():
        out.pop(0)
    return "".join(out)


def _model_doc(tree: ast.Module) -> set[int]:
    """id of ``Model``'s docstring statement when it is short enough to keep."""
    for s in tree.body:
        if isinstance(s, ast.ClassDef) and s.name == "Model" and s.body:
            d = s.body[0]
            if isinstance(d, ast.Expr) and isinstance(d.value, ast.Constant) \
                    and isinstance(d.value.value, str) and len(d.value.value) <= MAX_HEADER_DOC:
                return {id(d)}
    return set()


# ---------------------------------------------------------------- lookup tables

@dataclass(frozen=True)
class Entry:
    """One entry of a module-level lookup table that refers to module definitions.

    Attributes:
        table: the table's name (``NAME = dict(...)`` or ``NAME = {...}``).
        key: the entry's key (a keyword name or a literal constant).
        first, last: 1-based lines the entry spans (it owns them: nothing else on them but
            its trailing comma and a comment).
        refs: names of module definitions its value refers to.
        member: the table is a set display (``NAME = {A, B}``, membership tests) and ``key``
            is the name of the definition the element is.
    """

    table: str
    key: Any
    first: int
    last: int
    refs: frozenset[str]
    member: bool = False


def _table_items(value: ast.AST) -> list[tuple[Any, ast.AST, ast.AST]] | None:
    """``(key, start node, value node)`` of a ``dict(k=v, ...)`` call or a ``{k: v}``
    display with literal keys; None for anything else (or keys that repeat)."""
    items: list[tuple[Any, ast.AST, ast.AST]] = []
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict" \
            and not value.args:
        items = [(k.arg, k, k.value) for k in value.keywords if k.arg is not None]
    elif isinstance(value, ast.Set):
        if not all(isinstance(e, ast.Name) for e in value.elts):
            return None
        items = [(e.id, e, e) for e in value.elts]
    elif isinstance(value, ast.Dict):
        for k, v in zip(value.keys, value.values):
            if k is None:
                continue  # a ** unpacking: kept as it is
            try:
                items.append((ast.literal_eval(k), k, v))
            except ValueError:
                return None
    else:
        return None
    keys = [k for k, _, _ in items]
    try:
        if len(set(keys)) != len(keys):
            return None
    except TypeError:
        return None
    return items


def table_entries(code: str) -> list[Entry]:
    """Entries of module-level lookup tables whose values refer to classes or functions
    defined in the module: timm's ``_ACT_LAYER_DEFAULT = dict(relu=..., gelu=GELU, ...)``
    and the like (dict calls, dict displays with literal keys, set displays of names),
    which keep every layer a factory could build reachable although a problem builds one
    or two.

    Args:
        code: a program (the part before the inputs marker is read).
    Returns:
        Entries in source order; only those that own their lines (one entry per line run)
        are listed, since only those can be deleted by whole lines.
    Raises:
        SyntaxError: the code does not parse.
    """
    head = code.partition(INPUTS_MARKER)[0]
    tree = ast.parse(head)
    lines = head.splitlines()
    local = {n for s in tree.body for n in (_bound(s) or [])
             if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    out: list[Entry] = []
    for s in tree.body:
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)):
            continue
        items = _table_items(s.value)
        if not items:
            continue
        for key, start, val in items:
            refs = frozenset(n.id for n in ast.walk(val) if isinstance(n, ast.Name)) & local
            if not refs:
                continue
            a, b = start.lineno, val.end_lineno or val.lineno
            before = lines[a - 1].encode()[:start.col_offset]
            after = lines[b - 1].encode()[val.end_col_offset:].split(b"#", 1)[0].strip()
            if before.strip() or after not in (b"", b","):
                continue
            out.append(Entry(s.targets[0].id, key, a, b, refs, isinstance(s.value, ast.Set)))
    return out


def _drop_entries(head: str, drop: set[tuple[str, Any]]) -> tuple[str, list[str]]:
    """``head`` without the lines of the listed table entries; the names of what went."""
    entries = [e for e in table_entries(head) if (e.table, e.key) in drop]
    if not entries:
        return head, []
    gone = {ln for e in entries for ln in range(e.first, e.last + 1)}
    lines = head.splitlines(keepends=True)
    text = "".join(x for i, x in enumerate(lines, 1) if i not in gone)
    ast.parse(text)
    return text, [f"{e.table}[{e.key!r}]" for e in entries]


def prune_source(code: str, drop_entries: Iterable[tuple[str, Any]] = ()) -> Pruned:
    """Prune one KernelBench-format program (see the module docstring).

    Args:
        code: the program, normally ``module body + INPUTS_MARKER + inputs block``; without
            the marker the whole text is one module (``get_inputs`` then being one of its
            definitions).
        drop_entries: ``(table, key)`` pairs of :func:`table_entries` to delete first (the
            entries a run never used, :mod:`curate.export.prune_usage`); definitions only
            they referred to then become unreachable. Pairs that name no deletable entry
            are ignored.
    Returns:
        :class:`Pruned`; ``code`` is the input itself when it does not parse or when the
        result would not compile or would lack ``Model``.
    """
    head, sep, tail = code.partition(INPUTS_MARKER)
    dropped: list[str] = []
    drop = set(drop_entries)
    if drop:
        try:
            head, dropped = _drop_entries(head, drop)
        except SyntaxError:
            return Pruned(code)
    head, n_annotations = strip_annotations(head)
    try:
        tree = ast.parse(head)
        tail_names = set()
        if sep:
            tail_tree = ast.parse(tail)
            tail_names = _refs(tail_tree, _docstring_nodes(tail_tree))
    except SyntaxError:
        return Pruned(code)
    reads_doc = any(isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load)
                    and (n.id if isinstance(n, ast.Name) else n.attr) == "__doc__"
                    for n in ast.walk(tree)) or "__doc__" in _string_idents(tree)
    keep, dynamic = reachable_statements(tree, tail_names, not reads_doc)
    line_text = head.splitlines(keepends=True)
    if line_text and not line_text[-1].endswith("\n"):
        line_text[-1] += "\n"
    delete: set[int] = set()
    removed: list[str] = []
    owned = [not _shares_line(s, line_text) for s in tree.body]
    for s, k, own in zip(tree.body, keep, owned):
        if k or not own or (isinstance(s, ast.Expr) and reads_doc):
            continue
        a, b = _stmt_lines(s)
        delete.update(range(a, b + 1))
        if not isinstance(s, ast.Expr):
            removed.extend(_bound(s) or [])
    replace: dict[int, str] = {}
    n_doc = 0
    if not reads_doc:
        kept_tree = ast.Module(body=[s for s, k, own in zip(tree.body, keep, owned) if k or not own],
                               type_ignores=[])
        d_del, replace, n_doc = _docstring_edits(kept_tree, line_text, _model_doc(tree))
        delete |= d_del
        n_doc += sum(1 for s, k in zip(tree.body, keep)
                     if not k and isinstance(s, ast.Expr))  # module-level bare strings
    protected = _string_lines(head)
    lines: list[str | None] = list(line_text)
    for ln, text in replace.items():
        lines[ln - 1] = text
    for ln in delete:
        lines[ln - 1] = None
    survivors = [x for x in lines if x is not None]
    # comments: on the text that is left, whose string lines are recomputed
    try:
        n_comments = _strip_comments(survivors, set())
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return Pruned(code)
    survivors = [x for x in survivors if x is not None]
    text = "".join(survivors)
    try:
        protected = _string_lines(text)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return Pruned(code)
    new_head = _tidy(text.splitlines(keepends=True), protected)
    new = new_head.rstrip() + "\n\n\n" + sep + tail if sep else new_head
    try:
        new_tree = ast.parse(new)
        compile(new, "<pruned>", "exec")
    except SyntaxError:
        return Pruned(code)
    if not any(isinstance(s, ast.ClassDef) and s.name == "Model" for s in new_tree.body) and \
            any(isinstance(s, ast.ClassDef) and s.name == "Model" for s in tree.body):
        return Pruned(code)
    return Pruned(new, dropped + removed, dynamic, n_doc, n_comments, n_annotations)


# ---------------------------------------------------------------- runtime check

def _flatten(obj, out: list) -> None:
    import torch

    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, dict):
        out.append(("dict", tuple(obj)))
        for k in obj:
            _flatten(obj[k], out)
    elif isinstance(obj, (list, tuple)):
        out.append((type(obj).__name__, len(obj)))
        for x in obj:
            _flatten(x, out)
    elif hasattr(obj, "__dataclass_fields__") or hasattr(obj, "to_tuple"):
        _flatten(dict(vars(obj)), out)
    else:
        out.append(obj)


def _same(a, b) -> bool:
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        if a.dtype != b.dtype or a.shape != b.shape or a.device != b.device:
            return False
        a, b = a.detach().cpu(), b.detach().cpu()
        if a.is_floating_point() or a.is_complex():
            return bool(torch.equal(a.isnan(), b.isnan())) and bool(
                torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)))
        return bool(torch.equal(a, b))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    try:
        return bool(a == b)
    except Exception:
        return False


def _run_once(code: str, name: str, seed: int):
    import random

    import torch

    from curate.problem import exec_source

    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:
        pass
    ns = exec_source(code, name)
    model = ns["Model"](*ns["get_init_inputs"]())
    inputs = ns["get_inputs"]()
    with torch.no_grad():
        out = model(*inputs)
    flat: list = []
    _flatten(out, flat)
    state = list(model.state_dict().items())
    return flat, state


def check_task(original: str, pruned: str, seed: int = 0) -> dict:
    """Run both programs with the same seed and compare (a sandbox task; module level so it
    pickles by reference).

    Each program is executed as its own module; ``torch``, ``random`` and numpy are seeded
    with ``seed`` before the module runs; ``Model(*get_init_inputs())`` is called on
    ``get_inputs()`` under ``torch.no_grad()``. Outputs (tensors, nested tuples, lists,
    dicts, dataclass-like outputs, plain values) and the models' ``state_dict`` must be
    equal exactly: same dtype, shape and bits (NaN in the same places).

    Returns:
        ``{"same": bool, "detail": str}``. An exception of the original propagates (the
        sandbox reports it as an error: nothing was proven); one of the pruned program is
        reported as ``same=False``.
    """
    ref_out, ref_state = _run_once(original, "_curate_prune_original", seed)
    try:
        new_out, new_state = _run_once(pruned, "_curate_prune_pruned", seed)
    except Exception as exc:  # untrusted code: anything
        return {"same": False, "detail": f"pruned program failed: {type(exc).__name__}: {exc}"[:500]}
    if len(ref_out) != len(new_out) or not all(_same(a, b) for a, b in zip(ref_out, new_out)):
        return {"same": False, "detail": "outputs differ"}
    if [k for k, _ in ref_state] != [k for k, _ in new_state] or not all(
            _same(a, b) for (_, a), (_, b) in zip(ref_state, new_state)):
        return {"same": False, "detail": "parameters or buffers differ"}
    return {"same": True, "detail": ""}
