"""Emission of a closure: the copy state (:class:`_State`), the order files are written in
(dependencies first, namespaces last) and the assembled source."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields

from curate.mine.closure_rename import rename_globals
from curate.mine.closure_source import _CLASS_FILE, _CLASS_FILE_SAFE, _MODULE_DICT, _apply_edits
from curate.mine.closure_types import Closure, Entity, RESERVED, _BUILTINS, _IMPORTS, _MISSING, _NS, _SHIM


class _Emission:
    """Output of a :class:`curate.mine.closure.Resolver`."""

    # -- output ----------------------------------------------------------------------
    def _emit(self, st: _State, class_name: str) -> Closure:
        order = _namespaces_last(_topo(st.file_deps, st.first_seen), st.file_deps)
        parts = ["from __future__ import annotations", ""]
        copied: dict[str, list[str]] = {}
        for mod in order:
            label = self.provenance(mod) if st.stmts.get(mod) else None
            if label:
                copied.setdefault(label, []).append(mod)
        for label, mods in copied.items():
            parts.append(f"# includes code from {label}: {', '.join(mods)}")
        parts += [""] if copied else []
        parts += ["import torch"]
        parts += sorted(set(st.imports.values()) - {"import torch"})
        types_name = st.names.get(("<import>", "types"), "types")
        for mod in order:
            if mod.startswith(_MISSING):
                parts += ["", st.missing[mod[len(_MISSING):]]]
                continue
            if mod.startswith(_NS):
                ent = ("<module>", mod[len(_NS):])
                values = ", ".join(f"{a}={st.names[f]}" for a, f in sorted(st.namespaces[ent].items()))
                parts += ["", f"{st.names[ent]} = {types_name}.SimpleNamespace({values})"]
                continue
            chosen = sorted(st.stmts.get(mod, ()))
            if not chosen:
                continue
            if mod.startswith(_SHIM) and chosen:
                real = mod[len(_SHIM):]
                parts += ["", "", f"# {real}: torch-only stand-ins written for curate (not {real}'s code)"]
            renames = st.renames_for(mod)
            idx = self.indexes[mod]
            for i in chosen:
                code = idx.stmts[i].code
                if (mod, i) in st.edits:
                    code = _apply_edits(code, st.edits[(mod, i)])
                code = code.strip("\n")
                if "sys.modules[" in code:
                    # the closure is one module: a copied class's module namespace is its own
                    # globals, also where a harness execs the problem into a bare dict
                    # (torch_geometric's Inspector evaluates a layer's type hints there)
                    code = _MODULE_DICT.sub("globals()", code)
                if "inspect.getfile(" in code or "inspect.getsourcelines(" in code:
                    # a class of the problem has no file: it is exec'd, not imported (funasr's
                    # registry records each registered class's file and line)
                    code = _CLASS_FILE.sub(lambda m: _CLASS_FILE_SAFE[m.group(1)], code)
                local = {k: v for k, v in renames.items() if k in code}
                if local:  # whole words only: "Attention" inside "AttentionProcessor" is not a read
                    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code))
                    local = {k: v for k, v in local.items() if k in words}
                code = rename_globals(code, local) if local else code
                for ref in re.findall(r"__curate_ref_\d+__", code):
                    name = st.names[st.refmarks[ref]]
                    # `x = x` in a function makes x local and unbound: the global x is meant
                    code = re.sub(rf"^([ \t]*){re.escape(name)} = {ref}[ \t]*$", r"\1pass", code, flags=re.M)
                    code = code.replace(ref, name)
                parts += ["", "", code]
        if st.late:  # read by a computed name when a layer is built, not when the file runs
            parts += [""] + [f"{st.names[ns]}.{attr} = {st.names[ent]}" for (ns, attr), ent in sorted(st.late.items())]
        files = [m for m in order if not m.startswith((_SHIM, _NS, _MISSING))]
        return Closure("\n".join(parts).rstrip() + "\n", class_name, files, sorted(st.unresolved))


@dataclass
class _State:
    names: dict = field(default_factory=dict)  # entity -> emitted name
    taken: dict = field(default_factory=dict)  # emitted name -> entity
    refs: dict = field(default_factory=dict)  # module -> {local name read: entity}
    stmts: dict = field(default_factory=dict)  # module -> statement indexes copied
    imports: dict = field(default_factory=dict)  # emitted name -> import line
    namespaces: dict = field(default_factory=dict)  # ("<module>", mod) -> {attr: entity}
    file_deps: dict = field(default_factory=dict)
    first_seen: dict = field(default_factory=dict)
    unresolved: set = field(default_factory=set)
    edits: dict = field(default_factory=dict)  # (module, stmt) -> nested import rewrites
    missing: dict = field(default_factory=dict)  # emitted name -> placeholder line
    refmarks: dict = field(default_factory=dict)  # placeholder -> entity, filled in after renaming
    failed: set = field(default_factory=set)  # entities a nested import could not copy
    dynamic: set = field(default_factory=set)  # module namespaces read by ``getattr(ns, name)``
    late: dict = field(default_factory=dict)  # (namespace entity, attr) -> entity bound after all else
    chars: int = 0  # characters of source statements copied so far

    def copy(self) -> "_State":
        """A copy to try a nested import on: containers copied two levels deep (their values
        are dicts, sets and lists of immutable items), far cheaper than ``copy.deepcopy`` on
        closures with hundreds of nested imports (diffusers' ``try: from ... import``)."""
        new = _State()
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, dict):
                v = {k: (x.copy() if isinstance(x, (dict, set, list)) else x) for k, x in v.items()}
            elif isinstance(v, set):
                v = v.copy()
            setattr(new, f.name, v)
        return new

    def claim(self, ent: Entity, want: str) -> str:
        """Give ``ent`` the name ``want``, or ``want_2``, ... when taken (builtins avoided
        for definitions, so a copied ``format`` cannot shadow another file's builtin)."""
        name, n = want, 1
        avoid_builtin = ent[0] not in _IMPORTS
        dunder = len(want) > 4 and want.startswith("__") and want.endswith("__")
        while name in self.taken or name in RESERVED or (avoid_builtin and name in _BUILTINS):
            n += 1
            # `__version___2` read in a class body would be name-mangled; `__version_2__` is not
            name = f"{want[:-2]}_{n}__" if dunder else f"{want}_{n}"
        self.names[ent] = name
        self.taken[name] = ent
        return name

    def renames_for(self, module: str) -> dict[str, str]:
        """Local name -> emitted name, for the names of ``module`` emitted under another."""
        out = {}
        for local, ent in self.refs.get(module, {}).items():
            if self.names.get(ent, local) != local:
                out[local] = self.names[ent]
        for ent, name in self.names.items():
            if ent[0] == module and ent[1] != name:
                out[ent[1]] = name
        return out


