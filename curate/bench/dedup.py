"""Dedup benchmark: throughput, precision and recall against exact Jaccard, planted copies.

Usage::

    python -m curate.bench.dedup                       # corpus from the transformers and timm wheels
    python -m curate.bench.dedup --table RUN/mine      # a mined table instead (repeatable)
    python -m curate.bench.dedup --packages timm==1.0.31 --sample 3000 --repeat 3

The corpus. ``--table`` reads stage tables (:func:`curate.table.read_problems`). Otherwise
every ``nn.Module`` class of the ``--packages`` wheels (``pip download --no-deps``, cached
under ``$CURATE_CACHE`` or ``~/.cache/curate``) becomes a problem file the way ``mine``
writes one: the class with the top-level definitions and imports of its file that it
needs (transitively), a
``class Model(<class>)`` wrapper with a provenance docstring, and a generated inputs block
(where ``mine`` would copy a definition from another file of the package, the problem
keeps its import line instead).
No module is run: this is a corpus for dedup, not for measuring.

Figures printed (and written to ``--out`` as JSON when given):

1. throughput of dedup proper (normalize, shingle, sign, LSH, cluster: features with the
   worker pool, banding, the op check and components) and of the whole ``dedup`` stage with
   and without KernelBench decontamination, as problems per second of wall time and per
   CPU-second (this process and its workers), median of ``--repeat`` runs; the machine's
   load average is printed beside them, since other work on a shared machine slows wall
   time and not CPU time. For context: datasketch's signatures and LSH on the same
   documents, and the ``ast`` normalization dedup used before;
2. precision and recall of the near-duplicate pairs against exact Jaccard of the same
   shingle sets at the threshold: exact Jaccard over all pairs is quadratic, so on a
   random sample of ``--sample`` distinct normalized documents, all pairs within it
   (candidates from an exact prefix filter, Bayardo et al. 2007, then exact set
   intersections);
3. recall of planted near-duplicates of real modules (identifiers renamed, methods
   reordered, reformatted, comments and docstrings changed, and all four at once);
4. KernelBench decontamination: every level-1 and level-2 problem planted with its class
   and variables renamed, how many are rejected as contaminated and named right, and
   how many real problems of the corpus are rejected as contaminated (and by which
   problems);
5. side by side (``--only side-by-side``, needs ``pip install 'curate[bench]'``): our
   engine and a rensa + polars path (:func:`polars_features`, :func:`rensa_decide`) on the
   same corpus in the same run, part by part (normalize + shingle, signatures, LSH and
   decision) and end to end, interleaved; what each drops, the rensa path's precision and
   recall against exact Jaccard on its own shingles, and the planted copies it drops.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from curate.data import KERNELBENCH_PROBLEMS
from curate.problem import INPUTS_MARKER, assemble

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


# -- planted near-duplicates ----------------------------------------------------------------

_KEEP = {"self", "cls", "super", "forward", "__init__", "Model", "torch", "nn", "F", "math",
         "batch_size"}


def user_names(code: str) -> list[str]:
    """Names a problem's own code binds (classes, functions, parameters, locals, ``self``
    attributes), in order of appearance, without dunder names and ``forward``."""
    tree = ast.parse(code.split(INPUTS_MARKER, 1)[0])
    names: dict[str, None] = {}
    for n in ast.walk(tree):
        if isinstance(n, (ast.ClassDef, ast.FunctionDef)):
            names.setdefault(n.name)
        elif isinstance(n, ast.arg):
            names.setdefault(n.arg)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.setdefault(n.id)
        elif (isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
              and isinstance(n.value, ast.Name) and n.value.id == "self"):
            names.setdefault(n.attr)
    return [n for n in names if n not in _KEEP and not n.startswith("__")]


def rename_identifiers(code: str, seed: int = 0, extra: tuple[str, ...] = ()) -> str:
    """Every user name (:func:`user_names`, and ``extra``) renamed where the code uses it as
    that name: variables, parameters (and the keywords of calls to the file's own classes
    and functions), definitions and ``self`` attributes; not attributes of other objects
    (``torch.norm`` stays when a local is called ``norm``), keywords of other calls, or
    text in strings and comments. The code still runs the same."""
    head, marker, tail = code.partition(INPUTS_MARKER)
    tree = ast.parse(head)
    names = user_names(code) + [e for e in extra if e not in user_names(code)]
    new = {n: f"w{seed}{k}_{n[::-1].strip('_') or 'v'}" for k, n in enumerate(names)}
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    lines = head.splitlines(keepends=True)
    edits: list[tuple[int, int, str, str]] = []  # (line, column, old, new)

    def at(line: int, col: int, old: str) -> None:
        edits.append((line, col, old, new[old]))

    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id in new:
            at(n.lineno, n.col_offset, n.id)
        elif isinstance(n, ast.arg) and n.arg in new:
            at(n.lineno, n.col_offset, n.arg)
        elif (isinstance(n, ast.Attribute) and n.attr in new and isinstance(n.value, ast.Name)
              and n.value.id == "self" and n.end_lineno == n.lineno):
            at(n.end_lineno, n.end_col_offset - len(n.attr), n.attr)
        elif isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in new:
            line = lines[n.lineno - 1]
            m = re.search(rf"\b(?:class|def)\s+({re.escape(n.name)})\b", line)
            if m:
                at(n.lineno, len(line[:m.start(1)].encode()), n.name)
        elif isinstance(n, ast.Call):
            target = n.func.id if isinstance(n.func, ast.Name) else (
                n.func.attr if isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                and n.func.value.id == "self" else None)
            if target in defined or target == "super":
                for kw in n.keywords:
                    if kw.arg in new:
                        at(kw.lineno, kw.col_offset, kw.arg)
    for line, col, old, repl in sorted(set(edits), reverse=True):
        raw = lines[line - 1].encode()
        if raw[col:col + len(old)].decode(errors="replace") == old:
            lines[line - 1] = (raw[:col] + repl.encode() + raw[col + len(old):]).decode()
    return "".join(lines) + marker + tail


def reorder_methods(code: str) -> str:
    """The methods of every class in reverse order (their text unchanged)."""
    head, marker, tail = code.partition(INPUTS_MARKER)
    tree = ast.parse(head)
    lines = head.splitlines(keepends=True)
    for cls in sorted((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)),
                      key=lambda c: -c.lineno):
        fns = [f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if len(fns) < 2 or any(not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                               for s in cls.body[cls.body.index(fns[0]):]):
            continue
        spans = [(min([f.lineno] + [d.lineno for d in f.decorator_list]) - 1, f.end_lineno) for f in fns]
        blocks = ["".join(lines[a:b]).rstrip("\n") + "\n" for a, b in spans]
        lines[spans[0][0]:spans[-1][1]] = ["\n".join(reversed(blocks))]
        lines = "".join(lines).splitlines(keepends=True)
    return "".join(lines) + marker + tail


def reformat(code: str) -> str:
    """2-space indentation, blank lines doubled, spaces inside brackets removed."""
    head, marker, tail = code.partition(INPUTS_MARKER)
    out = []
    for line in head.splitlines():
        n = len(line) - len(line.lstrip(" "))
        out.append(" " * ((n + 1) // 2) + line.lstrip(" ").replace("( ", "(").replace(" )", ")"))
        if not line.strip():
            out.append("")
    return "\n".join(out) + "\n" + marker + tail


def recomment(code: str) -> str:
    """Docstrings replaced, a comment line before every ``def``, trailing comments removed."""
    head, marker, tail = code.partition(INPUTS_MARKER)
    head = re.sub(r'(?s)(?P<q>"""|\'\'\').*?(?P=q)', '"""Rewritten documentation."""', head)
    head = re.sub(r"(?m)^([ \t]*)def ", r"\1# a method, commented\n\1def ", head)
    return head + marker + tail


