"""Prune what a problem's runs never executed: constructor-time branches and unused methods.

timm's factories (``create_conv2d``, ``create_aa``, ``create_rope_embed`` ...) choose a class
from their arguments in ``if``/``elif`` chains, so every class any argument could pick stays
reachable to a static pass although one problem builds one. This pass runs the program under
a line tracer (:func:`trace`) and edits it (:func:`cover_prune`):

- in a function that ran while ``Model`` was constructed and never during a forward or at
  import, an ``if`` body, ``else`` block or ``elif`` chain that no run entered is replaced by
  ``raise NotImplementedError(...)``, and so are the statements after an ``if`` that always
  returned; only where the deciding condition reads nothing but the function's arguments
  and what is computed from them, pure functions of the program included (:func:`arg_only`,
  :func:`_pure_functions`), so that it is decided by ``get_init_inputs()``, not by tensor
  shapes, the device, the environment or a global flag;
- in ``Model``'s forward, when the harness's ``model(*get_inputs())`` is its one caller in
  every run, a branch no run entered whose condition reads only parameters no run passed
  (those after the last input, keyword-only ones: they hold their defaults) and literals or
  pure functions, never ``self`` or the inputs, is replaced the same way (timm's
  ``AttentionRope``: ``if rope is not None``); a submodule's forward is not judged, its
  caller may pass anything;
- a method of a class of the program that never ran, whose name nothing left in the program
  mentions (attribute, name or string), which is not a dunder and does not override a
  method of a class outside the program (``nn.Module``'s ``_apply``, ``train``,
  ``_load_from_state_dict`` ... stay: a harness calls those) is deleted; ``extra_repr`` is
  the one override that goes (it only formats ``repr``).

Then :func:`curate.export.prune.prune_source` drops the definitions only the removed code
named. The runs are the program at its proven inputs (CPU: constructor and forward) and each
variant program sharing its module body (every exported row's inputs and its shape variants,
held-out ones included) on the ``meta`` device, constructor and forward: a branch a variant's
constructor takes is entered, so it is kept. When a variant's meta run fails, nothing is
concluded (the pass proposes nothing). :func:`check_meta` is the variants' half of the proof:
the pruned program must build and run every variant on ``meta`` with the same output and
parameter shapes as the original.

Limit: a condition computed from an argument that a caller derived from the environment (a
parent module passing ``torch.cuda.is_available()`` down) looks argument-only here; the
proof runs on this machine only.
"""

from __future__ import annotations

import ast
import builtins
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from curate.export.prune_trace import Coverage, check_meta, trace  # noqa: F401  (re-exported)
from curate.problem import INPUTS_MARKER

#: Statement that stands for a removed branch.
RAISE = 'raise NotImplementedError("pruned: not reached by this problem")'
#: Builtins a constructor-time condition may call (pure functions of their arguments).
SAFE_CALLS = frozenset({
    "isinstance", "issubclass", "len", "callable", "hasattr", "getattr", "type", "tuple", "list",
    "int", "float", "str", "bool", "all", "any", "min", "max", "sum", "set", "dict", "frozenset",
    "abs", "round", "sorted", "zip", "range", "enumerate", "divmod", "id"})
#: Standard-library modules whose functions return values determined by their arguments alone:
#: a function of the program may call them (``math.ceil``, ``itertools.repeat``) and stay pure.
PURE_MODULES = frozenset({"math", "itertools", "operator"})
#: Overrides of outside methods that only format ``repr`` (dropped when they never ran).
REPR_ONLY = frozenset({"extra_repr"})


# ---------------------------------------------------------------- conditions

def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return set(names)


