"""Sources of PyTorch code named in a mine manifest.

A manifest is YAML::

    sources:
      - {kind: package, name: torch, include: ["nn/modules/*.py"]}
      - {kind: pypi, name: timm, version: "1.0.31", include: ["timm/layers/*.py"]}
      - {kind: dir, name: myrepo, path: /some/dir}
      - {kind: git, name: x, uri: https://host/x.git, ref: <commit>}
      - {kind: kernelbench, name: mykb, path: /some/problems}

Kinds:

- ``package``: an installed Python package by import name; its source files are read in
  place. Its modules stay importable at run time, so the miner keeps imports from it
  (used for ``torch`` itself).
- ``pypi``: a PyPI distribution (``name``, ``version``), downloaded with pip (no install;
  wheel preferred, sdist otherwise) and unpacked into the cache.
- ``dir``: a local directory.
- ``git``: a git repository cloned at ``ref`` (needs a network that reaches ``uri``).
- ``kernelbench``: a local folder of KernelBench-format files (``class Model``,
  ``get_inputs()``, ``get_init_inputs()`` at the top level, as in KernelBench's
  ``level1/*.py``): each file is a problem with its own inputs (:mod:`curate.mine.kernelbench`),
  not a source of classes to synthesize inputs for. Such files in a source of another kind
  are recognized by that shape and taken the same way.

``include`` / ``exclude`` are glob patterns relative to the source root (``**`` allowed);
by default test folders are excluded. ``deps`` lists other pinned PyPI packages whose code
the source's modules may copy (:mod:`curate.mine.deps`)::

      - {kind: pypi, name: timm, version: "1.0.31", deps: [{name: torchvision, version: "0.29.1"}]}
"""

from __future__ import annotations

import fnmatch
import importlib.metadata as md
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

DEFAULT_EXCLUDE = ("**/tests/**", "**/test/**", "**/test_*.py", "**/*_test.py", "**/conftest.py",
                   "**/setup.py", "**/_vendor/**", "**/benchmarks/**", "**/examples/**")


ENTRY_KEYS = ("kind", "name", "version", "path", "uri", "ref", "include", "exclude", "licence", "deps")
"""The keys a manifest's source entry may have (what :func:`resolve` and the dependency
resolver read)."""


class ManifestError(ValueError):
    """The manifest is malformed (missing fields, unknown kind)."""


class SourceUnavailable(RuntimeError):
    """A source could not be located, downloaded or cloned."""


@dataclass
class Source:
    """One resolved source: a folder of Python files and where it came from.

    Attributes:
        root: folder whose relative paths are recorded (for packages: the folder *above* the
            top-level package, so paths read ``torch/nn/modules/conv.py``).
        importable: top-level package names importable at run time (imports from them are kept).
    """

    kind: str
    name: str
    uri: str
    version: str | None
    licence: str | None
    root: Path
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    importable: frozenset[str] = field(default_factory=frozenset)

    def files(self) -> list[Path]:
        """Python files of the source, sorted, after include/exclude."""
        out = []
        for path in sorted(self.root.rglob("*.py")):
            rel = path.relative_to(self.root).as_posix()
            if self.include and not any(_match(rel, p) for p in self.include):
                continue
            if any(_match(rel, p) for p in self.exclude):
                continue
            out.append(path)
        return out


def _match(rel: str, pattern: str) -> bool:
    # fnmatch's "*" already crosses "/"; "**/" must also match zero folders.
    return fnmatch.fnmatch(rel, pattern) or (pattern.startswith("**/") and fnmatch.fnmatch(rel, pattern[3:]))


