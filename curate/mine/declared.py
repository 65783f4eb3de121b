"""A source's declared dependencies, followed when a placeholder is what failed.

A class that imports from a package other than torch gets a placeholder for each name it
takes from it (:mod:`curate.mine.shims.unavailable`), so code that only mentions the package
still runs. When the class is rejected and its closure holds such placeholders, the mine
stage tries it a second time with the code of those packages copied in, where the source
declares them as dependencies:

- a ``pypi`` source: its metadata's ``Requires-Dist`` (not the ones behind an ``extra``);
- a ``dir`` or ``git`` source: ``requirements.txt`` and ``pyproject.toml``'s
  ``[project] dependencies``;

and, declared or not, the model libraries of :data:`WELL_KNOWN` (torchvision, timm). A
placeholder's package is matched to a declared distribution by name (``torch_einops_utils``:
``torch-einops-utils``) or by prefix (``pyro``: ``pyro-ppl``); the distribution is
downloaded from PyPI (the release it is pinned to, ``==``, else its newest; kept in the cache;
the version is written into the problem like a manifest ``deps`` entry's) and used only when
it holds that package. The second try replaces the rejection only when it keeps the class:
following a framework's code (a metaclass registry, a class over the closure size limit)
never loses a class the placeholders let run.
"""

from __future__ import annotations

import logging
import re
import tomllib
from pathlib import Path
from typing import Iterable

from curate.mine.closure import Resolver
from curate.mine.closure_types import RUNTIME_MODULES, ClosureError
from curate.mine.deps import provenance_label
from curate.mine.sources import Source, SourceUnavailable, resolve

log = logging.getLogger(__name__)

_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
#: a placeholder's binding in a closure (:meth:`curate.mine.closure.Resolver._materialize`)
_PLACEHOLDER = re.compile(r"^\w+ = \w*unavailable\w*\('([A-Za-z_]\w*)", re.M)
#: shortest package name matched by prefix (``pyro`` in ``pyro-ppl``): shorter ones match too much
_MIN_PREFIX = 4
#: model libraries followed even where a source does not declare them: research code imports
#: their backbones and layers (``torchvision.models.resnet50``, ``timm.layers.DropPath``) without
#: a requirements file, or with one that omits them
WELL_KNOWN = ("torchvision", "timm")


def normalized(name: str) -> str:
    """A distribution or package name compared as PyPI does (PEP 503), with ``_`` for ``-``."""
    return re.sub(r"[-_.]+", "_", name).lower()


#: an exact pin: ``dependencies (==2.0.1)``, ``dependencies==2.0.1``
_PIN = re.compile(r"^\(?\s*==\s*([\w.!+-]+)\s*\)?$")


def _requirements(lines: Iterable[str]) -> list[tuple[str, str | None]]:
    """``(name, exact version or None)`` of each requirement line that applies without an extra."""
    out = []
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith(("-", "git+", "http:", "https:", "file:")):
            continue
        req, _, marker = line.partition(";")
        if "extra" in marker:  # an optional feature's dependency
            continue
        m = _NAME.match(req)
        if m:
            pin = _PIN.match(req[m.end():].strip())
            out.append((m.group(1), pin.group(1) if pin else None))
    return out


def _declared(source: Source) -> list[tuple[str, str | None]]:
    lines: list[str] = []
    if source.kind == "pypi":
        for meta in list(source.root.glob("*.dist-info/METADATA")) + list(source.root.glob("PKG-INFO")):
            text = meta.read_text(errors="replace").split("\n\n", 1)[0]  # the headers, not the description
            lines += [ln.split(":", 1)[1] for ln in text.splitlines() if ln.startswith("Requires-Dist:")]
    elif source.kind in ("dir", "git"):
        req = source.root / "requirements.txt"
        if req.is_file():
            lines += req.read_text(errors="replace").splitlines()
        pyproject = source.root / "pyproject.toml"
        if pyproject.is_file():
            try:
                deps = tomllib.loads(pyproject.read_text(errors="replace")).get("project", {}).get("dependencies")
            except tomllib.TOMLDecodeError:
                deps = None
            lines += [d for d in deps or () if isinstance(d, str)]
    runtime = {normalized(m) for m in RUNTIME_MODULES}
    return [(n, v) for n, v in _requirements(lines) if normalized(n) not in runtime]


def declared_requirements(source: Source) -> list[str]:
    """Distribution names ``source`` declares as its run-time dependencies, in declared order,
    without torch and the other modules every problem may import; ``[]`` when it declares
    none or its metadata cannot be read."""
    return list(dict.fromkeys(n for n, _ in _declared(source)))