def _assignments(fn: ast.AST) -> dict[str, list[ast.AST | None]]:
    """Local name -> the expressions assigned to it in ``fn`` (None: bound some way whose
    value cannot be judged, such as ``with ... as`` or an import)."""
    out: dict[str, list[ast.AST | None]] = {}

    def bind(target: ast.AST, value: ast.AST | None) -> None:
        if isinstance(target, ast.Name):
            out.setdefault(target.id, []).append(value)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            out.setdefault(f"{target.value.id}.{target.attr}", []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                bind(t.value if isinstance(t, ast.Starred) else t, value)

    for n in ast.walk(fn):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                bind(t, n.value)
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            bind(n.target, n.value)
        elif isinstance(n, ast.NamedExpr):
            bind(n.target, n.value)
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
            bind(n.target, n.iter)
        elif isinstance(n, (ast.With, ast.AsyncWith)):
            for item in n.items:
                if item.optional_vars is not None:
                    bind(item.optional_vars, None)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                out.setdefault((a.asname or a.name).partition(".")[0], []).append(None)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.setdefault(n.name, []).append(None)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)) and n is not fn:
            if not isinstance(n, ast.Lambda):
                out.setdefault(n.name, []).append(None)
    return out


@dataclass
class _Scope:
    fn: ast.FunctionDef | ast.AsyncFunctionDef
    params: set[str]
    assigned: dict[str, list[ast.AST | None]]
    static_globals: set[str]
    module_names: set[str]
    #: names callable as pure functions (:func:`_pure_functions`)
    pure: frozenset[str] = frozenset()
    #: names bound to a module of :data:`PURE_MODULES` (their attributes may be called)
    pure_modules: frozenset[str] = frozenset()


def _builtin_exception(name: str) -> bool:
    v = getattr(builtins, name, None)
    return isinstance(v, type) and issubclass(v, BaseException)


def arg_only(expr: ast.AST, scope: _Scope, seen: frozenset[str] = frozenset()) -> bool:
    """Whether ``expr`` (a condition inside ``scope.fn``) reads only the function's
    arguments, locals computed from them, literals, classes and functions of the module
    that it does not call, imported modules' attributes that it does not call, the pure
    builtins of :data:`SAFE_CALLS` and builtin exception classes, and the pure functions of
    the program (``scope.pure``: ``get_padding_value(padding, kernel_size)`` returns what its
    arguments decide, :func:`_pure_functions`)."""
    comp_targets = {t.id for n in ast.walk(expr) if isinstance(n, ast.comprehension)
                    for t in ast.walk(n.target) if isinstance(t, ast.Name)}
    for n in ast.walk(expr):
        if isinstance(n, (ast.Await, ast.Yield, ast.YieldFrom, ast.Lambda)):
            return False
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Name):
                if f.id in scope.assigned or f.id in scope.params:
                    return False
                if f.id in scope.pure:
                    continue  # its arguments are judged as the walk goes on
                if f.id in scope.module_names or not (f.id in SAFE_CALLS or _builtin_exception(f.id)):
                    return False
            elif isinstance(f, ast.Attribute):
                root = f
                while isinstance(root, ast.Attribute):
                    root = root.value
                # methods of the arguments (kwargs.get, name.lower): not of self, whose
                # methods may read anything; functions of a pure module (math.ceil)
                if isinstance(f.value, ast.Name) and f.value.id in scope.pure_modules \
                        and f.value.id not in scope.assigned:
                    continue
                if not (isinstance(root, ast.Name) and root.id != "self"
                        and (root.id in scope.params or root.id in scope.assigned)):
                    return False
            else:
                return False
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
            key = f"self.{n.attr}"
            if n.attr == "training" or key in seen:
                return False if n.attr == "training" else True
            for v in scope.assigned.get(key, []):
                if v is None or not arg_only(v, scope, seen | {key}):
                    return False
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            name = n.id
            if name in comp_targets or name in seen:
                continue
            if name in scope.assigned and name not in scope.params:
                for v in scope.assigned[name]:
                    if v is None or not arg_only(v, scope, seen | {name}):
                        return False
            elif name in scope.params or name in scope.pure:
                continue
            elif name in scope.module_names:
                if name not in scope.static_globals:
                    return False
            elif not hasattr(builtins, name):
                return False  # a free variable of an enclosing function: not judged
    return True


