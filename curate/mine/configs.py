"""Configuration objects that mined code reads but no copied statement binds.

Research code often reads a global configuration filled in by a training script
(``cfg.MODEL.BACKBONE.OUT_CHANNELS``, ``args.hidden_dim``, ``opt.use_bn``): the object is made
at run time from command-line flags or a YAML file and is not part of the module. A problem
gets its own: a nested :class:`types.SimpleNamespace` with one attribute per attribute path
the code reads, each leaf a value guessed from its name and the way the code uses it:

- iterated, indexed, measured (``for s in cfg.STRIDES``, ``cfg.DIMS[i]``, ``len(args.layers)``):
  a list of four values guessed from the name (``[2, 2, 2, 2]`` for strides);
- compared with a string (``cfg.NORM == "BN"``): that string;
- tested as a condition (``if opt.use_bn``): a flag, ``False``;
- otherwise a number guessed from the name as a constructor argument would be (64 channels,
  8 heads, 0.0 dropout, 1e-5 eps).

:func:`repair` changes a guess from an error message like any other guess (an attribute the
paths missed, a number the code iterates). The namespace is written at the top of the problem
(:func:`with_configs`), so the problem stays one self-contained file.

Only the standard library and :mod:`curate.mine.guess` are imported (this runs in sandbox workers).
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
from typing import Any

from curate.dedup.ops import dotted
from curate.mine.guess import _BOOL_RE, _FLOAT_HINTS, _INT_HINTS, C

#: Global names taken for a configuration object when code reads attributes of them.
CONFIG_GLOBAL = re.compile(r"^_?(cfg|cfgs|config|configs|conf|args|opt|opts|hparams|hp|hps|flags|FLAGS|params|"
                           r"options|settings|hyp|hyper_params|hyperparams|CFG|CONFIG|ARGS|OPT|C|_C|FLAGS)$")
_BUILTINS = set(dir(builtins))
Tree = dict  # attribute -> Tree (a namespace) or a leaf value
_LIST_USE, _STR_USE, _FLAG_USE, _PLAIN = "list", "str", "flag", "plain"


def free_globals(source: str) -> set[str]:
    """Names the code reads as globals (in a function, a class or at the top) that nothing at
    its top level binds and that are not builtins. Empty for code that does not compile."""
    try:
        top = symtable.symtable(source, "<configs>", "exec")
    except (SyntaxError, ValueError):
        return set()
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    reads: set[str] = set()

    def walk(t: symtable.SymbolTable) -> None:
        for s in t.get_symbols():
            if t.get_type() == "module" and s.is_referenced() or t.get_type() != "module" and s.is_global() \
                    and s.is_referenced():
                reads.add(s.get_name())
        for c in t.get_children():
            walk(c)

    walk(top)
    return {n for n in reads - bound if n not in _BUILTINS and not n.startswith("__")}


def _use(node: ast.AST, parent: ast.AST | None) -> tuple[str, Any]:
    """How the code uses the value at ``node``: a kind and, for a string comparison, the string."""
    if isinstance(parent, (ast.For, ast.comprehension)) and getattr(parent, "iter", None) is node:
        return _LIST_USE, None
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return _LIST_USE, None
    if isinstance(parent, ast.Starred):
        return _LIST_USE, None
    if isinstance(parent, ast.Call) and node in parent.args and isinstance(parent.func, ast.Name) and \
            parent.func.id in ("len", "zip", "enumerate", "list", "tuple", "sum", "reversed", "sorted"):
        return _LIST_USE, None
    if isinstance(parent, ast.Compare):
        for c in [parent.left, *parent.comparators]:
            if isinstance(c, ast.Constant) and isinstance(c.value, str):
                return _STR_USE, c.value
            if isinstance(c, (ast.List, ast.Tuple, ast.Set)):
                strs = [e.value for e in c.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                if strs:
                    return _STR_USE, strs[0]
    if isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.Assert)) and parent.test is node:
        return _FLAG_USE, None
    if isinstance(parent, ast.BoolOp) or isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
        return _FLAG_USE, None
    return _PLAIN, None


def _singular(name: str) -> str:
    """``stride`` for ``strides``, ``box`` for ``boxes``, ``dim`` for ``dims_list``."""
    name = re.sub(r"_(list|per_\w+)$", "", name)
    if re.search(r"(x|ss|sh|ch)es$", name):
        return name[:-2]
    return name[:-1] if name.endswith("s") and not name.endswith("ss") else name


def leaf_guess(name: str, use: str = _PLAIN, text: Any = None) -> Any:
    """A value for configuration attribute ``name`` used as ``use`` (see the module docstring)."""
    low = name.lower()
    if use == _STR_USE:
        return text
    if use == _LIST_USE:
        item = leaf_guess(_singular(low))
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            item = C
        return [item] * 4
    if use == _FLAG_USE or re.search(_BOOL_RE, low):
        return False
    if re.match(r"(num|n|number_of)_", low):  # a count of layers, blocks, convolutions: kept small
        return 2
    for pattern, value in _INT_HINTS:
        if re.search(pattern, low):
            return value
    for pattern, value in _FLOAT_HINTS:
        if re.search(pattern, low):
            return value
    if re.search(r"(^|_)(dims?|channels?|width|hidden|features?|size|planes|emb|embed\w*|d_model|units)($|_)", low):
        return C
    return C


def global_configs(source: str) -> dict[str, Tree]:
    """The configuration globals ``source`` reads without binding them (names matching
    :data:`CONFIG_GLOBAL` with attributes read), each as a tree of guessed values; ``{}`` when
    there are none."""
    if not re.search(r"\b_?(cfgs?|configs?|conf|args|opts?|hparams|hps?|flags|FLAGS|params|options|settings|hyp|"
                     r"hyper_?params|CFG|CONFIG|ARGS|OPT|_?C)\.\w", source):
        return {}
    names = {n for n in free_globals(source) if CONFIG_GLOBAL.match(n)}
    if not names:
        return {}
    tree = ast.parse(source)
    parents: dict[ast.AST, ast.AST] = {}
    for p in ast.walk(tree):
        for c in ast.iter_child_nodes(p):
            parents[c] = p
    out: dict[str, Tree] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or isinstance(parents.get(node), ast.Attribute) \
                and parents[node].value is node:
            continue  # only the longest chain of each read
        path = dotted(node)
        chain = path.split(".") if path else None
        if chain is None or chain[0] not in names:
            continue
        use, text = _use(node, parents.get(node))
        if isinstance(parents.get(node), ast.Call) and parents[node].func is node:
            chain = chain[:-1]  # ``args.get(...)``, ``cfg.items()``: a method of the object itself
            if len(chain) < 2:
                out.setdefault(chain[0], {})
                continue
            use = _PLAIN
        _insert(out.setdefault(chain[0], {}), chain[1:], leaf_guess(chain[-1], use, text))
    return {n: t for n, t in out.items()}


def _insert(tree: Tree, path: list[str], value: Any) -> None:
    for key in path[:-1]:
        if not isinstance(tree.get(key), dict):
            tree[key] = {}  # a namespace wins over a leaf read at the same path
        tree = tree[key]
    if path[-1] not in tree:
        tree[path[-1]] = value


def render(tree: Tree) -> str:
    """Python source building ``tree``'s namespace (``types`` must be imported)."""
    items = ", ".join(f"{k}={render(v) if isinstance(v, dict) else repr(v)}" for k, v in tree.items()
                      if k.isidentifier())
    return f"types.SimpleNamespace({items})"