PLANTS = {
    "renamed": rename_identifiers,
    "reordered": reorder_methods,
    "reformatted": reformat,
    "recommented": recomment,
    "all four": lambda c: recomment(reformat(reorder_methods(rename_identifiers(c, 7)))),
}


def planted_rows(df: pl.DataFrame, n: int, seed: int = 0) -> tuple[list[dict], dict[str, str]]:
    """Planted copies of ``n`` random problems (at least 100 tokens); returns the rows and
    ``planted id -> original id``."""
    from curate.dedup.tokens import normalize_batch

    rng = random.Random(seed)
    sizes = normalize_batch(df["code"].to_list()).n_tokens
    pool = [i for i in range(df.height) if sizes[i] >= 100]
    rows, origin = [], {}
    for i in rng.sample(pool, min(n, len(pool))):
        code, pid = df["code"][i], df["problem_id"][i]
        for kind, plant in PLANTS.items():
            try:
                new = plant(code)
                ast.parse(new.split(INPUTS_MARKER, 1)[0])
            except (SyntaxError, ValueError, RecursionError):
                continue
            if new == code:
                continue
            rows.append({"problem_id": f"planted/{kind}/{pid}", "name": f"planted.{kind}", "code": new})
            origin[rows[-1]["problem_id"]] = pid
    return rows, origin