def _static_globals(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(names bound at module level, those bound only to a class, a function, an import or a
    display/``dict()`` of names and literals: values no environment changes)."""
    bound: dict[str, list[bool]] = {}
    for s in tree.body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.setdefault(s.name, []).append(True)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            for a in s.names:
                bound.setdefault((a.asname or a.name).partition(".")[0], []).append(True)
        elif isinstance(s, (ast.Assign, ast.AnnAssign)):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            ok = s.value is not None and all(
                not isinstance(n, ast.Call) or (isinstance(n.func, ast.Name)
                                                 and n.func.id in ("dict", "set", "frozenset", "tuple"))
                for n in ast.walk(s.value))
            for t in targets:
                for x in ast.walk(t):
                    if isinstance(x, ast.Name):
                        bound.setdefault(x.id, []).append(ok)
        else:
            for x in ast.walk(s):  # try/if blocks at module level: bound, not judged static
                if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store):
                    bound.setdefault(x.id, []).append(False)
                elif isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    bound.setdefault(x.name, []).append(False)
                elif isinstance(x, (ast.Import, ast.ImportFrom)):
                    for a in x.names:
                        bound.setdefault((a.asname or a.name).partition(".")[0], []).append(False)
    return set(bound), {k for k, v in bound.items() if all(v)}


def _child_blocks(s: ast.stmt):
    """The statement lists nested directly in ``s`` (bodies, ``else``/``finally`` blocks and
    ``except`` handlers' bodies)."""
    for attr in ("body", "orelse", "finalbody"):
        inner = getattr(s, attr, None)
        if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
            yield inner
    for h in getattr(s, "handlers", []):
        yield h.body


def _module_bindings(tree: ast.Module) -> Counter:
    """How many times each name is bound at module level (inside ``if``/``try`` blocks too)."""
    counts: Counter = Counter()

    def visit(block: list[ast.stmt]) -> None:
        for s in block:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                counts[s.name] += 1
                continue
            if isinstance(s, (ast.Import, ast.ImportFrom)):
                counts.update((a.asname or a.name).partition(".")[0] for a in s.names)
                continue
            for n in ast.walk(s):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    counts[n.id] += 1
            for inner in _child_blocks(s):
                visit(inner)

    visit(tree.body)
    return counts


def _pure(fn: ast.FunctionDef, base: _Scope, closure: frozenset[str] = frozenset()) -> bool:
    """Whether every statement of ``fn`` reads only its arguments (``closure``: an enclosing
    function's arguments and locals, which count as arguments here), its locals, literals and
    what ``base`` allows (:func:`arg_only`), so that what it returns is decided by its
    arguments. A nested function may be defined (``_ntuple``'s ``parse``) when it is pure too
    and directly in the body; ``global``, ``nonlocal``, generators, lambdas, classes and
    imports make a function impure."""
    nested = [s for s in fn.body if isinstance(s, ast.FunctionDef) and not s.decorator_list]
    for n in ast.walk(fn):
        if isinstance(n, (ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom, ast.Await, ast.Lambda,
                          ast.ClassDef, ast.Import, ast.ImportFrom, ast.AsyncFunctionDef)):
            return False
        if isinstance(n, ast.FunctionDef) and n is not fn and n not in nested:
            return False
    names = {s.name for s in nested}
    assigned = {k: v for k, v in _assignments(fn).items() if k not in names}
    params = _params(fn) | closure
    scope = _Scope(fn, params, assigned, base.static_globals, base.module_names,
                   base.pure | names, base.pure_modules)
    for s in fn.body:
        if s in nested:
            if not _pure(s, scope, frozenset(params | set(assigned))):
                return False
        elif not arg_only(s, scope):
            return False
    return True


def _pure_functions(tree: ast.Module, static_globals: set[str], module_names: set[str]
                    ) -> tuple[frozenset[str], frozenset[str]]:
    """Names a constructor-time condition may call as pure functions, and the names bound to
    modules of :data:`PURE_MODULES`.

    Pure: an undecorated top-level function bound once whose body passes :func:`_pure`
    (calls among such functions are allowed, recursion included: the largest set that
    checks out); ``NAME = f(literals)`` with ``f`` pure (timm's ``to_2tuple = _ntuple(2)``,
    whose result is a function of the literal and its own argument); names imported once
    from a pure module (``from itertools import repeat``). timm's ``create_conv2d_pad``
    chooses ``Conv2dSame`` from ``get_padding_value(padding, kernel_size)``: with this, the
    choice is decided by the constructor's arguments."""
    counts = _module_bindings(tree)
    once = {k for k, v in counts.items() if v == 1}
    modules: set[str] = set()
    imported: set[str] = set()
    for s in tree.body:
        if isinstance(s, ast.Import):
            modules.update(a.asname or a.name for a in s.names if a.name in PURE_MODULES)
        elif isinstance(s, ast.ImportFrom) and s.module in PURE_MODULES and not s.level:
            imported.update(a.asname or a.name for a in s.names if a.name != "*")
    modules &= once
    imported &= once
    funcs = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef) and not s.decorator_list
             and s.name in once}
    factories: dict[str, str] = {}
    for s in tree.body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
                and s.targets[0].id in once and isinstance(s.value, ast.Call) \
                and isinstance(s.value.func, ast.Name) and s.value.func.id in funcs:
            try:
                for a in [*s.value.args, *(k.value for k in s.value.keywords)]:
                    ast.literal_eval(a)
            except ValueError:
                continue
            if all(k.arg for k in s.value.keywords) and not any(isinstance(a, ast.Starred) for a in s.value.args):
                factories[s.targets[0].id] = s.value.func.id
    pure = set(funcs) | set(factories)
    while True:
        base = _Scope(None, set(), {}, static_globals, module_names,  # type: ignore[arg-type]
                      frozenset(pure | imported), frozenset(modules))
        bad = {n for n in pure & set(funcs) if not _pure(funcs[n], base)}
        bad |= {t for t, f in factories.items() if t in pure and f not in pure}
        if not bad:
            return frozenset(pure | imported), frozenset(modules)
        pure -= bad