def _order_after(module: str, ent: Entity, st: _State) -> None:
    """Emit ``module``'s statements after the node that defines ``ent``."""
    dep = _dep_node(ent, st)
    if dep is not None and dep != module:
        st.file_deps.setdefault(module, set()).add(dep)


def _dep_node(ent: Entity, st: _State) -> str | None:
    """The emission-order node that defines ``ent`` (None for an import line)."""
    if ent[0] == "<module>":
        return _NS + ent[1]
    if ent[0] in ("<missing>", "<logger>", "<file>"):
        return _MISSING + st.names[ent]
    if ent[0] in _IMPORTS:
        return None
    owner = st.taken.get(st.names.get(ent, ""))
    if owner is not None and owner[0] == "<logger>":  # a library logger, made a stdlib one
        return _MISSING + st.names[ent]
    return ent[0]


def _common_prefix(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _namespaces_last(order: list[str], deps: dict[str, set[str]]) -> list[str]:
    """Move each namespace node after the last node it binds: in an import cycle (a package
    ``__init__`` re-exporting from a submodule that imports the package, as torch_geometric's
    ``is_compiling``) first-seen order put ``pkg = SimpleNamespace(f=f)`` before ``def f``."""
    order = list(order)
    for node in [m for m in order if m.startswith(_NS)]:
        pos = order.index(node)
        last = max((order.index(d) for d in deps.get(node, ()) if d in order), default=-1)
        if last > pos:
            order.insert(last, order.pop(pos))  # after the pop, index `last` is just past it
    return order


def _topo(deps: dict[str, set[str]], first_seen: dict[str, int]) -> list[str]:
    """Modules ordered so a module's dependencies come first (cycles: first-seen order)."""
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(m: str) -> None:
        if state.get(m):
            return
        state[m] = 1
        for d in sorted(deps.get(m, ()), key=lambda x: first_seen.get(x, 0)):
            visit(d)
        state[m] = 2
        order.append(m)

    for m in sorted(first_seen, key=first_seen.get):
        visit(m)
    return order