def plant_kernelbench(code: str, seed: int) -> str:
    """A KernelBench problem as a mined row: its input functions replaced by curate's inputs
    block, the class (and ``Model``) and all its variables renamed."""
    head = rename_identifiers(code.split("\ndef get_inputs", 1)[0], seed, extra=("Model",))
    cls = re.search(r"class (\w+)\(", head).group(1)
    return assemble(f"{head}\n\nclass Model({cls}):\n    pass\n", SPEC, [])


# -- measuring ----------------------------------------------------------------------------

def cpu_seconds() -> float:
    """CPU seconds of this process and its waited-for children so far."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn, *args, **kwargs) -> tuple[Any, float, float]:
    """``(result, wall seconds, CPU seconds of this process and its children)``. A dedup
    worker still running when ``fn`` returns (the pool does not wait for a worker that got
    no chunk) is waited for after the wall clock stops and before CPU time is read, so
    that its CPU time counts."""
    import multiprocessing

    w, c = time.monotonic(), cpu_seconds()
    out = fn(*args, **kwargs)
    wall = time.monotonic() - w
    for child in multiprocessing.active_children():
        child.join(timeout=60)
    return out, wall, cpu_seconds() - c


def dedup_proper(codes: pl.Series, threshold: float, num_perm: int, workers: int | None,
                 backend: str = "rminhash") -> dict[str, Any]:
    """Normalize, shingle, sign (pool), distinct documents, LSH, op and core checks, components."""
    from curate.dedup.features import featurize_table
    from curate.dedup.minhash import candidate_arrays, components
    from curate.dedup.exact import MARGIN, FlatShingles, settle
    from curate.dedup.stage import _Rows, duplicate_pairs

    feats = featurize_table(codes, num_perm, workers, backend=backend, description="bench: features")
    first: dict[str, int] = {}
    for i, h in enumerate(feats.norm_hash):
        if h is not None:
            first.setdefault(h, i)
    rows = np.fromiter(first.values(), dtype=np.int64, count=len(first))
    a, b, sim = candidate_arrays(feats.sigs[rows], threshold, backend, floor=threshold - MARGIN)
    estimated = (a[sim >= threshold], b[sim >= threshold])
    a, b, sim, _ = settle(_Rows(codes, rows), a, b, sim, threshold,
                          shingles=FlatShingles(feats.shingles, feats.shingle_offsets, rows))
    agree, _ = duplicate_pairs(feats, codes, rows, a, b, threshold)
    comp = components(len(rows), (a[agree], b[agree]))
    return {"feats": feats, "rows": rows, "pairs": (a, b, sim), "agree": agree, "comp": comp,
            "estimated": estimated}


def throughput(df: pl.DataFrame, args) -> dict[str, Any]:
    from curate.dedup.stage import run
    from curate.table import write_stage

    codes = df["code"]
    n = df.height
    out: dict[str, Any] = {"documents": n, "megabytes": round(codes.str.len_bytes().sum() / 1e6, 1),
                           "cores": os.cpu_count()}
    runs: dict[str, list[tuple[float, float]]] = {"dedup proper": [], "stage, no decontamination": [],
                                                  "stage, with KernelBench": []}
    steps = []
    with tempfile.TemporaryDirectory() as tmp:
        write_stage(tmp, "mine", df, pl.DataFrame(), n, 0.0)
        for _ in range(args.repeat):
            _, w, c = timed(dedup_proper, codes, args.threshold, args.num_perm, args.workers)
            runs["dedup proper"].append((w, c))
            _, w, c = timed(run, out=tmp, kernelbench="none", threshold=args.threshold,
                            workers=args.workers)
            runs["stage, no decontamination"].append((w, c))
            if args.kernelbench.is_file():
                stats, w, c = timed(run, out=tmp, kernelbench=str(args.kernelbench),
                                    threshold=args.threshold, workers=args.workers)
                runs["stage, with KernelBench"].append((w, c))
                steps.append(stats["step_seconds"])
    out["load_average"] = [round(x, 1) for x in os.getloadavg()]
    for name, xs in runs.items():
        if xs:
            w = statistics.median(x[0] for x in xs)
            c = statistics.median(x[1] for x in xs)
            out[name] = {"wall_s": round(w, 2), "cpu_s": round(c, 2), "docs_per_s": round(n / w),
                         "docs_per_cpu_s": round(n / c)}
    if steps:
        out["stage steps (s, last run)"] = steps[-1]
    # context: datasketch, on a sample
    from curate.dedup.features import featurize_table
    from curate.dedup.minhash import candidate_arrays

    sample = codes.sample(min(args.context_sample, n), seed=1)
    for backend in ("rminhash", "datasketch"):
        feats, w, c = timed(featurize_table, sample, args.num_perm, 1, backend=backend)
        _, w2, _ = timed(candidate_arrays, feats.sigs, args.threshold, backend)
        out[f"context: features + LSH, {backend}, 1 core"] = {
            "docs": len(sample), "features_docs_per_s": round(len(sample) / w),
            "lsh_docs_per_s": round(len(sample) / max(w2, 1e-9))}
    return out


def exact_pairs(sets: list[np.ndarray], threshold: float) -> dict[tuple[int, int], float]:
    """All pairs ``(i, j)``, ``i < j``, with exact Jaccard >= ``threshold``, and their Jaccard.

    Prefix filtering (Bayardo, Ma and Srikant 2007): with the shingles of every set ordered
    rarest first, two sets at Jaccard >= t share one of the first ``|A| - ceil(t |A|) + 1``
    of ``A``'s; only pairs sharing such a shingle (and of sizes within a factor t) are
    intersected.
    """
    from collections import defaultdict

    freq: dict[int, int] = defaultdict(int)
    for s in sets:
        for x in s.tolist():
            freq[x] += 1
    ordered = [sorted(s.tolist(), key=lambda x: (freq[x], x)) for s in sets]
    index: dict[int, list[int]] = defaultdict(list)
    cand: set[tuple[int, int]] = set()
    for i, s in enumerate(ordered):
        prefix = s[:len(s) - int(np.ceil(threshold * len(s))) + 1] if s else []
        for x in prefix:
            for j in index[x]:
                cand.add((j, i))
            index[x].append(i)
    out = {}
    for i, j in cand:
        a, b = sets[i], sets[j]
        if min(len(a), len(b)) < threshold * max(len(a), len(b)):
            continue
        inter = len(np.intersect1d(a, b, assume_unique=True))
        jac = inter / (len(a) + len(b) - inter)
        if jac >= threshold:
            out[(i, j)] = jac
    return out


def precision_recall(df: pl.DataFrame, args) -> dict[str, Any]:
    """Pairs found by MinHash + LSH (each backend) against exact Jaccard, on a sample of
    distinct normalized documents; and the clusters of the full run, on the same sample."""
    from curate.dedup.features import featurize_table
    from curate.dedup.minhash import candidate_arrays
    from curate.dedup.tokens import normalize_batch

    res = dedup_proper(df["code"], args.threshold, args.num_perm, args.workers)
    rows, (a, b, sim), agree, comp = res["rows"], res["pairs"], res["agree"], res["comp"]
    rng = np.random.default_rng(args.seed)
    sample = np.sort(rng.choice(len(rows), size=min(args.sample, len(rows)), replace=False))
    pos = {int(d): k for k, d in enumerate(sample)}
    codes = [df["code"][int(rows[d])] for d in sample]
    batch = normalize_batch(codes)
    sets = [batch.shingle_set(k) for k in range(len(sample))]
    truth = exact_pairs(sets, args.threshold)
    out: dict[str, Any] = {"sample_documents": len(sample), "all_pairs": len(sample) * (len(sample) - 1) // 2,
                           "true_pairs": len(truth), "threshold": args.threshold}

    def score(found: set[tuple[int, int]]) -> dict[str, Any]:
        hit = len(found & set(truth))
        return {"found": len(found), "precision": round(hit / len(found), 4) if found else None,
                "recall": round(hit / len(truth), 4) if truth else None}

    def in_sample(x: np.ndarray, y: np.ndarray, keep: np.ndarray) -> set[tuple[int, int]]:
        return {tuple(sorted((pos[int(i)], pos[int(j)]))) for i, j in zip(x[keep], y[keep])
                if int(i) in pos and int(j) in pos}

    ones = np.ones(len(a), dtype=bool)
    ea, eb = res["estimated"]
    out["R-MinHash + banding, estimates only (full corpus run), pairs"] = score(
        in_sample(ea, eb, np.ones(len(ea), dtype=bool)))
    out["R-MinHash + banding + exact check near the threshold (as dedup runs), pairs"] = score(
        in_sample(a, b, ones))
    out["... after the op-name and core checks"] = score(in_sample(a, b, agree))
    label = comp[sample]
    same = {(x, y) for x in range(len(sample)) for y in range(x + 1, len(sample)) if label[x] == label[y]} \
        if len(sample) <= 5000 else set()
    out["clusters of the full run (pairs in one cluster)"] = score(same)
    feats = featurize_table(codes, args.num_perm, 1, backend="datasketch")
    x, y, _ = candidate_arrays(feats.sigs, args.threshold, "datasketch")
    out["datasketch MinHash + MinHashLSH (sample only), pairs"] = score(set(zip(x.tolist(), y.tolist())))
    return out


def planted_recall(df: pl.DataFrame, args) -> dict[str, Any]:
    """Recall of planted near-duplicates: a planted row counts when it lands in its
    original's cluster."""
    from curate.dedup.stage import run
    from curate.table import read_problems, read_rejected, write_stage

    rows, origin = planted_rows(df, args.planted, args.seed)
    frame = pl.concat([df.select("problem_id", "name", "code"), pl.DataFrame(rows)])
    with tempfile.TemporaryDirectory() as tmp:
        write_stage(tmp, "mine", frame, pl.DataFrame(), frame.height, 0.0)
        run(out=tmp, kernelbench="none", threshold=args.threshold, workers=args.workers)
        every = pl.concat([read_problems(Path(tmp) / "dedup"), read_rejected(Path(tmp) / "dedup")],
                          how="diagonal_relaxed")
    cluster = dict(zip(every["problem_id"].to_list(), every["dedup_cluster"].to_list()))
    out: dict[str, Any] = {"originals": len(set(origin.values()))}
    for kind in PLANTS:
        ids = [p for p in origin if p.split("/")[1] == kind]
        hit = sum(1 for p in ids if cluster[p] is not None and cluster[p] == cluster[origin[p]])
        out[kind] = {"planted": len(ids), "found": hit, "recall": round(hit / len(ids), 4) if ids else None}
    total = sum(v["planted"] for k, v in out.items() if k in PLANTS)
    found = sum(v["found"] for k, v in out.items() if k in PLANTS)
    out["all"] = {"planted": total, "found": found, "recall": round(found / total, 4) if total else None}
    return out