# ---------------------------------------------------------------- decisions

def _span(block: list[ast.stmt]) -> tuple[int, int]:
    first = min([block[0].lineno] + [d.lineno for d in getattr(block[0], "decorator_list", [])])
    return first, block[-1].end_lineno or block[-1].lineno


def _entered(block: list[ast.stmt], lines: set[int]) -> bool:
    a, b = _span(block)
    return any(a <= ln <= b for ln in lines)


def _owns(block: list[ast.stmt], text: list[str]) -> bool:
    """The block's statements start and end lines of their own (no ``if x: y`` one-liners)."""
    first, last = block[0], block[-1]
    head = text[first.lineno - 1].encode()[:first.col_offset]
    tail = text[(last.end_lineno or last.lineno) - 1].encode()[last.end_col_offset:]
    return not head.strip() and not tail.split(b"#", 1)[0].strip() and \
        not any(text[d.lineno - 1].encode()[:d.col_offset].strip()
                for d in getattr(first, "decorator_list", []))


def _worth(block: list[ast.stmt]) -> bool:
    """More than one line, or a name the raise would not keep: the edit saves something."""
    a, b = _span(block)
    return b > a or not (len(block) == 1 and isinstance(block[0], (ast.Raise, ast.Pass, ast.Return))
                         and not any(isinstance(n, ast.Call) for n in ast.walk(block[0])))


def _always_leaves(block: list[ast.stmt]) -> bool:
    return bool(block) and isinstance(block[-1], (ast.Return, ast.Raise))


@dataclass
class _Edit:
    first: int
    last: int
    lines: list[str]  # replacement (with newlines)


