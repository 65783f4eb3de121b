"""Re-derive the rows of ``curate/data/passrates/results.csv`` that come from the sources added on
2026-11-28 (``llmkernel_triton``, ``aikg_agent``, ``younglord_musa``), from clones of the
publishers' repositories at the commits ``PROVENANCE.md`` names, and compare them with the file.

    git clone https://github.com/Alisehen/LLMKernel;  git -C LLMKernel checkout d078a38
    git clone https://github.com/mindspore-ai/akg;    git -C akg checkout 6ec75bd
    git clone https://github.com/Young-Lord/KernelBench Young-Lord-KernelBench; git -C ... checkout e0bb01e
    python benchmarks/passrates_sources.py --llmkernel LLMKernel --akg akg --younglord Young-Lord-KernelBench

Each path may be a work tree or a bare repository; files are read at ``--rev`` (default
``HEAD``) with ``git show``. Prints, per source and model, rows and correct ones, and whether
they equal the file's rows; ``--write FILE`` writes the derived rows as CSV.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from curate.data import kernelbench_problems  # noqa: E402

RESULTS = ROOT / "curate" / "data" / "passrates" / "results.csv"
FIELDS = ["source", "model", "run", "level", "problem_id", "problem_name", "n_samples", "n_no_kernel",
          "n_static_rejected", "n_env_failure", "n_compiled", "n_correct", "n_fast1", "hardware",
          "problem_matches_project"]
PROBLEMS = {(p["level"], p["problem_id"]): p for p in kernelbench_problems()}


class Repo:
    def __init__(self, path: str, rev: str):
        self.path, self.rev = path, rev

    def _git(self, *args: str, stdin: bytes | None = None) -> bytes:
        return subprocess.run(["git", "-C", self.path, *args], input=stdin, capture_output=True, check=True).stdout

    def show(self, path: str) -> str:
        return self._git("show", f"{self.rev}:{path}").decode()

    def files(self, under: str) -> list[str]:
        return self._git("ls-tree", "-r", "--name-only", self.rev, under).decode().splitlines()

    def blobs(self, paths: list[str]) -> list[bytes | None]:
        """Many files at once (``git cat-file --batch``); None where a path is missing."""
        out = self._git("cat-file", "--batch", stdin="".join(f"{self.rev}:{p}\n" for p in paths).encode())
        res: list[bytes | None] = []
        i = 0
        while i < len(out):
            nl = out.index(b"\n", i)
            head = out[i:nl].split()
            if head[-1] == b"missing":
                res.append(None)
                i = nl + 1
                continue
            size = int(head[2])
            res.append(out[nl + 1:nl + 1 + size])
            i = nl + 1 + size + 1
        return res

    def matches(self) -> dict[tuple[int, int], int | None]:
        """1/0 per problem: the repository's ``KernelBench/level<L>/<name>.py`` equals ours byte
        for byte; None where it has no such file."""
        keys = sorted(PROBLEMS)
        blobs = self.blobs([f"KernelBench/level{lv}/{PROBLEMS[(lv, i)]['name']}.py" for lv, i in keys])
        return {k: None if b is None else int(b.decode() == PROBLEMS[k]["code"]) for k, b in zip(keys, blobs)}


def row(source: str, model: str, run: str, level: int, pid: int, *, correct: bool, compiled: bool | None,
        fast1: bool | None = None, env: bool = False, hardware: str = "", match: int | None = None) -> dict:
    return {"source": source, "model": model, "run": run, "level": level, "problem_id": pid,
            "problem_name": PROBLEMS[(level, pid)]["name"], "n_samples": 1, "n_no_kernel": 0,
            "n_static_rejected": 0, "n_env_failure": int(env), "n_compiled": "" if compiled is None else int(compiled),
            "n_correct": int(correct), "n_fast1": "" if fast1 is None else int(fast1), "hardware": hardware,
            "problem_matches_project": "" if match is None else match}


def llmkernel(repo: Repo) -> list[dict]:
    match = repo.matches()
    out = []
    # one-shot Triton kernels of an SGLang-served model: the summary tables
    for lv in (1, 2, 3):
        text = repo.show(f"Tabel/summary_table_level{lv}.md")
        kinds = dict(re.findall(r"^- \*\*([^*]+)\*\*: ([A-Za-z]+)", text, re.M))
        for m in re.finditer(r"^\| (\d+) \| (\S+) \| (\S+) \| (✅|❌) \|", text, re.M):
            pid, name, speedup, ok = int(m[1]), m[2], m[3], m[4] == "✅"
            assert PROBLEMS[(lv, pid)]["name"] == name, (lv, pid, name)
            out.append(row("llmkernel_triton", "unnamed model served by SGLang [one-shot Triton]",
                           f"Tabel/summary_table_level{lv}", lv, pid, correct=ok,
                           compiled=ok or kinds.get(name) != "CompilationError",
                           fast1=ok and float(speedup) > 1.0, match=match[(lv, pid)]))
    # the DeepSeek agent's seed kernels: the evaluation of phase "seed" per problem
    paths = [p for p in repo.files("results") if "/evaluation/eval_" in p]
    seeds: dict[tuple[int, int], dict] = {}
    for path, blob in zip(paths, repo.blobs(paths)):
        doc = json.loads(blob)
        if doc["phase"] != "seed":
            continue
        level_dir, name = path.split("/")[1:3]
        k = (int(level_dir.removeprefix("level")), int(name.split("_")[0]))
        assert PROBLEMS[k]["name"] == name and k not in seeds, (path, k)
        seeds[k] = doc
    for (lv, pid), doc in sorted(seeds.items()):
        ok = str(doc["runnable"]) == "True"
        msg = doc.get("message") or ""
        out.append(row("llmkernel_triton", "deepseek [seed kernels of a multi-stage agent]", "results (phase seed)",
                       lv, pid, correct=ok, compiled=ok or not re.search(r"\b(SyntaxError|IndentationError)\b", msg),
                       fast1=ok and float(doc.get("score") or 0) > 1.0,
                       env=bool(re.search(r"out of memory", msg, re.I)), match=match[(lv, pid)]))
    return out


AIKG_COLUMNS = {"Ascend": "triton_ascend", "CUDA": "triton_cuda", "CUDA C": "cuda_c", "CPP": "cpp",
                "TileLang_CUDA": "tilelang_cuda"}
AIKG_HARDWARE = {"triton_ascend": "Ascend 910B4", "cpp": "CPU"}


def aikg(repo: Repo) -> list[dict]:
    out = []
    for report in ("BenchmarkResults202509", "DSLBenchmarkResults202509"):
        text = repo.show(f"akg_agents/docs/v1/{report}.md")
        head = re.search(r"^\| No\. \| Kernel Name +\|(.+)\|\s*$", text, re.M)
        configs = [AIKG_COLUMNS[c.strip()] for c in head[1].split("|")]
        for m in re.finditer(r"^\| (\d+) \| (\S+) \|(.+)\|\s*$", text, re.M):
            pid, name = int(m[1]), m[2]
            if PROBLEMS[(1, pid)]["name"] != f"{pid}_{name}":
                continue  # an older KernelBench's problem at this number (50 and 97)
            for cfg, mark in zip(configs, (c.strip() for c in m[3].split("|"))):
                assert mark in ("✓", "✗"), mark
                out.append(row("aikg_agent", f"AIKG agent [{cfg}, pass@4]", report, 1, pid, correct=mark == "✓",
                               compiled=None, hardware=AIKG_HARDWARE.get(cfg, "")))
    return out


def younglord(repo: Repo) -> list[dict]:
    match = repo.matches()
    run = "deepseek_api_level1_musa_s4000_baseline"
    out = []
    for r in csv.DictReader(repo.show(f"{run}/results.csv").splitlines()):
        pid = int(r["problem_id"])
        assert PROBLEMS[(1, pid)]["name"] + ".py" == r["problem_name"]
        ok = r["correctness"] == "True"
        out.append(row("younglord_musa", "DeepSeek API [MUSA kernels]", run, 1, pid, correct=ok,
                       compiled=r["compiled"] == "True", fast1=ok and float(r["speedup_over_eager"] or 0) > 1.0,
                       env=pid == 72,  # the publisher's known fault of the MUSA reference
                       hardware="Moore Threads MTT S4000", match=match[(1, pid)]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llmkernel", help="clone of Alisehen/LLMKernel")
    ap.add_argument("--akg", help="clone of mindspore-ai/akg")
    ap.add_argument("--younglord", help="clone of Young-Lord/KernelBench")
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--write", help="write the derived rows to this CSV")
    args = ap.parse_args()
    rows: list[dict] = []
    for path, fn in ((args.llmkernel, llmkernel), (args.akg, aikg), (args.younglord, younglord)):
        if path:
            rows += fn(Repo(path, args.rev))
    with RESULTS.open() as f:
        shipped = {(r["source"], r["model"], r["level"], r["problem_id"]): r for r in csv.DictReader(f)}
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["source"], r["model"]), []).append(r)
    for (source, model), rs in groups.items():
        same = all(shipped.get((source, model, str(r["level"]), str(r["problem_id"])))
                   == {k: str(v) for k, v in r.items()} for r in rs)
        print(f"{source} | {model}: {len(rs)} rows, {sum(r['n_correct'] for r in rs)} correct; "
              f"{'equal to' if same else 'DIFFERENT from'} results.csv")
    if args.write:
        with open(args.write, "w", newline="") as f:
            w = csv.DictWriter(f, FIELDS)
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