def with_configs(source: str, configs: dict[str, Tree]) -> str:
    """``source`` with a binding of each configuration global after its ``__future__`` imports
    and docstring (which must stay first)."""
    if not configs:
        return source
    body = ast.parse(source).body
    end = 0
    for k, node in enumerate(body):
        doc = k == 0 and isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant)
        if doc or isinstance(node, ast.ImportFrom) and node.module == "__future__":
            end = node.end_lineno
        else:
            break
    lines = source.splitlines(keepends=True)
    made = ["import types  # configuration objects the code reads, made for this problem\n"]
    made += [f"{name} = {render(tree)}\n" for name, tree in configs.items()]
    return "".join(lines[:end]) + "".join(made) + "".join(lines[end:])


def _nodes(tree: Tree, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Tree]]:
    out = [(path, tree)]
    for k, v in tree.items():
        if isinstance(v, dict):
            out += _nodes(v, path + (k,))
    return out


def _copy(tree: Tree) -> Tree:
    return {k: _copy(v) if isinstance(v, dict) else v for k, v in tree.items()}


def repair(configs: dict[str, Tree], msg: str, line: str = "") -> dict[str, Tree] | None:
    """New guesses after error ``msg`` raised on source line ``line``; None when the error is
    not about a configuration global.

    - ``'types.SimpleNamespace' object has no attribute 'x'``: ``x`` is added to each namespace
      (the code read it through an alias or a helper's parameter) with a guess from its name;
    - ``'int' object is not iterable`` (or subscriptable, has no ``len()``) on a line reading
      ``cfg.a.b``: that leaf becomes a list; ``'list' object cannot be interpreted as an integer``
      (or an operand error with a list) a number;
    - ``'NoneType'`` where a line reads a leaf: a number.
    """
    new = {n: _copy(t) for n, t in configs.items()}
    changed = False
    m = re.search(r"'(?:types\.)?SimpleNamespace' object has no attribute '(\w+)'", msg)
    if m:
        attr = m.group(1)
        for tree in new.values():
            for _, node in _nodes(tree):
                if attr not in node:
                    node[attr] = leaf_guess(attr)
                    changed = True
        return new if changed else None
    wants_list = re.search(r"'(int|float|bool)' object is not (iterable|subscriptable)|object of type '(int|float)' "
                           r"has no len", msg)
    wants_int = re.search(r"'list' object cannot be interpreted as an integer|unsupported operand type\(s\).*'list'|"
                          r"can't multiply sequence|'list' object has no attribute|'NoneType'", msg)
    if not (wants_list or wants_int):
        return None
    for name, tree in new.items():
        for m in re.finditer(rf"(?<![\w.]){re.escape(name)}((?:\.\w+)+)", line):
            path = m.group(1).lstrip(".").split(".")
            node = tree
            for key in path[:-1]:
                node = node.get(key) if isinstance(node, dict) else None
            if not isinstance(node, dict) or path[-1] not in node or isinstance(node[path[-1]], dict):
                continue
            old = node[path[-1]]
            if wants_list and not isinstance(old, list):
                node[path[-1]] = [old if isinstance(old, (int, float)) and not isinstance(old, bool) else C] * 4
                changed = True
            elif wants_int and (isinstance(old, list) or old is None):
                node[path[-1]] = old[0] if old else C
                changed = True
    return new if changed else None
