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
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
import symtable
import sys
import textwrap
from collections import deque
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import libcst as cst
from libcst.metadata import GlobalScope, MetadataWrapper, ScopeProvider

from curate.mine import shims
from curate.mine.index import Binding, FileIndex, index_source

#: What a problem may import: the standard library, torch (with typing_extensions, which it
#: requires) and numpy, which every kernel-evaluation environment has (KernelBench's, and our
#: GPU workers', which import torch, triton, numpy and the standard library alone).
RUNTIME_MODULES = frozenset(sys.stdlib_module_names) | {"torch", "typing_extensions", "numpy"}
RESERVED = {"Model", "get_inputs", "get_init_inputs"}
#: Characters of copied source past which a closure is rejected (`closure_too_large`): diffusers'
#: ModelMixin subclasses pull in the whole library (25 MB), no problem a model can be given.
MAX_CLOSURE_CHARS = 300_000
_BUILTINS = set(dir(builtins)) | {"__file__", "__name__", "__doc__", "__class__", "__spec__", "__builtins__"}
_SHIM = "<shim>"  # prefix of the pseudo-module a stand-in is indexed under
_NS = "<ns>"  # prefix of a namespace's node in the emission order
_MISSING = "<miss>"  # prefix of a placeholder's node in the emission order
_IMPORTS = ("<import>", "<from>", "<module>", "<missing>", "<logger>", "<file>")
# `logger = get_logger(__name__)`, `_LOG = logging_utils.get_logger(__name__, "DEBUG")`
_LOGGER_STMT = re.compile(r"\s*_*(?:logger|log|LOGGER|LOG|Logger)\w*\s*(?::[^=]+)?=\s*([\w.]*(?:log|Log|LOG)\w*)"
                          r"\([^()]*\)\s*$")

# An entity is what a name denotes: (module, name) for a definition in the source or a shim,
# ("<import>", "a.b") and ("<from>", "a:b") for run-time `import a.b` / `from a import b`,
# ("<module>", module) for an alias of a module of the source (bound to a namespace).
Entity = tuple[str, str]


