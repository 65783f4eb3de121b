"""Make a mined class self-contained: the dependency closure across a source's files.

Starting from the class statement, every global name it reads (found with the standard
library's ``symtable``, so locals, attributes and annotations are not mistaken for
dependencies) is traced to the definition it denotes: a top-level definition of the same
file (class, function, assignment, if/try block), a definition in another file of the
source reached through imports, re-exports and star imports, or an import of a module that
exists at run time (the standard library, torch, packages the source marks importable),
which is kept as an import line. Definitions are copied into one file in dependency order.

- Two definitions with the same name from different files (every file's ``logger``,
  ``_ntuple`` here and there) are both kept: the later one is renamed in the statements that
  define and read it (scope-aware, with libcst).
- ``alias.attr`` reads through a module alias into the source (``from ..ops import misc as
  misc_nn_ops``) copy ``attr`` and bind the alias to a namespace of what is read.
- Third-party modules with a stand-in in :mod:`curate.mine.shims` (einops, pieces of
  transformers' infrastructure) resolve to that torch-only code.
- A model configuration class is copied like any class; its transformers base is a
  stand-in, and the synthesizer passes it concrete values.

Anything else (a third-party import without a stand-in) makes the class unusable, with the
reason recorded.

This module copies definitions (:class:`Resolver`); its pieces, one module each: name
resolution (:mod:`curate.mine.closure_lookup`), library-specific rules
(:mod:`curate.mine.closure_rules`), emission (:mod:`curate.mine.closure_emit`), renaming
(:mod:`curate.mine.closure_rename`), source-text helpers (:mod:`curate.mine.closure_source`)
and the shared types (:mod:`curate.mine.closure_types`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Sequence

from curate.mine import shims
from curate.mine.closure_emit import _Emission, _State, _dep_node, _order_after
from curate.mine.closure_lookup import _Lookup
from curate.mine.closure_rename import rename_globals
from curate.mine.closure_rules import _LibraryRules
from curate.mine.closure_source import (
    _MESSAGE_PASSING,
    _attr_chains,
    _capitalized,
    _dataclass_markers,
    _dynamic_getattrs,
    _global_reads,
    _import_nodes,
    _name_strings,
)
from curate.mine.closure_types import (
    _BUILTINS,
    _IMPORTS,
    _MISSING,
    _NS,
    _SHIM,
    MAX_CLOSURE_CHARS,
    RESERVED,
    RUNTIME_MODULES,
    Closure,
    ClosureError,
    Entity,
)
from curate.mine.index import Binding, FileIndex

__all__ = ["MAX_CLOSURE_CHARS", "RUNTIME_MODULES", "Closure", "ClosureError", "Resolver", "module_name",
           "rename_globals"]


_DECORATED = re.compile(r"^@\s*(\w+)", re.M)  # a top-level decorator's first name


class Resolver(_Lookup, _LibraryRules, _Emission):
    """Resolves names across the files of one source.

    Args:
        root: source root (paths below it map to dotted modules: ``a/b.py`` -> ``a.b``).
        indexes: already-built indexes by module; others are built on demand.
        importable: top-level packages available at run time besides :data:`RUNTIME_MODULES`.
        dependencies: ``(root, label)`` of other packages' sources whose code may be copied
            too (``timm`` code used by ``torchgeo``); ``label`` (name, version, licence) is
            written into the problem as provenance.
    """

    def __init__(self, root: Path, indexes: dict[str, FileIndex], importable: frozenset[str] = frozenset(),
                 dependencies: Sequence[tuple[Path, str]] = ()):
        self.root = root
        self.dependencies = list(dependencies)
        self.indexes = dict(indexes)
        self.runtime = RUNTIME_MODULES | importable
        self._module_cache: dict[tuple[str, str], bool] = {}
        self._defs: dict[str, set[str]] = {}
        self._stmts_of: dict[str, dict[str, list[int]]] = {}


    # -- closure -------------------------------------------------------------------
    def closure(self, module: str, class_name: str) -> Closure:
        """Self-contained source for ``class_name`` of ``module``.

        Raises:
            ClosureError: reasons ``unsupported_import`` (a module alias to a sub-package),
                ``name_conflict`` (the class is named like a KernelBench entry point),
                ``not_found``.
        """
        if class_name in RESERVED:
            raise ClosureError("name_conflict", f"class is named {class_name}")
        st = _State()
        st.claim(("<import>", "torch"), "torch")
        ent = self.locate(module, class_name)
        if ent != (module, class_name):
            raise ClosureError("not_found", f"{class_name} is not defined in {module}")
        self._materialize(ent, class_name, st, via=class_name)
        configs = self._init_configs(module, class_name)
        head = re.match(r"(\w+?)For[A-Z]\w*$", class_name)
        if head and (_SHIM + "transformers.models.auto", "AutoModel") in st.names:
            base = head.group(1) + "Model"  # a generic head: AutoModel builds its family's base model
            self._try_copy(module, base, st, class_name)
            configs += [c for c in self._init_configs(module, base) if c not in configs]
        for name in configs + self._passed_classes(module, class_name):
            self._try_copy(module, name, st, class_name)  # may run without it (a config built elsewhere)
        for name in configs:
            for where, other in self._config_implementations(module, name) + self._config_fields(module, name):
                self._try_copy(where, other, st, class_name)
        for where, name in self._init_annotated(module, class_name) + self._attribute_providers(module, class_name):
            self._try_copy(where, name, st, class_name)
        self._auto_submodels(st, class_name)
        self._dynamic_attrs(st, class_name)
        return self._emit(st, class_name)

    #: most definitions a namespace read by a computed name gains (each one is a class copied)
    MAX_DYNAMIC_ATTRS = 8

    def _dynamic_attrs(self, st: _State, via: str) -> None:
        """``getattr(litgpt.model, self.mlp_class_name)`` (litgpt's configuration picks its
        MLP class by name): the namespace standing for the module holds only what is read
        through it by name, so the computed read finds nothing. It gains the module's
        definitions that a copied statement names in a string (``mlp_class_name:
        Literal["GptNeoxMLP", "LLaMAMLP"] = "GptNeoxMLP"``), at most
        :attr:`MAX_DYNAMIC_ATTRS` of them, each where it can be copied. They are bound at the
        end of the problem (``model.LLaMAMLP = LLaMAMLP``): such a class may itself derive
        from a class read through the namespace (litgpt's LoRA ``LLaMAMLP`` from
        ``litgpt.model.LLaMAMLP``), which a namespace built after it could not give."""
        if not st.dynamic:
            return
        strings: set[str] = set()
        for mod, chosen in st.stmts.items():
            idx = self.indexes.get(mod)
            if idx is not None:
                for i in chosen:
                    strings |= _name_strings(idx.stmts[i].code)
        for ent in sorted(st.dynamic):
            idx = self.load(ent[1])
            if idx is None:
                continue
            named = sorted(n for n in strings & self._defines(ent[1], idx)
                           if n not in st.namespaces[ent] and (ent, n) not in st.late)
            for name in named[:self.MAX_DYNAMIC_ATTRS]:
                trial = st.copy()
                try:
                    got = self.locate(ent[1], name)
                    if got is None or got[0] in _IMPORTS or got[0] in ("<module>", "<missing>"):
                        continue
                    self._materialize(got, name, trial, via)
                except (ClosureError, RecursionError):
                    continue
                trial.late[(ent, name)] = got
                st.__dict__.update(trial.__dict__)

    def _try_copy(self, module: str, name: str, st: _State, via: str, complete: bool = False) -> None:
        """Copy what ``name`` denotes in ``module`` too, when it can be copied (on a trial
        copy of the state, merged back on success). ``complete``: only when the copy adds no
        placeholder of a missing package (a timm-backed backbone would fail when built)."""
        trial = st.copy()
        try:
            got = self.locate(module, name)
            if got is not None and got[0] not in _IMPORTS:
                self._materialize(got, name, trial, via=via)
                if complete and (set(trial.missing) - set(st.missing) or self._needs_backend(got)):
                    return
                st.__dict__.update(trial.__dict__)
        except (ClosureError, RecursionError):
            pass


    def _materialize(self, ent: Entity, want: str, st: _State, via: str) -> str:
        """Make ``ent`` part of the closure; return the name it has there. ``st`` is updated
        in place (a nested import tried on a copy is merged back into it)."""
        if ent in st.names:
            return st.names[ent]
        kind, target = ent
        if kind == "<import>":
            name = st.claim(ent, want)
            st.imports[name] = f"import {target}" if name == target else f"import {target} as {name}"
            return name
        if kind == "<from>":
            name = st.claim(ent, want)
            mod, attr = target.split(":")
            st.imports[name] = f"from {mod} import {attr}" + ("" if attr == name else f" as {name}")
            return name
        if kind == "<missing>":
            name = st.claim(ent, want)
            maker = self._materialize((_SHIM + "curate.unavailable", "unavailable"), "unavailable", st, via)
            st.first_seen.setdefault(_SHIM + "curate.unavailable", len(st.first_seen))
            st.missing[name] = f"{name} = {maker}({target!r})"
            st.first_seen.setdefault(_MISSING + name, len(st.first_seen))
            st.file_deps.setdefault(_MISSING + name, set()).add(_SHIM + "curate.unavailable")
            return name
        if kind == "<module>":
            name = st.claim(ent, want)
            st.namespaces[ent] = {}
            self._materialize(("<import>", "types"), "types", st, via)
            st.first_seen.setdefault(_NS + target, len(st.first_seen))
            return name
        if kind == "<file>":
            name = st.claim(ent, want)
            st.missing[name] = f'{name} = globals().get("__file__", "")'
            st.first_seen.setdefault(_MISSING + name, len(st.first_seen))
            return name
        if kind == "<logger>":
            name = st.claim(ent, want)
            logging_name = self._materialize(("<import>", "logging"), "logging", st, via)
            st.missing[name] = f"{name} = {logging_name}.getLogger(__name__)"
            st.first_seen.setdefault(_MISSING + name, len(st.first_seen))
            return name
        module, name0 = ent
        idx = self.load(module)
        defining = self._defining(module, idx, name0)
        if self._library_logger(module, idx, defining):
            logger = ("<logger>", name0)
            st.names[ent] = self._materialize(logger, want, st, via)
            return st.names[ent]
        st.first_seen.setdefault(module, len(st.first_seen))
        new_stmts = [i for i in defining if i not in st.stmts.get(module, set())]
        twin = self._twin(module, name0, defining, want, st)
        if twin is not None:  # the same definition copied from another file: share it
            st.names[ent] = st.names[twin]
            return st.names[ent]
        # claim every name the copied statements define, so later readers find them
        for i in new_stmts:
            for d in idx.stmts[i].defines:
                if (module, d) not in st.names:
                    st.claim((module, d), want if d == name0 else d)
        if ent not in st.names:
            raise ClosureError("not_found", f"{name0} is not defined in {module}")
        self._copy(module, new_stmts, st, via, name0)
        if any(idx.stmts[i].kind == "assign" for i in new_stmts):
            self._registrations(module, name0, st, via)
        return st.names[ent]


    def _copy(self, module: str, new_stmts: list[int], st: _State, via: str, name0: str) -> None:
        """Copy statements ``new_stmts`` of ``module`` (their names already claimed) and
        everything they read."""
        idx = self.load(module)
        for i in new_stmts:
            st.stmts.setdefault(module, set()).add(i)
            st.chars += len(idx.stmts[i].code)
        if st.chars > MAX_CLOSURE_CHARS:
            raise ClosureError("closure_too_large", f"over {MAX_CLOSURE_CHARS:,} characters of copied "
                               f"source (reached through {via})")
        for i in new_stmts:
            stmt = idx.stmts[i]
            reads, exact = _global_reads(stmt.code)
            for used in sorted(reads):
                if stmt.kind == "assign" and used in stmt.defines and self._rebinding(module, idx, i, used, st, name0):
                    continue
                self._need_name(module, used, st, via=name0)
            # a chain matters only from a module alias of the source: most statements read
            # none, and their syntax tree (the costly part) is never built
            refs = st.refs.get(module, {})
            if exact and any(refs.get(r, ("",))[0] == "<module>" for r in reads):
                for chain in sorted(_attr_chains(stmt.code)):
                    self._need_attr(module, chain, st, via=name0)
                if "getattr(" in stmt.code:
                    for chain in sorted(_dynamic_getattrs(stmt.code)):
                        ent = self._need_attr(module, chain, st, via=name0)
                        if ent is not None and ent[0] == "<module>":
                            st.dynamic.add(ent)
            if stmt.kind == "class" and ("ClassVar" in stmt.code or "InitVar" in stmt.code):
                for used in sorted(_dataclass_markers(stmt.code) - reads):
                    self._need_name(module, used, st, via=name0)
            if stmt.kind == "class" and _MESSAGE_PASSING.search(stmt.code):
                for used in sorted(_capitalized(stmt.code) - reads):
                    if self._typing_name(module, used):
                        self._need_name(module, used, st, via=name0)
            if stmt.kind == "def" and "@" in stmt.code:
                self._defer_missing_decorators(module, i, st, name0)
            if "import" in stmt.code:
                got = self._nested_imports(module, i, st, via=name0)
                if got is not st:
                    st.__dict__.update(got.__dict__)

    def _defer_missing_decorators(self, module: str, i: int, st: _State, via: str) -> None:
        """A definition decorated with what a missing package provides (native-sparse-attention-
        pytorch's ``@triton.jit`` kernels, copied with the layer that calls them only when
        ``use_triton_kernel`` is set) would stop the whole file when the decorator runs; each
        such decorator is wrapped in the stand-in's ``deferred(lambda: ...)``, which binds the
        definition to an object raising that ``ImportError`` when used instead. Functions
        only: a class so decorated (incendio's ``@add_docstring``) is what the problem is
        about, and its file still stops, as ``import_missing``."""
        code = self.load(module).stmts[i].code
        refs = st.refs.get(module, {})
        # most decorators are the source's own or torch's: the tree is built only for the rest
        if not any(refs.get(n, ("",))[0] == "<missing>" for n in _DECORATED.findall(code)):
            return
        try:
            node = ast.parse(code).body[0]
        except (SyntaxError, IndexError):
            return
        missing = [d for d in getattr(node, "decorator_list", ())
                   if any(refs.get(n.id, ("",))[0] == "<missing>" for n in ast.walk(d) if isinstance(n, ast.Name))]
        if not missing:
            return
        wrap = self._materialize((_SHIM + "curate.unavailable", "deferred"), "deferred", st, via)
        lines = code.splitlines()
        edits = st.edits.setdefault((module, i), [])
        for d in missing:
            text = ast.get_source_segment(code, d)
            if text is None or d.lineno != d.end_lineno and any(
                    isinstance(n, ast.Constant) and isinstance(n.value, str) and n.lineno != n.end_lineno
                    for n in ast.walk(d)):
                continue  # a multi-line string in the decorator: its lines cannot be re-indented
            # ast's offsets count UTF-8 bytes, the edit's characters
            col = len(lines[d.lineno - 1].encode("utf-8")[:d.col_offset].decode("utf-8", "ignore"))
            end_col = len(lines[d.end_lineno - 1].encode("utf-8")[:d.end_col_offset].decode("utf-8", "ignore"))
            new = f"{wrap}(lambda: {text})".split("\n")
            edits.append((d.lineno, col, d.end_lineno, end_col, new))

    def _rebinding(self, module: str, idx: FileIndex, i: int, name: str, st: _State, via: str) -> bool:
        """``pad_sequence = partial(pad_sequence, batch_first=True)`` after ``from
        torch.nn.utils.rnn import pad_sequence``: as Python runs the file, the right-hand side reads
        the binding made before the statement, here the import, not the statement's own. The
        imported definition is copied (under another name where the statement's claims this
        one) and the statement's reads point to it. False where the statement is the first
        binding of ``name`` but nothing is imported under it (the reads stay its own)."""
        if any(j < i for j in self._defining(module, idx, name)) or name not in idx.imports:
            return False  # an earlier definition is copied with it, in order: Python's own reading
        try:
            ent = self._locate_import(idx, idx.imports[name], 0)
            tree = ast.parse(idx.stmts[i].code)
        except (ClosureError, RecursionError, SyntaxError):
            return False
        if ent is None or ent[0] in ("<module>", "<missing>"):
            return False
        loads = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
        if not loads:
            return False
        trial = st.copy()
        try:
            self._materialize(ent, name, trial, via)
        except (ClosureError, RecursionError):
            return False
        st.__dict__.update(trial.__dict__)
        _order_after(module, ent, st)
        ref = f"__curate_ref_{len(st.refmarks)}__"
        st.refmarks[ref] = ent
        st.edits.setdefault((module, i), []).extend(
            (n.lineno, n.col_offset, n.end_lineno, n.end_col_offset, [ref]) for n in loads)
        return True


    def _nested_imports(self, module: str, i: int, st: _State, via: str) -> _State:
        """Imports inside a copied statement (a ``try: from .fast_norm import ...`` block, an
        import in a method) cannot stay relative or point into the source: each becomes an
        assignment from the copied definition, or ``raise ImportError`` where the definition
        cannot be copied (so a ``try``/``except ImportError`` takes its fallback). Imports of
        run-time modules are kept, made absolute."""
        idx = self.load(module)
        edits = []
        code = idx.stmts[i].code
        for node in _import_nodes(code):
            if isinstance(node, ast.Import):
                st, lines = self._nested_module_import(node, code, st, via)
                if lines is not None:
                    edits.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, lines))
                continue
            lines = []
            for alias in node.names:
                if alias.name == "*":
                    lines = None
                    break
                local = alias.asname or alias.name
                b = Binding(node.module or "", alias.name, node.level)
                absmod = idx.resolve_module(b)
                if self.is_runtime(absmod):
                    lines.append(f"from {absmod} import {alias.name}" + ("" if local == alias.name else f" as {local}"))
                    continue
                try:
                    ent = self._locate_import(idx, b, 0)
                    if ent is None or ent[0] in ("<module>", "<missing>"):
                        raise ClosureError("import_missing", f"{absmod}.{alias.name}")
                    if ent in st.failed:
                        raise ClosureError("import_missing", f"{absmod}.{alias.name} (tried before)")
                    if ent not in st.names:  # already copied: nothing to try
                        trial = st.copy()
                        try:
                            self._materialize(ent, alias.name, trial, via)
                        except (ClosureError, RecursionError):
                            st.failed.add(ent)
                            raise
                        st = trial
                    if idx.stmts[i].kind == "block":  # runs at import: its definition comes first
                        _order_after(module, ent, st)
                    ref = f"__curate_ref_{len(st.refmarks)}__"
                    st.refmarks[ref] = ent
                    lines.append(f"{local} = {ref}")
                except (ClosureError, RecursionError):
                    # as Python raises it for a missing package: ``except ModuleNotFoundError:``
                    # fallbacks (``from apex.normalization import FusedLayerNorm``) catch it
                    shown = absmod + "." + alias.name
                    lines.append(f"raise ModuleNotFoundError({shown!r} + ' is not part of the problem')")
                    break
            if lines is not None:
                edits.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, lines))
        if edits:
            st.edits.setdefault((module, i), []).extend(edits)
        return st

    def _nested_module_import(self, node: ast.Import, code: str, st: _State, via: str) -> tuple[_State, list | None]:
        """``import pkg.sub as alias`` of a module of the source inside a copied statement
        (torch-geometric's ``aggregation_resolver``): ``alias`` becomes a namespace of the
        names the statement reads on it (``alias.SumAggregation``), as a top-level module alias
        does. Returns the state and the replacement lines, None to keep the import as it is
        (a run-time module, or a plain ``import x.y``, which fails as it would without the
        package)."""
        if all(not a.asname and not self.is_runtime(a.name) and shims.path(a.name) is not None for a in node.names):
            return self._nested_standin_import(node, code, st, via)
        if not all(a.asname and not self.is_runtime(a.name) and self.module_path(a.name) is not None
                   and not self._stand_in_only(a.name) for a in node.names):
            return st, None
        return self._bind_namespaces([(a.name, a.asname, a.name) for a in node.names], code, st, via,
                                     chains=False)

    def _nested_standin_import(self, node: ast.Import, code: str, st: _State, via: str) -> tuple[_State, list]:
        """``import librosa.filters`` inside a copied statement (auraloss imports its optional
        packages in ``__init__``), where the module has a stand-in: the top-level name becomes
        a namespace holding what the statement reads through it (``librosa.filters.mel``), as
        the same import at the top of a file does."""
        tops = [(a.name.split(".")[0], a.name.split(".")[0], a.name) for a in node.names]
        return self._bind_namespaces(tops, code, st, via, chains=True)

    def _bind_namespaces(self, binds: list[tuple[str, str, str]], code: str, st: _State, via: str,
                         chains: bool) -> tuple[_State, list]:
        """Bind each ``(module, name, as imported)`` of an import inside a copied statement to
        a namespace of the module holding what ``code`` reads through ``name``: its direct
        attributes, or with ``chains`` every dotted chain (``name.sub.attr``) through modules.
        Returns the state and the replacement lines; a module that cannot be copied ends the
        lines with a ``ModuleNotFoundError`` raise, as the missing package would."""
        lines = []
        for module, name, shown in binds:
            ent = ("<module>", module)
            trial = st.copy()
            try:
                self._materialize(ent, name, trial, via)
                pattern = rf"(?<![\w.]){re.escape(name)}((?:\.\w+)+)" if chains else \
                    rf"(?<![\w.]){re.escape(name)}\.(\w+)"
                for read in sorted(set(re.findall(pattern, code))):
                    got: Entity | None = ent
                    for attr in (read[1:].split(".") if chains else [read]):
                        if got is None or got[0] != "<module>":
                            break
                        got = self._namespace_attr(got, attr, trial, via)
            except (ClosureError, RecursionError):
                lines.append(f"raise ModuleNotFoundError({shown!r} + ' is not part of the problem')")
                break
            st = trial
            ref = f"__curate_ref_{len(st.refmarks)}__"
            st.refmarks[ref] = ent
            lines.append(f"{name} = {ref}")
        return st, lines

    def _twin(self, module: str, name: str, defining: list[int], want: str, st: _State) -> Entity | None:
        """The entity already holding ``want`` when it is defined by the same single statement
        text, reading the same things (every file's ``logger = logging.get_logger(__name__)``,
        helpers transformers copies between model files); else None."""
        other = st.taken.get(want)
        if other is None or other[0] in _IMPORTS or other[0] == module or len(defining) != 1:
            return None
        oidx = self.load(other[0])
        odef = self._defining(other[0], oidx, other[1]) if oidx else []
        code = self.load(module).stmts[defining[0]].code
        if len(odef) != 1 or oidx.stmts[odef[0]].code != code or other[1] != name:
            return None
        reads, _ = _global_reads(code)
        try:
            if any(self.locate(module, r) != self.locate(other[0], r) for r in reads if r != name):
                return None
        except ClosureError:
            return None
        return other

    def _need_name(self, module: str, used: str, st: _State, via: str) -> None:
        refs = st.refs.setdefault(module, {})
        if used in refs:
            return
        try:
            ent = self.locate(module, used)
        except ClosureError as exc:
            raise ClosureError(exc.reason, f"{exc.detail} (needed for {via})") from None
        if ent is None and used == "__file__":
            # read at import time to find data files next to the module (torchvision's
            # extension loader, modelscope's index): an exec-based harness defines no
            # `__file__`, so the problem binds it to "" there (data files stay missing)
            ent = ("<file>", "__file__")
        if ent is None and used not in _BUILTINS:
            ent = self._known_name(used)
        if ent is None:
            if used not in _BUILTINS:
                st.unresolved.add(f"{module}.{used}")
            return
        refs[used] = ent
        self._materialize(ent, used, st, via)
        _order_after(module, ent, st)

    def _need_attr(self, module: str, chain: tuple[str, ...], st: _State, via: str) -> Entity | None:
        """``root.a.b`` where ``root`` aliases a module of the source: copy what the chain
        reaches, binding each module on the way to a namespace (``packaging.version.parse``).
        Returns what the chain denotes, None where it leaves the modules of the source."""
        ent = st.refs.get(module, {}).get(chain[0])
        for attr in chain[1:]:
            if ent is None or ent[0] != "<module>":
                return None
            ent = self._namespace_attr(ent, attr, st, via)
        return ent

    def _namespace_attr(self, ent: Entity, attr: str, st: _State, via: str) -> Entity | None:
        """Put ``attr`` of the module namespace ``ent`` into the closure; what it denotes, or
        None where the module has no such name."""
        target = ent[1]
        fields = st.namespaces[ent]
        got = fields.get(attr)
        if got is None:
            sub = f"{target}.{attr}"
            got = self.locate(_SHIM + target if self._shim_has(target, attr) else target, attr)
            if got is None and self.module_path(sub) is not None:
                got = ("<module>", sub)
            if got is None and self._stand_in_only(target):
                # a package only partly stood in for (``import scipy`` with stand-ins for
                # scipy.signal alone): the rest of it stays a placeholder raising ImportError
                # when used, as the whole package was before it had a stand-in
                got = ("<missing>", sub)
            if got is None:
                st.unresolved.add(f"{target}.{attr}")
                return None
            fields[attr] = got
            self._materialize(got, attr, st, via)
            dep = _dep_node(got, st)
            if dep is not None:
                st.file_deps.setdefault(_NS + target, set()).add(dep)
        return got



def module_name(root: Path, path: Path) -> tuple[str, bool]:
    """Dotted module name of ``path`` below ``root`` and whether it is a package ``__init__``."""
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    is_pkg = parts[-1] == "__init__"
    if is_pkg:
        parts = parts[:-1]
    return ".".join(parts), is_pkg
