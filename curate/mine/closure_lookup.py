"""Name resolution across a source's files: module paths, indexes (stand-ins included),
where a name is defined (through imports, re-exports and star imports) and whether a class
is an ``nn.Module``."""

from __future__ import annotations

from pathlib import Path

from curate.mine import shims
from curate.mine.closure_source import _runtime_is_module
from curate.mine.closure_types import Entity, _MISSING, _NS, _SHIM
from curate.mine.index import Binding, FileIndex, index_source


class _Lookup:
    """Name resolution of a :class:`curate.mine.closure.Resolver`."""

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
