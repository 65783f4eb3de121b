"""Planted near-duplicates for the dedup benchmark: a real module with its identifiers
renamed, methods reordered, reformatted, comments and docstrings changed (:data:`PLANTS`),
and KernelBench problems planted as mined rows (:func:`plant_kernelbench`).
"""

from __future__ import annotations

import ast
import random
import re

import polars as pl

from curate.bench.dedup.corpus import SPEC
from curate.problem import INPUTS_MARKER, assemble


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