def load_manifest(path: Path | str) -> list[dict]:
    """Read and check a manifest; return its source entries.

    Raises:
        ManifestError: not YAML, not a mapping with a (non-empty) ``sources`` list, an entry
            with a key other than :data:`ENTRY_KEYS` (a misspelt key would be ignored
            silently), or an entry that lacks what its kind needs.
    """
    try:
        data = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict) or not isinstance(data.get("sources"), list):
        raise ManifestError(f"{path}: expected a mapping with a 'sources' list")
    if set(data) != {"sources"}:
        raise ManifestError(f"{path}: unknown keys {sorted(set(data) - {'sources'})}; a manifest "
                            "holds only 'sources'")
    if not data["sources"]:
        raise ManifestError(f"{path}: the 'sources' list is empty")
    need = {"package": ("name",), "pypi": ("name",), "dir": ("name", "path"), "git": ("name", "uri"),
            "kernelbench": ("name", "path")}
    for i, entry in enumerate(data["sources"]):
        if not isinstance(entry, dict) or entry.get("kind") not in need:
            raise ManifestError(f"{path}: source {i}: kind must be one of {sorted(need)}")
        unknown = sorted(set(entry) - set(ENTRY_KEYS))
        if unknown:
            raise ManifestError(f"{path}: source {i} ({entry.get('name')}): unknown keys {unknown}; "
                                f"allowed: {', '.join(ENTRY_KEYS)}")
        missing = [k for k in need[entry["kind"]] if not entry.get(k)]
        if missing:
            raise ManifestError(f"{path}: source {i} ({entry['kind']}): missing {missing}")
    names = [e["name"] for e in data["sources"]]
    if len(set(names)) != len(names):
        raise ManifestError(f"{path}: source names must be unique")
    return data["sources"]


def resolve(entry: dict, cache: Path) -> Source:
    """Locate (downloading or cloning when needed) one manifest entry.

    Raises:
        SourceUnavailable: the package is not installed, the download or clone failed.
    """
    kind = entry["kind"]
    include = tuple(entry.get("include") or ())
    exclude = tuple(entry.get("exclude") or DEFAULT_EXCLUDE)
    if kind == "package":
        spec = importlib.util.find_spec(entry["name"])
        if spec is None or not spec.submodule_search_locations:
            raise SourceUnavailable(f"package {entry['name']!r} is not installed (or not a package)")
        pkg_dir = Path(next(iter(spec.submodule_search_locations)))
        dist = _distribution(entry["name"])
        top = entry["name"].split(".")[0]
        return Source(kind, entry["name"], f"python-package:{entry['name']}",
                      dist.version if dist else None, _licence(dist), pkg_dir.parent,
                      include or (f"{entry['name'].replace('.', '/')}/**",), exclude,
                      frozenset({top}))
    if kind in ("dir", "kernelbench"):
        root = Path(entry["path"]).expanduser().resolve()
        if not root.is_dir():
            raise SourceUnavailable(f"directory {root} does not exist")
        return Source(kind, entry["name"], root.as_uri(), entry.get("version") or _git_head(root),
                      entry.get("licence") or _licence_file(root), root, include, exclude)
    if kind == "git":
        root = _clone(entry["uri"], entry.get("ref"), cache / "git" / entry["name"])
        return Source(kind, entry["name"], entry["uri"], _git_head(root),
                      entry.get("licence") or _licence_file(root), root, include, exclude)
    root, dist = _pypi(entry["name"], entry.get("version"), cache / "pypi")
    return Source(kind, entry["name"], f"pypi:{entry['name']}=={dist.version}", dist.version,
                  _licence(dist) or _licence_file(root), root, include, exclude)


def _distribution(import_name: str) -> md.Distribution | None:
    top = import_name.split(".")[0]
    for dist_name in md.packages_distributions().get(top, [top]):
        try:
            return md.distribution(dist_name)
        except md.PackageNotFoundError:
            continue
    return None


def _licence(dist: md.Distribution | None) -> str | None:
    if dist is None:
        return None
    meta = dist.metadata
    for key in ("License-Expression", "License"):
        value = meta.get(key)
        # License-Expression is SPDX (short); a free-text License field can be the whole text.
        if value and (key == "License-Expression" or len(value) < 80) and value.strip().upper() != "UNKNOWN":
            return value.strip()[:300]
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or []
                   if c.startswith("License ::")]
    return classifiers[0] if classifiers else None