def pinned_versions(source: Source) -> dict[str, str]:
    """``{normalized name: version}`` of the declared dependencies pinned to one release
    (``dependencies==2.0.1``): that release is the one downloaded, not the newest."""
    return {normalized(n): v for n, v in _declared(source) if v}


def placeholder_packages(closure_source: str) -> set[str]:
    """Top-level packages whose names ``closure_source`` binds to placeholders
    (``safe_cat = unavailable('torch_einops_utils.safe_cat')``: ``torch_einops_utils``)."""
    return set(_PLACEHOLDER.findall(closure_source))


def provider(package: str, requirements: Iterable[str]) -> str | None:
    """The declared distribution that would provide top-level ``package``: the same name, else
    the one whose name starts with it (at least :data:`_MIN_PREFIX` characters, ``pyro`` in
    ``pyro-ppl``); None."""
    want = normalized(package)
    reqs = list(requirements)
    for r in reqs:
        if normalized(r) == want:
            return r
    if len(want) >= _MIN_PREFIX:
        for r in reqs:
            if normalized(r).startswith(want):
                return r
    return None


def _holds(root: Path, package: str) -> bool:
    return (root / package / "__init__.py").is_file() or (root / f"{package}.py").is_file() \
        or (root / package).is_dir() and any((root / package).glob("*.py"))


class DeclaredDependencies:
    """The declared dependencies of the sources of one run, downloaded on first need.

    Args:
        cache: the mine cache (downloads go to its ``pypi`` folder, like ``pypi`` sources).
    """

    def __init__(self, cache: Path):
        self.cache = cache
        self._roots: dict[tuple[str, str, str], tuple[Path, str] | None] = {}

    def roots_for(self, source: Source, packages: Iterable[str]) -> list[tuple[Path, str]]:
        """``(root, "name version (licence)")`` of the declared distributions holding
        ``packages`` (placeholder packages of a closure), each downloaded once; a package no
        declared distribution provides, or whose download fails (logged), is left out."""
        declared = _declared(source)  # the metadata read once for both
        reqs = list(dict.fromkeys(n for n, _ in declared))
        pins = {normalized(n): v for n, v in declared if v}
        out: list[tuple[Path, str]] = []
        for package in sorted(set(packages)):
            dist = provider(package, reqs) or (package if package in WELL_KNOWN else None)
            if dist is None:
                continue
            version = pins.get(normalized(dist))
            key = (normalized(dist), version or "", package)
            if key not in self._roots:
                self._roots[key] = self._fetch(dist, version, package)
            got = self._roots[key]
            if got is not None and got not in out:
                out.append(got)
        return out

    def _fetch(self, dist: str, version: str | None, package: str) -> tuple[Path, str] | None:
        try:
            src = resolve({"kind": "pypi", "name": dist, **({"version": version} if version else {})}, self.cache)
        except SourceUnavailable as exc:
            log.warning("declared dependency %s unavailable: %s", dist, exc)
            return None
        # an sdist's packages may sit in a ``src`` folder
        root = next((r for r in (src.root, src.root / "src") if _holds(r, package)), None)
        if root is None:
            return None
        return root, provenance_label(src)

    def second_closures(self, resolver: Resolver, source: Source,
                        rejected: list[tuple[str, str, str]]) -> dict[int, str]:
        """Closures for a second try of rejected classes of ``source``.

        Args:
            resolver: the resolver that built the first closures (its files' indexes are reused).
            rejected: ``(module, class name, first closure source)`` of each rejected class.

        Returns:
            ``{position in rejected: closure source}`` for the classes whose placeholders a
            declared dependency provides and whose closure with that code differs from the
            first; the others are not tried again.
        """
        wanted = {k: placeholder_packages(text) for k, (_, _, text) in enumerate(rejected)}
        packages = set().union(*wanted.values())
        roots = self.roots_for(source, packages) if packages else []
        if not roots:
            return {}
        provided = {p for r, _ in roots for p in packages if _holds(r, p)}
        # modules a first lookup found in no root are remembered as None: not reused
        indexes = {m: i for m, i in resolver.indexes.items() if i is not None}
        second = type(resolver)(resolver.root, indexes, frozenset(resolver.runtime - RUNTIME_MODULES),
                                [*resolver.dependencies, *roots])
        out: dict[int, str] = {}
        for k, (mod, cls, text) in enumerate(rejected):
            if not wanted[k] & provided:
                continue
            try:
                new = second.closure(mod, cls).source
            except (ClosureError, RecursionError):
                continue
            if new != text:
                out[k] = new
        return out