def kernelbench_planted(df: pl.DataFrame, args) -> dict[str, Any]:
    """Every level-1 and level-2 KernelBench problem planted (class and variables renamed)
    into the corpus: how many are rejected as contaminated, naming the problem (or one of
    its normalized twins); and the corpus's own rows rejected as contaminated."""
    from curate.dedup.stage import run
    from curate.table import read_problems, read_rejected, write_stage

    if not args.kernelbench.is_file():
        return {"skipped": f"no KernelBench copy at {args.kernelbench}"}
    kb = [json.loads(line) for line in args.kernelbench.read_text().splitlines() if line.strip()]
    kb = [r for r in kb if int(r["level"]) in (1, 2)]
    rows = [{"problem_id": f"kb-planted/{k}", "name": "planted.kernelbench",
             "code": plant_kernelbench(r["code"], k)} for k, r in enumerate(kb)]
    labels = {f"kb-planted/{k}": f"level{r['level']}/{r['name']}" for k, r in enumerate(kb)}
    frame = pl.concat([df.select("problem_id", "name", "code"), pl.DataFrame(rows)])
    with tempfile.TemporaryDirectory() as tmp:
        write_stage(tmp, "mine", frame, pl.DataFrame(), frame.height, 0.0)
        stats = run(out=tmp, kernelbench=str(args.kernelbench), threshold=args.threshold,
                    workers=args.workers)
        rejected = read_rejected(Path(tmp) / "dedup")
        kept = read_problems(Path(tmp) / "dedup")
    bad = {r["problem_id"]: r for r in rejected.iter_rows(named=True)}
    named = contaminated = 0
    misses = []
    for pid, label in labels.items():
        r = bad.get(pid)
        if r is not None and r["reject_reason"] == "contaminated":
            contaminated += 1
            if r["contaminated_by"] == label or label in (r["reject_detail"] or ""):
                named += 1
            else:
                misses.append(f"{label} -> {r['contaminated_by']}")
        else:
            misses.append(f"{label}: {r['reject_reason'] if r else 'kept'}")
    real = rejected.filter((pl.col("reject_reason") == "contaminated")
                           & ~pl.col("problem_id").str.starts_with("kb-planted/"))
    return {"planted": len(labels), "rejected_contaminated": contaminated,
            "named_right_or_twin": named, "misses": misses[:20],
            "real_rows": df.height, "real_rows_contaminated": real.height,
            "real_contaminated_by": dict(real.group_by("contaminated_by").len()
                                         .sort("len", descending=True).head(15).iter_rows()),
            "real_contaminated_examples": real.select("name", "contaminated_by").head(15).rows(),
            "stage_seconds": stats["seconds"], "kept": kept.height}