def _licence_file(root: Path) -> str | None:
    for name in ("LICENSE", "LICENSE.txt", "LICENSE.md", "COPYING"):
        f = root / name
        if f.is_file():
            head = f.read_text(errors="replace")[:400]
            for marker, spdx in (("MIT License", "MIT"), ("Apache License", "Apache-2.0"),
                                 ("BSD 3-Clause", "BSD-3-Clause"), ("Redistribution and use", "BSD"),
                                 ("GNU GENERAL PUBLIC", "GPL")):
                if marker in head:
                    return spdx
            return f"see {name}"
    return None


def _git_head(root: Path) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _clone(uri: str, ref: str | None, dest: Path) -> Path:
    if (dest / ".git").is_dir() and (ref is None or _git_head(dest) == ref):
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    cmds = [["git", "init", "-q", str(dest)],
            ["git", "-C", str(dest), "fetch", "-q", "--depth", "1", uri, ref or "HEAD"],
            ["git", "-C", str(dest), "checkout", "-q", "FETCH_HEAD"]]
    for cmd in cmds:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise SourceUnavailable(f"git: {' '.join(cmd[3:])}: {r.stderr.strip()[:300]}")
    return dest


def _pypi(name: str, version: str | None, cache: Path) -> tuple[Path, md.Distribution]:
    req = f"{name}=={version}" if version else name
    dest = cache / req.replace("==", "-")
    done = dest / ".unpacked"
    if not done.exists():
        dl = cache / "downloads"
        dl.mkdir(parents=True, exist_ok=True)
        archive = _pip_download(req, dl)
        dest.mkdir(parents=True, exist_ok=True)
        if archive.suffix == ".whl" or archive.suffix == ".zip":
            with zipfile.ZipFile(archive) as z:
                z.extractall(dest)
        else:
            with tarfile.open(archive) as t:
                t.extractall(dest, filter="data")
        done.write_text(archive.name)
    metas = list(dest.glob("*.dist-info")) + list(dest.glob("*/PKG-INFO"))
    if not metas:
        raise SourceUnavailable(f"{req}: no metadata in the downloaded archive")
    dist = md.PathDistribution(metas[0])
    root = dest if metas[0].suffix == ".dist-info" else metas[0].parent
    return root, dist


def _pip_download(req: str, dl: Path) -> Path:
    """Download ``req``'s archive into ``dl`` (once); its path. Each call downloads into a
    private folder first, so calls running at once cannot take each other's archives."""
    stem = req.split("==")[0].replace("-", "_").replace(".", "_").lower()
    ver = req.split("==")[1] if "==" in req else ""
    for p in sorted(dl.iterdir()):  # downloaded earlier
        name = p.name.lower().replace("-", "_").replace(".", "_")
        if ver and p.is_file() and name.startswith(f"{stem}_{ver.replace('.', '_').replace('-', '_')}_"):
            return p
    # an sdist's metadata is prepared by its build backend: first with the backend this
    # environment has (no build requirements installed), then in an isolated build environment
    # whose requirements come as wheels (``--no-binary=:all:`` built numpy and scipy from
    # source for that, for many minutes)
    sdist = [f"--no-binary={req.split('==')[0]}"]
    for binary in (["--only-binary=:all:"], sdist + ["--no-build-isolation"], sdist):
        # the source is read, not installed: a release that needs a newer Python is still minable
        with tempfile.TemporaryDirectory(dir=dl, prefix=".download-") as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--ignore-requires-python",
                   *binary, "-d", tmp, req]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                               env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
            got = sorted(Path(tmp).iterdir())
            if r.returncode == 0 and got:
                return Path(shutil.move(str(got[0]), dl / got[0].name))
    raise SourceUnavailable(f"pip download {req} failed: {r.stderr.strip()[-300:]}")