class ClosureError(Exception):
    """The class cannot be made self-contained. ``reason`` is a short category."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass
class Closure:
    """The self-contained source of a class and everything it needs (no ``Model`` yet).
    """

    source: str
    class_name: str
    files: list[str]
    unresolved: list[str] = field(default_factory=list)


class Resolver:
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

    # -- files ---------------------------------------------------------------------
    def module_path(self, module: str) -> Path | None:
        """The source file of ``module``, or its stand-in when the source lacks it."""
        if module.startswith(_SHIM):
            return shims.path(module[len(_SHIM):])
        for root in [self.root] + [r for r, _ in self.dependencies]:
            base = root.joinpath(*module.split("."))
            for p in (base.with_suffix(".py"), base / "__init__.py"):
                if p.is_file():
                    return p
        return shims.path(module) if shims.overrides(module) else None

    def provenance(self, module: str) -> str | None:
        """The label of the dependency ``module`` comes from, None for the source itself."""
        if module.startswith((_SHIM, _NS, _MISSING)):
            return None
        path = self.module_path(module)
        if path is None or path.is_relative_to(self.root):
            return None
        return next((label for root, label in self.dependencies if path.is_relative_to(root)), None)

    def load(self, module: str) -> FileIndex | None:
        if module in self.indexes:
            return self.indexes[module]
        path = self.module_path(module)
        idx = None
        if path is not None:
            try:
                idx = index_source(path.read_text(errors="replace"), module, path.name == "__init__.py")
            except Exception:
                idx = None
        self.indexes[module] = idx
        return idx

    def shim(self, module: str) -> FileIndex | None:
        """The stand-in for ``module`` (indexed as ``<shim>module``), if there is one."""
        return self.load(_SHIM + module) if shims.overrides(module) else None

    def _defines(self, module: str, idx: FileIndex) -> set[str]:
        got = self._defs.get(module)
        if got is None:
            got = self._defs[module] = {n for s in idx.stmts for n in s.defines}
        return got

    def _defining(self, module: str, idx: FileIndex, name: str) -> list[int]:
        """Indexes of the statements of ``module`` that define ``name``, in order (a new list)."""
        by_name = self._stmts_of.get(module)
        if by_name is None:
            by_name = self._stmts_of[module] = {}
            for i, s in enumerate(idx.stmts):
                for n in dict.fromkeys(s.defines):
                    by_name.setdefault(n, []).append(i)
        return list(by_name.get(name, ()))

    def _shim_has(self, module: str, name: str) -> bool:
        """Whether a stand-in for ``module`` defines or imports ``name``."""
        stand_in = self.shim(module)
        return stand_in is not None and (name in stand_in.imports or name in self._defines(_SHIM + module, stand_in))

    def _stand_in_only(self, module: str) -> bool:
        """Whether ``module`` exists only as a stand-in (no source or dependency file)."""
        path = self.module_path(module)
        return path is not None and path.is_relative_to(shims.path("curate.unavailable").parent)

    def is_runtime(self, module: str) -> bool:
        return module.split(".")[0] in self.runtime

    # -- nn.Module detection -------------------------------------------------------
    def is_module_class(self, module: str, name: str, _depth: int = 0) -> bool:
        """Whether class ``name`` of ``module`` derives from ``torch.nn.Module``."""
        key = (module, name)
        if key in self._module_cache:
            return self._module_cache[key]
        self._module_cache[key] = False  # cycle guard
        result = False
        idx = self.load(module)
        if idx is not None and name in idx.classes and _depth < 20:
            result = any(self._base_is_module(idx, b, _depth) for b in idx.classes[name].bases)
        self._module_cache[key] = result
        return result

    def _base_is_module(self, idx: FileIndex, base: str, depth: int) -> bool:
        if not base:
            return False
        head, _, rest = base.partition(".")
        if head in idx.classes and not rest:
            return self.is_module_class(idx.module, head, depth + 1)
        b = idx.imports.get(head)
        if b is None:
            return False
        absmod = idx.resolve_module(b)
        if b.attr is None:  # module alias: nn.Module, torch.nn.Conv2d, layers.Foo
            parts = (absmod + "." + rest) if rest else absmod
            mod, _, attr = parts.rpartition(".")
        else:
            if rest:
                mod, _, attr = f"{absmod}.{b.attr}.{rest}".rpartition(".")
            else:
                mod, attr = absmod, b.attr
        if self.is_runtime(mod):
            return _runtime_is_module(mod, attr)
        target = self.load(mod)
        if target is None:
            return False
        if attr in target.classes:
            return self.is_module_class(mod, attr, depth + 1)
        if attr in target.imports:  # re-export, e.g. from a package __init__
            return self._base_is_module(target, attr, depth + 1)
        return False

    # -- locating what a name denotes ----------------------------------------------
    def locate(self, module: str, name: str, _depth: int = 0, _starred: set | None = None) -> Entity | None:
        """The entity ``name`` denotes at the top of ``module`` (None: not found there).

        An import of a module absent at run time denotes ``("<missing>", module)``: the
        closure binds it to a placeholder that raises ``ImportError`` when used.
        """
        idx = self.load(module)
        if idx is None or _depth > 30:
            return None
        if name in self._defines(module, idx):
            return (module, name)
        if name in idx.imports:
            return self._locate_import(idx, idx.imports[name], _depth)
        # star imports that star-import each other (fastai, read by tsai) made this search
        # exponential (seconds per name): a module searched once for the name is not again
        starred = set() if _starred is None else _starred
        for star in idx.star_imports:
            target = idx.resolve_module(star)
            if target in starred or self.is_runtime(target):
                continue
            starred.add(target)
            ent = self.locate(target, name, _depth + 1, starred) if self.load(target) is not None else None
            if ent is not None:
                return ent
        return None

    def _locate_import(self, idx: FileIndex, b: Binding, depth: int) -> Entity | None:
        absmod = idx.resolve_module(b)
        if b.attr is None:
            if self.is_runtime(absmod):
                return ("<import>", absmod)
            if self.module_path(absmod) is not None:
                return ("<module>", absmod)
            return ("<missing>", absmod)
        if self._shim_has(absmod, b.attr):
            return self.locate(_SHIM + absmod, b.attr, depth + 1)
        sub = f"{absmod}.{b.attr}"
        if self.is_runtime(absmod):
            return ("<from>", f"{absmod}:{b.attr}")
        # `from pkg import name`: what pkg/__init__ binds wins over a submodule of that name
        pkg = self.load(absmod)
        ent = self.locate(absmod, b.attr, depth + 1) if pkg is not None else None
        if ent is not None:
            return ent
        if self.module_path(sub) is not None:
            return ("<module>", sub)
        if pkg is not None and b.attr in pkg.lazy_imports and depth < 30:  # a lazy __init__'s TYPE_CHECKING import
            return self._locate_import(pkg, pkg.lazy_imports[b.attr], depth + 1)
        fallback = self._fallback(absmod, b.attr, depth)
        if fallback is not None:
            return fallback
        # a stand-in covering part of a package, or a module without the name (a lazy
        # ``__init__`` such as transformers', a name a later release removed): a placeholder
        # that raises ImportError when used
        return ("<missing>", sub)

    def _fallback(self, module: str, name: str, depth: int = 0) -> Entity | None:
        """``name`` of the fallback stand-in for ``module`` (:data:`shims.FALLBACKS`), when the
        module is absent from the source and its dependencies and the stand-in defines it."""
        if module not in shims.FALLBACKS or self.module_path(module) is not None:
            return None
        idx = self.load(_SHIM + module)
        if idx is None or name not in self._defines(_SHIM + module, idx) | set(idx.imports):
            return None
        return self.locate(_SHIM + module, name, depth + 1)

    def _known_name(self, name: str) -> Entity | None:
        """What a global read that nothing in the file binds is taken to mean when it is a
        well-known library name whose import was lost (``rearrange``, ``DropPath``,
        ``ConvModule``: :data:`shims.KNOWN_NAMES`): the stand-in's definition."""
        module = shims.KNOWN_NAMES.get(name)
        if module is None or shims.path(module) is None:
            return None
        idx = self.load(_SHIM + module)
        if idx is None or name not in self._defines(_SHIM + module, idx) | set(idx.imports):
            return None
        return self.locate(_SHIM + module, name)

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
        self._auto_submodels(st, class_name)
        return self._emit(st, class_name)

    def _auto_submodels(self, st: _State, via: str) -> None:
        """Copy the sub-models a transformers composite builds through the auto classes.

        When the closure holds the stand-ins of ``AutoModel``/``AutoBackbone``/``AutoConfig``/
        ``CONFIG_MAPPING``, the model types its copied code names (``SubConfigSpec(model_type=
        "llama")``, ``CONFIG_MAPPING["resnet"]``, ``{"model_type": "dinov2"}``,
        ``default_config_type="hgnet_v2"``) get their configuration class, and their base model
        or backbone class, copied from transformers (``models/<type>/configuration_<type>.py``,
        ``modeling_<type>.py``, named by its auto mappings); so does the model of each
        configuration class copied whose model is built through ``AutoModel``
        (``Qwen3_5VisionConfig`` -> ``Qwen3_5VisionModel``). Repeated for what those copies
        name; a class that cannot be copied (too large, another missing import) is left out
        and its auto class raises ``ImportError`` when asked for it."""
        auto = {n for (m, n) in st.names if m == _SHIM + "transformers.models.auto"}
        if not auto & {"AutoModel", "AutoBackbone", "AutoConfig", "CONFIG_MAPPING"}:
            return
        maps = self._auto_mappings()
        if not maps:
            return
        configs, models, backbones, special = maps
        done: set[str] = set()
        scanned: dict[str, set[int]] = {}  # each round reads only the statements copied since
        for _ in range(3):
            types, own = set(), set()
            for mod, stmts in list(st.stmts.items()):
                if not mod.startswith("transformers."):
                    continue
                idx = self.load(mod)
                fresh = stmts - scanned.setdefault(mod, set())
                scanned[mod] |= fresh
                for i in fresh:
                    code = idx.stmts[i].code
                    types |= set(_SUB_TYPE.findall(code))
                    if idx.stmts[i].kind == "class":
                        own |= set(_OWN_TYPE.findall(code))
            want = {t: [n for n in (backbones.get(t) if "AutoBackbone" in auto else None, models.get(t)) if n]
                    for t in sorted(types - done)}
            if "AutoModel" in auto:
                want.update({t: [models[t]] for t in sorted(own - types - done) if t in models})
            done |= types | own
            if not want:
                return
            for t, names in want.items():
                mod, conf = self._auto_files(t, special)
                for name in names:
                    self._try_copy(mod, name, st, via, complete=True)
                # a type whose models could not be copied keeps no configuration either, so
                # the composite falls back to its default sub-model (DETR: ResNet, not timm)
                if t in configs and (not names or any((mod, n) in st.names for n in names)):
                    self._try_copy(conf, configs[t], st, via, complete=True)

    def _auto_files(self, model_type: str, special: dict) -> tuple[str, str]:
        """The modeling and configuration modules of ``model_type``: ``models/<folder>/
        modeling_<type>.py`` where the folder holds several (``rt_detr_resnet`` in ``rt_detr``),
        else ``modeling_<folder>.py``."""
        folder = special.get(model_type, model_type.replace("-", "_"))
        out = []
        for kind in ("modeling", "configuration"):
            own = f"transformers.models.{folder}.{kind}_{model_type.replace('-', '_')}"
            out.append(own if self.module_path(own) is not None else f"transformers.models.{folder}.{kind}_{folder}")
        return out[0], out[1]

    def _auto_mappings(self) -> tuple[dict, dict, dict, dict] | None:
        """transformers' model type -> configuration class, base model class, backbone class,
        and model folder (where it differs from the type), read from its auto mappings."""
        paths = [self.module_path(f"transformers.models.auto.{m}") for m in ("auto_mappings", "modeling_auto")]
        if any(p is None or p.is_relative_to(shims.path("curate.unavailable").parent) for p in paths):
            return None
        return _read_auto_mappings(str(paths[0]), str(paths[1]))

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

    def _needs_backend(self, ent: Entity) -> bool:
        """Whether class ``ent`` asks transformers for another package when built
        (``requires_backends(self, "timm")``): a problem cannot have it."""
        idx = self.load(ent[0])
        info = idx.classes.get(ent[1]) if idx is not None else None
        return info is not None and "requires_backends(" in idx.stmts[info.stmt].code

    def _passed_classes(self, module: str, class_name: str) -> list[str]:
        """Classes of the module that its own code passes to ``class_name`` (the factories
        ``senet154()`` -> ``SENet(SEBottleneck, [3, 8, 36, 3], ...)``, ``resnet18()`` ->
        ``ResNet(BasicBlock, ...)``): the building blocks a ``block`` parameter takes, which the
        class itself never names. At most four, in source order."""
        idx = self.load(module)
        out: list[str] = []
        params = self._init_params(module, class_name)
        for stmt in idx.stmts:
            if class_name in stmt.defines or not (f"{class_name}(" in stmt.code or any(
                    f"{p}=" in stmt.code for p in params)):
                continue
            try:
                tree = ast.parse(textwrap.dedent(stmt.code))
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                if isinstance(node.func, ast.Name) and node.func.id == class_name:
                    passed = node.args + [k.value for k in node.keywords]
                else:  # timm's ``model_args = dict(block=BasicBlock, layers=(2, 2, 2, 2))``
                    passed = [k.value for k in node.keywords if k.arg in params]
                for arg in passed:
                    if isinstance(arg, ast.Name) and arg.id in idx.classes and arg.id not in out + [class_name]:
                        out.append(arg.id)
        return out[:4]

    def _init_params(self, module: str, class_name: str) -> set[str]:
        """Names of the parameters of ``class_name.__init__`` in ``module`` named for a class
        they take (``block``, ``block_fn``, ``layer_cls``, ``cell``, ``stem``, ``unit``)."""
        init = self._init_def(module, class_name)
        if init is None:
            return set()
        return {a.arg for a in init.args.args[1:] + init.args.kwonlyargs
                if re.search(r"(^|_)(block|block_fn|block_type|block_cls|layer_cls|cell|stem|unit)$", a.arg)}

    def _init_def(self, module: str, class_name: str) -> ast.FunctionDef | None:
        """The parsed ``__init__`` of class ``class_name`` of ``module``, or None (no such
        class, no ``__init__`` of its own, or source that does not parse)."""
        idx = self.load(module)
        try:
            code = idx.stmts[idx.classes[class_name].stmt].code
        except (KeyError, IndexError):
            return None
        return _parsed_init(code)

    def _init_configs(self, module: str, class_name: str) -> list[str]:
        """Configuration classes the class's ``__init__`` takes, which annotations alone do not
        pull in: names in its parameters' annotations, or for an unannotated ``config``-like
        parameter the ``*Config`` name of the file closest to the class's name."""
        idx = self.load(module)
        init = self._init_def(module, class_name)
        if init is None:
            return []
        visible = self._defines(module, idx) | set(idx.imports)
        out: list[str] = []
        for arg in init.args.args[1:] + init.args.kwonlyargs:
            names = [n.id for n in ast.walk(arg.annotation) if isinstance(n, ast.Name)] if arg.annotation else []
            names += [n.value for n in ast.walk(arg.annotation) if isinstance(n, ast.Constant)
                      and isinstance(n.value, str) and n.value.isidentifier()] if arg.annotation else []
            hits = [n for n in names if n in visible and re.search(r"(Config|Args|Cfg|Params)$", n)]
            if not hits and arg.annotation is None and re.search(r"(^|_)(config|cfg|args)$", arg.arg):
                configs = [n for n in visible if n.endswith("Config")]
                if configs:
                    hits = [max(configs, key=lambda n: (_common_prefix(n, class_name), -len(n)))]
            out += [h for h in hits if h not in out]
        return out

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

    def _library_logger(self, module: str, idx: FileIndex, defining: list[int]) -> bool:
        """Whether the definition is a module logger made by the source's own logging helper
        (``logger = get_logger(__name__)``, ``get_logger(log_level=logging.WARNING)``). Such helpers set up handlers, log folders
        (super-gradients makes ``~/sg_logs``) and environment reads, none of it part of a
        problem: the logger becomes the standard library's ``logging.getLogger(__name__)``.
        Helpers with a stand-in (transformers' logger warns once) are kept."""
        if module.startswith(_SHIM) or len(defining) != 1 or idx.stmts[defining[0]].kind != "assign":
            return False
        m = _LOGGER_STMT.match(idx.stmts[defining[0]].code)
        if m is None:
            return False
        head = m.group(1).split(".")[0]
        try:
            got = self.locate(module, head)
        except (ClosureError, RecursionError):
            return False
        return got is not None and got[0] not in _IMPORTS and not got[0].startswith(_SHIM)

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
            if stmt.kind == "class" and _MESSAGE_PASSING.search(stmt.code):
                for used in sorted(_capitalized(stmt.code) - reads):
                    if self._typing_name(module, used):
                        self._need_name(module, used, st, via=name0)
            if "import" in stmt.code:
                got = self._nested_imports(module, i, st, via=name0)
                if got is not st:
                    st.__dict__.update(got.__dict__)

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

    def _typing_name(self, module: str, name: str) -> bool:
        """Whether ``name`` at the top of ``module`` is a ``typing`` construct, ``torch``'s
        ``Tensor`` or a short type alias (``OptTensor = Optional[Tensor]``): copied for the
        annotations of message-passing layers, which torch_geometric's ``MessagePassing``
        evaluates when built (annotations elsewhere pull in nothing)."""
        try:
            ent = self.locate(module, name)
        except (ClosureError, RecursionError):
            return False
        if ent is None:
            return False
        if ent[0] == "<from>":
            return ent[1].split(":")[0] in ("typing", "typing_extensions", "torch")
        if ent[0] in _IMPORTS or ent[0].startswith(_SHIM):
            return False
        idx = self.load(ent[0])
        stmts = [idx.stmts[i] for i in self._defining(ent[0], idx, ent[1])] if idx else []
        return bool(stmts) and all(t.kind == "assign" and len(t.code) < 200 and re.search(
            r"\b(Optional|Union|Tuple|List|Dict|Callable)\[", t.code) for t in stmts)

    def _registrations(self, module: str, name: str, st: _State, via: str) -> None:
        """Copy the top-level statements of ``module`` that register entries into the object
        ``name`` binds: ``Act.add_factory_class("ELU", nn.ELU)`` and functions or classes
        decorated ``@Act.factory_function("swish")`` (monai's layer factories). Nothing reads
        them by name, yet ``Act.PRELU`` fails without them. Each is tried on a copy of the
        state and left out when it cannot be copied."""
        idx = self.load(module)
        pattern = re.compile(rf"(?:@[ \t]*)?{re.escape(name)}[ \t]*\.")
        for j, s in enumerate(idx.stmts):
            if j in st.stmts.get(module, ()) or s.kind not in ("call", "def", "class") or name not in s.code:
                continue
            first = next((ln.lstrip() for ln in s.code.splitlines()
                          if ln.strip() and not ln.lstrip().startswith("#")), "")
            if not pattern.match(first) or first.startswith("@") is (s.kind == "call"):
                continue
            trial = st.copy()
            try:
                for d in s.defines:
                    if (module, d) not in trial.names:
                        trial.claim((module, d), d)
                self._copy(module, [j], trial, via, name)
            except (ClosureError, RecursionError):
                continue
            st.__dict__.update(trial.__dict__)

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
                    lines.append(f"raise ImportError({absmod + '.' + alias.name!r} + ' is not part of the problem')")
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
        if not all(a.asname and not self.is_runtime(a.name) and self.module_path(a.name) is not None
                   and not self._stand_in_only(a.name) for a in node.names):
            return st, None
        lines = []
        for alias in node.names:
            ent = ("<module>", alias.name)
            trial = st.copy()
            try:
                self._materialize(ent, alias.asname, trial, via)
                for attr in sorted(set(re.findall(rf"(?<![\w.]){re.escape(alias.asname)}\.(\w+)", code))):
                    self._namespace_attr(ent, attr, trial, via)
            except (ClosureError, RecursionError):
                lines.append(f"raise ImportError({alias.name!r} + ' is not part of the problem')")
                break
            st = trial
            ref = f"__curate_ref_{len(st.refmarks)}__"
            st.refmarks[ref] = ent
            lines.append(f"{alias.asname} = {ref}")
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

    def _need_attr(self, module: str, chain: tuple[str, ...], st: _State, via: str) -> None:
        """``root.a.b`` where ``root`` aliases a module of the source: copy what the chain
        reaches, binding each module on the way to a namespace (``packaging.version.parse``)."""
        ent = st.refs.get(module, {}).get(chain[0])
        for attr in chain[1:]:
            if ent is None or ent[0] != "<module>":
                return
            ent = self._namespace_attr(ent, attr, st, via)

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