def _branch_edits(fn: ast.FunctionDef | ast.AsyncFunctionDef, scope: _Scope, cov: Coverage,
                  text: list[str]) -> list[_Edit]:
    edits: list[_Edit] = []
    lines = cov.any

    def raise_at(col: int) -> str:
        return " " * col + RAISE + "\n"

    def visit_block(block: list[ast.stmt]) -> None:
        for k, s in enumerate(block):
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # nested definitions: judged by their own runs, not here
            if isinstance(s, ast.If):
                visit_if(s)
                rest = block[k + 1:]
                if rest and _always_leaves(s.body) and not s.orelse and _entered([s], lines) \
                        and not _entered(rest, lines) and _owns(rest, text) and _worth(rest) \
                        and arg_only(s.test, scope):
                    a, b = _span(rest)
                    edits.append(_Edit(a, b, [raise_at(rest[0].col_offset)]))
                    return
            else:
                for inner in _child_blocks(s):
                    visit_block(inner)

    def visit_if(s: ast.If) -> None:
        if not _entered([s], lines):
            return
        judged = None

        def decided() -> bool:
            nonlocal judged
            if judged is None:
                judged = arg_only(s.test, scope)
            return judged

        if not _entered(s.body, lines):
            if _owns(s.body, text) and _worth(s.body) and decided():
                a, b = _span(s.body)
                edits.append(_Edit(a, b, [raise_at(s.body[0].col_offset)]))
        else:
            visit_block(s.body)
        if not s.orelse:
            return
        elif_form = len(s.orelse) == 1 and isinstance(s.orelse[0], ast.If) \
            and text[s.orelse[0].lineno - 1].lstrip().startswith("elif")
        if elif_form:
            nested = s.orelse[0]
            if not _entered([nested], lines):
                if _owns([nested], text) and decided():
                    indent = text[nested.lineno - 1][:len(text[nested.lineno - 1])
                                                     - len(text[nested.lineno - 1].lstrip())]
                    a, b = _span([nested])
                    edits.append(_Edit(a, b, [indent + "else:\n", raise_at(nested.body[0].col_offset)]))
            else:
                visit_if(nested)
        elif not _entered(s.orelse, lines):
            if _owns(s.orelse, text) and _worth(s.orelse) and decided():
                a, b = _span(s.orelse)
                edits.append(_Edit(a, b, [raise_at(s.orelse[0].col_offset)]))
        else:
            visit_block(s.orelse)

    visit_block(fn.body)
    return edits


def _functions(tree: ast.Module):
    """Top-level functions and methods of top-level classes."""
    for s in tree.body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield None, s
        elif isinstance(s, ast.ClassDef):
            for m in s.body:
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield s, m


def _entry_defaults(tree: ast.Module, cov: Coverage
                    ) -> tuple[ast.FunctionDef | None, set[str]]:
    """``Model``'s forward as the harness calls it, and its parameters no run passed.

    The harness calls ``model(*get_inputs())``: positional inputs only, so a parameter
    after the last input (and every keyword-only one) keeps its default in every run of
    this problem. That holds only where the harness is the forward's one caller: each run
    executed its code exactly once, and it is an undecorated ``forward`` method of a
    top-level class of the program (``Model``'s own or inherited from a program class).
    ``(None, set())`` otherwise (a run without a record, a submodule sharing the class, a
    wrapper, inputs without a length)."""
    if not cov.entries or any(line is None or calls != 1 or n is None for line, calls, n in cov.entries):
        return None, set()
    if len({line for line, _, _ in cov.entries}) != 1:
        return None, set()
    line = cov.entries[0][0]
    for cls, fn in _functions(tree):
        if cls is None or fn.name != "forward" or fn.lineno != line or fn.decorator_list \
                or not isinstance(fn, ast.FunctionDef):
            continue
        a = fn.args
        positional = [x.arg for x in a.posonlyargs + a.args]
        passed = 1 + max(n for _, _, n in cov.entries)  # self, then the inputs
        defaulted = set(positional[passed:]) | {x.arg for x in a.kwonlyargs}
        return fn, defaulted
    return None, set()


def _names(nodes: list[ast.AST]) -> set[str]:
    from curate.export.prune import _IDENT

    out: set[str] = set()
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                out.add(n.id)
            elif isinstance(n, ast.Attribute):
                out.add(n.attr)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and len(n.value) < 200:
                out.update(_IDENT.findall(n.value))
            elif isinstance(n, ast.keyword) and n.arg:
                out.add(n.arg)
    return out


