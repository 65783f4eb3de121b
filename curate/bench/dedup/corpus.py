"""The dedup benchmark's corpus: ``nn.Module`` classes of package wheels written as problem
files the way ``mine`` writes them (no module is run), or stage tables.

Wheels are fetched with ``pip download --no-deps`` and cached under ``$CURATE_CACHE`` or
``~/.cache/curate`` (see :func:`cache_dir`). Used by :mod:`curate.bench.dedup`.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import zipfile
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import polars as pl

from curate.data import KERNELBENCH_PROBLEMS
from curate.problem import assemble


PACKAGES = ("transformers==5.23.0", "timm==1.0.31")
SPEC = [{"kind": "tensor", "shape": [8, 64], "dtype": "float32"}]
KERNELBENCH = KERNELBENCH_PROBLEMS


# -- the corpus ---------------------------------------------------------------------------

def cache_dir() -> Path:
    """``$CURATE_CACHE`` or ``~/.cache/curate``, then ``bench-dedup``."""
    return Path(os.environ.get("CURATE_CACHE", Path.home() / ".cache" / "curate")) / "bench-dedup"


def wheel(requirement: str, cache: Path) -> Path:
    """The wheel of ``requirement`` (``name==version``), downloaded once into ``cache``."""
    name, _, version = requirement.partition("==")
    stem = name.replace("-", "_").lower()
    found = [p for p in cache.glob("*.whl") if p.name.lower().startswith(stem + "-")
             and (not version or f"-{version}-" in p.name)]
    if found:
        return sorted(found)[-1]
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                    "--quiet", "-d", str(cache), requirement], check=True)
    return wheel(requirement, cache)


def _bound(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return [stmt.name]
    if isinstance(stmt, ast.Assign):
        return [n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    return []


def file_problems(text: str, label: str, module: str = "") -> list[tuple[str, str]]:
    """``(class name, problem code)`` for each ``nn.Module`` class of one source file.

    A class counts when a base is imported from torch or is such a class of the file.
    The problem holds the class, the top-level definitions of the file it reads
    (transitively) and the imports binding names they read, relative imports made
    absolute (``module``, the file's dotted name, resolves them): where ``mine`` would copy
    a definition from another file of the package, this keeps its import line.
    """
    tree = ast.parse(text)
    package = module.rsplit(".", 1)[0].split(".") if module else []
    defs: dict[str, int] = {}
    imports: dict[str, tuple[ast.stmt, ast.alias]] = {}
    for i, st in enumerate(tree.body):
        for name in _bound(st):
            defs.setdefault(name, i)
        if isinstance(st, ast.ImportFrom) and st.level:
            # a relative import, made absolute: its module is another file of the package
            base = package[:len(package) - st.level + 1] if st.level <= len(package) else []
            st = ast.ImportFrom(".".join(base + ([st.module] if st.module else [])), st.names, 0)
        if isinstance(st, (ast.Import, ast.ImportFrom)) and getattr(st, "module", "") != "__future__":
            for a in st.names:
                imports[(a.asname or a.name).split(".")[0]] = (st, a)
    torch_names = {k for k, (st, a) in imports.items()
                   if (a.name if isinstance(st, ast.Import) else st.module or "").startswith("torch")}
    is_module: dict[str, bool] = {}

    def module_class(st: ast.ClassDef) -> bool:
        if st.name not in is_module:
            is_module[st.name] = False
            for b in st.bases:
                root = b
                while isinstance(root, ast.Attribute):
                    root = root.value
                if not isinstance(root, ast.Name):
                    continue
                if root.id in torch_names:
                    is_module[st.name] = True
                elif root.id in defs and isinstance(tree.body[defs[root.id]], ast.ClassDef):
                    is_module[st.name] |= module_class(tree.body[defs[root.id]])
        return is_module[st.name]

    out = []
    for pos, st in enumerate(tree.body):
        if not isinstance(st, ast.ClassDef) or st.name == "Model" or not module_class(st):
            continue
        need, imps, todo, seen = set(), {}, [st], set()
        while todo:
            for n in ast.walk(todo.pop()):
                if not isinstance(n, ast.Name) or n.id in seen:
                    continue
                seen.add(n.id)
                if n.id in defs and defs[n.id] != pos:
                    if defs[n.id] not in need:
                        need.add(defs[n.id])
                        todo.append(tree.body[defs[n.id]])
                elif n.id in imports:
                    imp, a = imports[n.id]
                    imps.setdefault(id(imp), (imp, []))[1].append(a)
        lines = ["import torch"]
        for imp, aliases in imps.values():
            node = (ast.ImportFrom(imp.module, aliases, 0) if isinstance(imp, ast.ImportFrom)
                    else ast.Import(aliases))
            if (line := ast.unparse(node)) not in lines:
                lines.append(line)
        body = [ast.get_source_segment(text, tree.body[i]) or "" for i in sorted(need)]
        src = "\n".join(lines) + "\n\n\n" + "\n\n\n".join(body + [ast.get_source_segment(text, st) or ""])
        doc = f"Reference problem mined from {label}::{st.name}."
        wrapper = f'class Model({st.name}):\n    """{doc}"""\n'
        out.append((st.name, assemble(src + "\n\n\n" + wrapper, SPEC, [])))
    return out


def _wheel_file_problems(args: tuple[str, str, str]) -> list[dict[str, str]]:
    path, member, label = args
    with zipfile.ZipFile(path) as z:
        text = z.read(member).decode("utf-8", errors="replace")
    module = member[:-3].replace("/", ".").removesuffix(".__init__") + (".__init__" if member.endswith("__init__.py") else "")
    try:
        found = file_problems(text, f"{label}/{member}", module)
    except (SyntaxError, ValueError, RecursionError):
        return []
    return [{"problem_id": f"{label}/{member}::{cls}", "name": f"{label.split('==')[0]}.{cls}",
             "code": code} for cls, code in found]


def package_corpus(packages: tuple[str, ...] = PACKAGES, workers: int | None = None) -> pl.DataFrame:
    """Problems from every ``nn.Module`` class of the packages' wheels (cached as parquet)."""
    cache = cache_dir()
    target = cache / ("corpus-" + "-".join(p.replace("==", "-") for p in packages) + ".parquet")
    if target.is_file():
        return pl.read_parquet(target)
    tasks = []
    for req in packages:
        path = wheel(req, cache / "wheels")
        with zipfile.ZipFile(path) as z:
            members = sorted(m for m in z.namelist() if m.endswith(".py") and "/tests/" not in m)
        tasks += [(str(path), m, req) for m in members]
    with ProcessPoolExecutor(workers or os.cpu_count(), mp_context=get_context("spawn")) as pool:
        rows = [r for part in pool.map(_wheel_file_problems, tasks, chunksize=16) for r in part]
    df = pl.DataFrame(rows)
    cache.mkdir(parents=True, exist_ok=True)
    df.write_parquet(target)
    return df


def load_corpus(tables: list[str], packages: tuple[str, ...]) -> pl.DataFrame:
    from curate.table import read_problems

    if not tables:
        return package_corpus(packages)
    frames = [read_problems(t).select("problem_id", "name", "code") for t in tables]
    return pl.concat(frames).unique("problem_id", keep="first", maintain_order=True)