# -- side by side: our engine and a rensa + polars path -----------------------------------

TOKEN = r"[A-Za-z_]\w*|\d+|[^\w\s]"
_GRAM = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                  0xD6E8FEB86659FD93, 0xFF51AFD7ED558CCD], dtype=np.uint64)
RENSA_BANDS = 16
"""Bands of the rensa path's LSH: rensa needs a divisor of ``num_perm``; 16 x 8 is the one
nearest our own band choice (21 x 6) that keeps P(candidate | J = 0.8) above 0.9 (0.947)."""


def polars_features(codes: pl.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rensa + polars path's normalization, polars and numpy only: the inputs block cut,
    docstrings, comments and import lines removed by regular expressions, tokens by a
    regular expression, every identifier outside the torch/Python vocabulary that dedup
    keeps (:func:`curate.dedup.vocab.load`) renamed ``_``, tokens hashed by polars.

    Returns:
        ``(key, shingles, offsets)``: a ``uint64`` exact-duplicate key per document (hash
        of its renamed token sequence); the flat ``uint64`` 5-gram shingle hashes; the
        ``uint64`` row offsets of each document's shingles (``len(codes) + 1``).
    """
    from curate.dedup import vocab

    v = vocab.load()
    keep = pl.Series(sorted(v["names"] | v["attrs"])).implode()
    strip = r'(?s)""".*?"""|\'\'\'.*?\'\'\'|#[^\n]*|(?m:^[ \t]*(?:import|from)[ \t][^\n]*)'
    tok = (pl.DataFrame({"code": codes}).lazy()
           .select(pl.col("code").str.split(INPUTS_MARKER).list.first()
                   .str.replace_all(strip, " ").str.extract_all(TOKEN)
                   .list.eval(pl.when(pl.element().is_in(keep)).then(pl.element())
                              .otherwise(pl.lit("_")).hash(7)).alias("tok"))
           .collect()["tok"])
    key = tok.hash(3).to_numpy()
    lens = tok.list.len().fill_null(0).to_numpy().astype(np.int64)
    flat = tok.explode().drop_nulls().to_numpy().astype(np.uint64)
    k = len(_GRAM)
    grams = np.maximum(lens - k + 1, 0)
    m = max(len(flat) - k + 1, 0)
    g = np.zeros(m, np.uint64)
    with np.errstate(over="ignore"):
        for i in range(k):
            g ^= flat[i:i + m] * _GRAM[i]
    starts = np.zeros(len(lens), np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    within = np.arange(grams.sum()) - np.repeat(np.cumsum(grams) - grams, grams)
    offsets = np.zeros(len(lens) + 1, np.uint64)
    np.cumsum(grams, out=offsets[1:])
    return key, g[np.repeat(starts, grams) + within], offsets


def rensa_decide(key: np.ndarray, shingles: np.ndarray, offsets: np.ndarray, threshold: float,
                 num_perm: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rensa path's decision: the first of equal keys is kept (the rest exact
    duplicates); each distinct document, in order, is signed by rensa's R-MinHash and put
    into rensa's ``RMinHashLSH``, and is a near-duplicate when it shares a band with an
    earlier one (rensa's duplicate flags: no Jaccard estimate or check).

    Returns:
        ``(exact, near, distinct)``: two boolean masks over the documents, and the indices
        of the distinct documents.
    """
    from rensa import RMinHash, RMinHashLSH

    n = len(key)
    _, first = np.unique(key, return_index=True)
    first = np.sort(first)
    exact = np.ones(n, bool)
    exact[first] = False
    lsh = RMinHashLSH(threshold, num_perm, RENSA_BANDS)
    near = np.zeros(n, bool)
    for d in first.tolist():
        a, b = int(offsets[d]), int(offsets[d + 1])
        row = RMinHash.digest_matrix_from_flat_token_hashes(
            shingles[a:b], np.array([0, b - a], np.uint64), num_perm, 1)
        near[d] = lsh.insert_matrix_and_query_duplicate_flags(row, d)[0]
    return exact, near, first


def _earlier_partner(shingles: np.ndarray, offsets: np.ndarray, docs: np.ndarray,
                     threshold: float) -> np.ndarray:
    """For each of ``docs`` (in order): whether an earlier one of them has exact Jaccard >=
    ``threshold`` with it on these shingles (the truth a keep-first dedup is judged by)."""
    sets = [np.unique(shingles[int(offsets[d]):int(offsets[d + 1])]) for d in docs.tolist()]
    has = np.zeros(len(docs), bool)
    for i, j in exact_pairs(sets, threshold):
        has[max(i, j)] = True
    return has


def side_by_side(df: pl.DataFrame, args) -> dict[str, Any]:
    """Our engine and a rensa + polars path on the same corpus, part by part and end to
    end, each timed ``--repeat`` times interleaved (median); then what each decides."""
    from curate.dedup import rminhash
    from curate.dedup.exact import MARGIN, FlatShingles, settle
    from curate.dedup.minhash import candidate_arrays
    from curate.dedup.stage import _Rows
    from curate.dedup.tokens import normalize_batch

    try:
        from rensa import RMinHash
    except ImportError:
        return {"skipped": "rensa is not installed (pip install 'curate[bench]')"}
    codes = df["code"]
    n = df.height
    t, nump = args.threshold, args.num_perm
    ours_tb = normalize_batch(codes)
    key, sh, soff = polars_features(codes)
    first: dict[str, int] = {}
    for i, h in enumerate(ours_tb.norm_hash):
        if h is not None:
            first.setdefault(h, i)
    rows = np.fromiter(first.values(), dtype=np.int64, count=len(first))
    sigs = rminhash.sign(ours_tb.shingles, ours_tb.shingle_offsets, nump, 1)

    def rensa_sign():
        m = RMinHash.digest_matrix_from_flat_token_hashes(
            ours_tb.shingles, ours_tb.shingle_offsets.astype(np.uint64), nump, 1)
        return np.array(m.to_rows(), dtype=np.uint32)

    def our_lsh():
        a, b, sim = candidate_arrays(sigs[rows], t, floor=t - MARGIN)
        return settle(_Rows(codes, rows), a, b, sim, t,
                      shingles=FlatShingles(ours_tb.shingles, ours_tb.shingle_offsets, rows))

    def rensa_lsh():
        okey = np.array([hash(h) for h in ours_tb.norm_hash], dtype=np.int64)  # our exact key
        return rensa_decide(okey, ours_tb.shingles, ours_tb.shingle_offsets.astype(np.uint64), t, nump)

    parts = {
        "normalize + shingle (ours: 1 thread; polars: its pool)": (
            lambda: normalize_batch(codes), lambda: polars_features(codes)),
        "signatures, 1 thread (our shingles)": (
            lambda: rminhash.sign(ours_tb.shingles, ours_tb.shingle_offsets, nump, 1), rensa_sign),
        "LSH and decision (our signatures/shingles)": (our_lsh, rensa_lsh),
        "end to end": (lambda: dedup_proper(codes, t, nump, args.workers),
                       lambda: rensa_decide(*polars_features(codes), t, nump)),
    }
    out: dict[str, Any] = {"documents": n, "load_average_start": [round(x, 1) for x in os.getloadavg()],
                           "rensa_bands": f"{RENSA_BANDS} x {nump // RENSA_BANDS}"}
    assert np.array_equal(sigs, rensa_sign()), "compiled R-MinHash differs from rensa"
    out["signatures equal to rensa's"] = True
    for name, (ours, theirs) in parts.items():
        ws = {"ours": [], "rensa + polars": []}
        cs = {"ours": [], "rensa + polars": []}
        for _ in range(args.repeat):
            for label, fn in (("ours", ours), ("rensa + polars", theirs)):
                _, w, c = timed(fn)
                ws[label].append(w)
                cs[label].append(c)
        out[name] = {label: {"wall_s": round(statistics.median(ws[label]), 3),
                             "cpu_s": round(statistics.median(cs[label]), 3),
                             "docs_per_s": round(n / statistics.median(ws[label]))} for label in ws}
    out["load_average_end"] = [round(x, 1) for x in os.getloadavg()]

    # what each decides on the corpus, judged by exact Jaccard on its own shingles
    ours_run = dedup_proper(codes, t, nump, args.workers)
    dup = np.zeros(n, bool)
    comp, orow = ours_run["comp"], ours_run["rows"]
    seen: set[int] = set()
    for k, c in enumerate(comp.tolist()):
        if c in seen:
            dup[orow[k]] = True
        seen.add(c)
    ours_exact = np.array([h is not None and first.get(h) != i for i, h in enumerate(ours_tb.norm_hash)])
    exact, near, distinct = rensa_decide(key, sh, soff, t, nump)
    truth = _earlier_partner(sh, soff, distinct, t)
    flagged = near[distinct]
    out["decisions"] = {
        "ours: exact duplicates": int(ours_exact.sum()), "ours: near duplicates": int(dup.sum()),
        "ours: kept": int(n - ours_exact.sum() - dup.sum()),
        "rensa + polars: exact duplicates": int(exact.sum()), "rensa + polars: near duplicates": int(near.sum()),
        "rensa + polars: kept": int(n - exact.sum() - near.sum()),
        "rensa + polars near flags: precision vs exact Jaccard on its shingles":
            round(float((flagged & truth).sum() / max(flagged.sum(), 1)), 3),
        "rensa + polars near flags: recall vs exact Jaccard on its shingles":
            round(float((flagged & truth).sum() / max(truth.sum(), 1)), 3),
        "dropped by both": int(((exact | near) & (ours_exact | dup)).sum()),
        "dropped by rensa + polars only": int(((exact | near) & ~(ours_exact | dup)).sum()),
        "dropped by ours only": int((~(exact | near) & (ours_exact | dup)).sum()),
    }
    # planted copies: each must be dropped (it comes after its original)
    planted, origin = planted_rows(df, args.planted, args.seed)
    frame = pl.concat([df.select("problem_id", "name", "code"), pl.DataFrame(planted)])
    e2, n2, _ = rensa_decide(*polars_features(frame["code"]), t, nump)
    dropped = e2 | n2
    ids = frame["problem_id"].to_list()
    recall = {}
    for kind in PLANTS:
        idx = [k for k, pid in enumerate(ids) if pid.startswith(f"planted/{kind}/")]
        recall[kind] = f"{int(dropped[idx].sum())} / {len(idx)}"
    out["rensa + polars: planted copies dropped"] = recall
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--table", action="append", default=[], help="a stage folder or parquet (repeatable)")
    p.add_argument("--packages", nargs="+", default=list(PACKAGES), help="wheels to build the corpus from")
    p.add_argument("--threshold", type=float, default=0.8)
    p.add_argument("--num-perm", type=int, default=128)
    p.add_argument("--workers", type=int, default=None)
    p.add_argument("--parallel-min", type=int, default=None,
                   help="documents from which dedup starts worker processes "
                        "(default: curate.dedup.features.PARALLEL_MIN)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--sample", type=int, default=3000, help="documents for precision/recall")
    p.add_argument("--context-sample", type=int, default=500)
    p.add_argument("--planted", type=int, default=300, help="modules to plant copies of")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kernelbench", type=Path, default=KERNELBENCH)
    p.add_argument("--only", nargs="+",
                   default=["throughput", "precision", "planted", "kernelbench", "side-by-side"])
    p.add_argument("--out", type=Path, default=None, help="write the figures here as JSON")
    args = p.parse_args(argv)
    if args.parallel_min is not None:
        from curate.dedup import features

        features.PARALLEL_MIN = args.parallel_min

    t = time.monotonic()
    df = load_corpus(args.table, tuple(args.packages))
    print(f"corpus: {df.height} problems, {df['code'].str.len_bytes().sum() / 1e6:.1f} MB "
          f"({time.monotonic() - t:.1f} s to load or build)", flush=True)
    figures: dict[str, Any] = {"corpus": args.table or args.packages}
    for name, fn in (("throughput", throughput), ("precision", precision_recall),
                     ("planted", planted_recall), ("kernelbench", kernelbench_planted),
                     ("side-by-side", side_by_side)):
        if name in args.only:
            figures[name] = fn(df, args)
            print(f"\n== {name}\n{json.dumps(figures[name], indent=1, default=str)}", flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=1, default=str))
    return figures


if __name__ == "__main__":
    main()