@dataclass
class CoverPruned:
    """What :func:`cover_prune` did.

    Attributes:
        code: the edited program (the input when nothing was edited).
        branches: branches replaced by a raise.
        methods: ``Class.method`` names deleted, and definitions only a registering
            decorator named.
        tables: the table entries deleted (``table[key]``).
    """

    code: str
    branches: int = 0
    methods: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)


def _registrars(tree: ast.Module) -> set[str]:
    """Top-level functions used as decorators that only record their argument in module
    containers nothing else reads (timm's ``register_notrace_module`` adding to
    ``_leaf_modules``): a definition they decorate can go without changing anything kept."""
    funcs = {s.name: s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    decorators = {n.id for s in tree.body for d in getattr(s, "decorator_list", [])
                  for n in [d.func if isinstance(d, ast.Call) else d] if isinstance(n, ast.Name)}
    out = set()
    for name in decorators & set(funcs):
        fn = funcs[name]
        local = _params(fn) | set(_assignments(fn))
        touched = {n.id for stmt in fn.body for n in ast.walk(stmt) if isinstance(n, ast.Name)
                   and n.id not in local and not hasattr(builtins, n.id)}
        if not touched:
            continue
        readers = [s for s in tree.body if s is not fn and touched & _names([s])
                   and not (isinstance(s, ast.Assign) and {t.id for t in s.targets if isinstance(t, ast.Name)} <= touched
                            and not _names([s.value]) - {"set", "dict", "list"})]
        if not readers and all(isinstance(funcs.get(t), type(None)) for t in touched):
            out.add(name)
    return out


def cover_prune(code: str, cov: Coverage, drop_entries: list[tuple[str, Any]] = ()) -> CoverPruned:
    """Edit ``code`` (the program :func:`trace` ran) per ``cov`` (see the module docstring).

    Whole lines are replaced or deleted; nothing is re-printed. Top-level definitions that
    only the removed code named are left to :func:`curate.export.prune.prune_source`.

    Args:
        code: the program; its module body must be the one the coverage was traced on.
        cov: the runs' coverage; a failed one gives no edits.
        drop_entries: ``(table, key)`` lookup-table entries to delete as well
            (:func:`curate.export.prune_usage.unused_entries`): what only they named is
            then unmentioned here too.
    Returns:
        :class:`CoverPruned` (``code`` unchanged when ``cov.failed`` or nothing applies).
    Raises:
        SyntaxError: the code does not parse.
    """
    from curate.export.prune import DYNAMIC_NAMES, ROOTS, reachable_statements

    if cov.failed:
        return CoverPruned(code)
    from curate.export.prune import table_entries

    head, sep, tail = code.partition(INPUTS_MARKER)
    text = head.splitlines(keepends=True)
    if text and not text[-1].endswith("\n"):
        text[-1] += "\n"
    wanted = set(drop_entries)
    entries = [e for e in table_entries(head) if (e.table, e.key) in wanted] if wanted else []
    for e in entries:  # blanked, so that line numbers still match the coverage
        for ln in range(e.first, e.last + 1):
            text[ln - 1] = "\n"
    head = "".join(text)
    tree = ast.parse(head)
    module_names, static_globals = _static_globals(tree)
    pure, pure_modules = _pure_functions(tree, static_globals, module_names)
    if DYNAMIC_NAMES & _names([tree]):
        return CoverPruned(code)
    edits: list[_Edit] = []
    for cls, fn in _functions(tree):
        if not _entered(fn.body, cov.built) or _entered(fn.body, cov.forward | cov.imported):
            continue  # not a constructor-time function
        scope = _Scope(fn, _params(fn), _assignments(fn), static_globals, module_names, pure, pure_modules)
        edits += _branch_edits(fn, scope, cov, text)
    # the forward the harness calls: a condition on parameters it never passes (and on
    # literals and pure functions, never on ``self`` or the inputs) is decided too; a
    # parameter the body rebinds is judged by what it is rebound to
    entry, defaulted = _entry_defaults(tree, cov)
    if entry is not None and defaulted:
        assigned = _assignments(entry)
        scope = _Scope(entry, defaulted - set(assigned), assigned, static_globals, module_names,
                       pure, pure_modules)
        edits += _branch_edits(entry, scope, cov, text)
    replaced = {(e.first, e.last) for e in edits}

    # methods: never run, not dunders, not outside overrides, named nowhere that stays
    tail_names = _names([ast.parse(tail)]) if sep else set()
    candidates = [] if cov.partial else [(cls, fn) for cls, fn in _functions(tree) if cls is not None
                  and not _entered(fn.body, cov.any) and not (fn.name.startswith("__") and fn.name.endswith("__"))
                  and ((cls.name, fn.name) not in cov.overrides or fn.name in REPR_ONLY)]
    dropped: set[tuple[str, str]] = set()
    while True:
        pruned_tree = _without(head, replaced, dropped)
        keep, _ = reachable_statements(pruned_tree, tail_names | set(ROOTS))
        mentioned = _names([s for s, k in zip(pruned_tree.body, keep) if k]) | tail_names
        more = set()
        for cls, fn in candidates:
            key = (cls.name, fn.name)
            if key in dropped:
                continue
            # the method's own body may name it (recursion): count the rest of the program
            others = mentioned if fn.name not in _names([fn]) else \
                _names([s for s, k in zip(_without(head, replaced, dropped | {key}).body, keep) if k])
            if fn.name not in others | tail_names:
                more.add(key)
        if not more:
            break
        dropped |= more
    gone: list[str] = []
    for cls, fn in candidates:
        if (cls.name, fn.name) in dropped:
            methods_left = [m for m in cls.body if not (isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                                                        and (cls.name, m.name) in dropped)]
            if not methods_left:
                continue  # never empty a class body
            a, b = _span([fn])
            edits.append(_Edit(a, b, []))
            gone.append(f"{cls.name}.{fn.name}")
    # definitions only a registrar decorates, never run and named nowhere that stays
    registrars = _registrars(tree)
    if registrars and not cov.partial:
        pruned_tree = _without(head, replaced, dropped)
        keep, _ = reachable_statements(pruned_tree, tail_names | set(ROOTS))
        for i, s in enumerate(tree.body):
            decos = [d.func if isinstance(d, ast.Call) else d for d in getattr(s, "decorator_list", [])]
            if not decos or not all(isinstance(d, ast.Name) and d.id in registrars for d in decos) \
                    or _entered([s], cov.built | cov.forward):
                continue
            others = _names([x for j, (x, k) in enumerate(zip(pruned_tree.body, keep)) if k and j != i])
            if s.name not in others | tail_names:
                a, b = _span([s])
                edits.append(_Edit(a, b, []))
                gone.append(s.name)
    edits += [_Edit(e.first, e.last, []) for e in entries]
    if not edits:
        return CoverPruned(code)
    out = list(text)
    for e in sorted(edits, key=lambda e: e.first, reverse=True):
        out[e.first - 1:e.last] = e.lines
    new_head = "".join(out)
    new = new_head + sep + tail if sep else new_head
    try:
        compile(new, "<cover-pruned>", "exec")
    except SyntaxError:
        return CoverPruned(code)
    return CoverPruned(new, len(edits) - len(gone) - len(entries), gone,
                       [f"{e.table}[{e.key!r}]" for e in entries])


def _without(head: str, replaced: set[tuple[int, int]], dropped: set[tuple[str, str]]) -> ast.Module:
    """``head``'s tree with the replaced blocks emptied (a raise left) and methods dropped."""
    tree = ast.parse(head)
    for n in ast.walk(tree):
        for attr in ("body", "orelse"):
            block = getattr(n, attr, None)
            if not isinstance(block, list) or not block or not isinstance(block[0], ast.stmt):
                continue
            if isinstance(n, ast.ClassDef) and attr == "body":
                block[:] = [m for m in block if not (isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                                                     and (n.name, m.name) in dropped)] or [ast.Pass()]
            for i in range(len(block)):
                for j in range(len(block), i, -1):
                    if block[i:j] and _span(block[i:j]) in replaced:
                        block[i:j] = [ast.Raise(exc=None, cause=None)]
                        break
    return tree