#: model types a composite configuration or its code names for a sub-model
_SUB_TYPE = re.compile(r"""(?:\bmodel_type=|config_type=|["']model_type["']:\s*|CONFIG_MAPPING\[)\s*["']([\w-]+)["']""")
#: a configuration class's own model type (``model_type = "qwen3_5_vision"``)
_OWN_TYPE = re.compile(r"""^\s+model_type\s*(?::[^=]+)?\s=\s*["']([\w-]+)["']""", re.M)


@lru_cache(maxsize=4)
def _read_auto_mappings(mappings_path: str, modeling_path: str) -> tuple[dict, dict, dict, dict]:
    """The ``OrderedDict([(type, name), ...])`` tables of transformers' auto mappings files."""
    tables: dict[str, dict] = {}
    for path in (mappings_path, modeling_path):
        try:
            tree = ast.parse(Path(path).read_text(errors="replace"))
        except (OSError, SyntaxError):
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and isinstance(node.value, ast.Call) and node.value.args:
                try:
                    pairs = ast.literal_eval(node.value.args[0])
                    tables[node.targets[0].id] = {k: v for k, v in pairs if isinstance(v, str)}
                except (ValueError, TypeError, SyntaxError):
                    continue
    return (tables.get("CONFIG_MAPPING_NAMES", {}), tables.get("MODEL_MAPPING_NAMES", {}),
            tables.get("MODEL_FOR_BACKBONE_MAPPING_NAMES", {}), tables.get("SPECIAL_MODEL_TYPE_TO_MODULE_NAME", {}))


@lru_cache(maxsize=16)  # the closure of one class reads its __init__ for configurations and block classes
def _parsed_init(code: str) -> ast.FunctionDef | None:
    """The ``__init__`` defined in the class statement ``code``, parsed; None without one."""
    if "__init__" not in code:  # a fifth of transformers' classes: no tree to build
        return None
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    cls = tree.body[0] if tree.body and isinstance(tree.body[0], ast.ClassDef) else None
    return next((b for b in cls.body if isinstance(b, ast.FunctionDef) and b.name == "__init__"), None) \
        if cls else None


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


def module_name(root: Path, path: Path) -> tuple[str, bool]:
    """Dotted module name of ``path`` below ``root`` and whether it is a package ``__init__``."""
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    is_pkg = parts[-1] == "__init__"
    if is_pkg:
        parts = parts[:-1]
    return ".".join(parts), is_pkg
