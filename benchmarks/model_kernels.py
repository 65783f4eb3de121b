"""The reward on real model-written kernels, beside KernelBench's own evaluator, on one GPU host.

Reads ``tests/data/model_kernels/kernels.jsonl`` (public kernels written by language models
for KernelBench problems, with their publishers' verdicts; see its PROVENANCE.md), picks a
seeded, stratified sample, and verifies each kernel twice, concurrently:

- **ours**: ``curate.reward.compute_score`` (persistent verification workers, every GPU of the
  host, the full reward: 5 fresh input sets, the timed-call checks, timing against eager) on
  the KernelBench problem at its own sizes, as shipped in ``curate/data/kernelbench``;
- **KernelBench**: ``eval_kernel_against_ref`` from a checkout of ScalingIntelligence/KernelBench
  (not shipped with curate: ``--kb-src`` names its ``src`` folder), 5 correctness trials, no
  timing, one subprocess per kernel (``benchmarks/kb_eval_one.py``) pinned to a GPU in turn.

Both build C++/CUDA extensions through :func:`curate.verify.extensions.isolated`, so each
kernel's extension compiles once (``TORCH_CUDA_ARCH_LIST`` is fixed so both derive the same
build key) and concurrent kernels never share a build folder.

Results are appended as they come to ``OUT/ours.jsonl`` and ``OUT/kb.jsonl`` (a rerun with the
same ``--out`` skips what is there, so the work spans several device calls); ``--report``
joins them with the published verdicts (and, with ``--kb-src``, KernelBench's static checker)
into ``OUT/report.json`` and prints the agreement; the report lists every disagreement with the
reason our verifier gave.

    python benchmarks/model_kernels.py --kb-src .kb/src --out $OUT/mk --limit 130
    python benchmarks/model_kernels.py --out $OUT/mk --report
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "data" / "model_kernels" / "kernels.jsonl"


def load_corpus(path: Path = CORPUS) -> list[dict]:
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


def problems() -> dict[tuple[int, int], str]:
    sys.path.insert(0, str(REPO))
    from curate.data import kernelbench_problems

    return {(p["level"], p["problem_id"]): p["code"] for p in kernelbench_problems()}


def sample(records: list[dict], limit: int, seed: int) -> list[dict]:
    """Every flagged hack and every Triton kernel, then CUDA kernels drawn in turn from each
    (source, level, published verdict) bucket, until ``limit``; only problems that match
    ours (the publisher's reference is byte-identical to the shipped copy)."""
    rng = random.Random(seed)
    usable = [r for r in records if r["backend"] in ("cuda", "triton")
              and r["annotations"].get("problem_matches_project")]
    chosen = [r for r in usable if r["annotations"].get("suspected_reward_hack") or r["backend"] == "triton"]
    buckets: dict[tuple, list[dict]] = defaultdict(list)
    for r in usable:
        if r not in chosen:
            buckets[(r["source"], r["level"], r["published"].get("correct"))].append(r)
    for b in buckets.values():
        rng.shuffle(b)
    keys = sorted(buckets, key=str)
    while len(chosen) < limit and any(buckets.values()):
        for k in keys:
            if buckets[k] and len(chosen) < limit:
                chosen.append(buckets[k].pop())
    return chosen


def done_ids(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {json.loads(line)["id"] for line in path.open() if line.strip()}


class Appender:
    """Appends one JSON line per result, from several threads."""

    def __init__(self, path: Path) -> None:
        self.path, self.lock = path, threading.Lock()

    def __call__(self, row: dict) -> None:
        with self.lock, self.path.open("a") as f:
            f.write(json.dumps(row, default=str) + "\n")


def run_ours(jobs: list[dict], refs: dict, out: Appender, workers: int) -> None:
    """compute_score on each job from ``workers`` threads (the reward's own pool: 8 workers
    per GPU by default)."""
    from curate.reward import compute_score

    def one(r: dict) -> None:
        t0 = time.time()
        s = compute_score("kernelbench", f"```python\n{r['code']}\n```", refs[(r["level"], r["problem_id"])])
        out({"id": r["id"], "compiled": s["compiled"], "correct": s["correct"], "score": s["score"],
             "speedup_vs_eager": s["speedup_vs_eager"], "reason": s["reason"][:600],
             "seconds": round(time.time() - t0, 2), "finished_at": time.time()})

    with ThreadPoolExecutor(max_workers=workers) as ex:
        list(ex.map(one, jobs))


def run_kb(jobs: list[dict], refs: dict, out: Appender, kb_src: str, concurrency: int, gpus: int,
           timeout_s: float) -> None:
    runner = REPO / "benchmarks" / "kb_eval_one.py"

    def one(i_r: tuple[int, dict]) -> None:
        i, r = i_r
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"ref": refs[(r["level"], r["problem_id"])], "code": r["code"],
                       "backend": r["backend"]}, f)
        # spread over the GPUs this process sees (CUDA_VISIBLE_DEVICES names them by index)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
        visible = visible if visible != [""] else [str(g) for g in range(max(1, gpus))]
        env = dict(os.environ, KB_SRC=kb_src, CUDA_VISIBLE_DEVICES=visible[i % len(visible)])
        t0 = time.time()
        row = {"id": r["id"]}
        try:
            p = subprocess.run([sys.executable, str(runner), f.name], capture_output=True, text=True,
                               timeout=timeout_s, env=env)
            last = [line for line in p.stdout.splitlines() if line.startswith("{")]
            if last:
                row.update(json.loads(last[-1]))
            else:
                row.update(evaluated=False, error=(p.stderr or p.stdout)[-600:])
        except subprocess.TimeoutExpired:
            row.update(evaluated=False, error=f"timeout after {timeout_s:.0f} s")
        finally:
            os.unlink(f.name)
        row["seconds"] = round(time.time() - t0, 2)
        out(row)

    with ThreadPoolExecutor(max_workers=concurrency) as ex:
        list(ex.map(one, enumerate(jobs)))


def _oom(text: str) -> bool:
    return "out of memory" in text.lower()


def kb_static(code: str, backend: str, kb_src: str | None) -> dict | None:
    """KernelBench's static checker on one kernel: its backend implementation rule alone (a
    CUDA submission defines a ``__global__`` kernel built with ``load_inline``, a Triton one an
    ``@triton.jit`` kernel using ``tl.*``), and its default strict set beside it."""
    if not kb_src:
        return None
    import importlib.util

    # the checker's own file (regular expressions only): the package's __init__ would import
    # KernelBench's LLM clients
    spec = importlib.util.spec_from_file_location(
        "kb_static_checker", os.path.join(kb_src, "kernelbench", "kernel_static_checker.py"))
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    impl = checker.BACKEND_IMPL_CHECK[backend]
    impl_bad, impl_msg = checker.CHECK_FUNCTIONS[impl](code)
    valid, errors, _ = checker.validate_kernel_static(code, backend=backend, precision="fp32")
    return {"impl_ok": not impl_bad, "impl_msg": impl_msg, "strict_ok": valid, "strict_errors": errors[:3]}


def report(out_dir: Path, records: list[dict], kb_src: str | None = None) -> dict:
    """Join both sides' verdicts with the published ones.

    A side *evaluated* a kernel when it gave a verdict about the kernel: not when the
    reference itself failed, nor when the GPU ran out of memory beside the other evaluations
    (an environment failure, re-run alone later). Agreement is counted on kernels both sides
    evaluated, against KernelBench's evaluator alone and with its static checker's backend
    rule (KernelBench's scripts run the checker before evaluating)."""
    by_id = {r["id"]: r for r in records}

    def rows(name: str) -> dict:
        path = out_dir / name
        return {json.loads(l)["id"]: json.loads(l) for l in path.open() if l.strip()} if path.exists() else {}

    ours, kb = rows("ours.jsonl"), rows("kb.jsonl")
    both, agree, agree_impl, disagreements, hacks = 0, 0, 0, [], []
    for i, o in ours.items():
        rec = by_id[i]
        k = kb.get(i)
        static = kb_static(rec["code"], rec["backend"], kb_src)
        if rec["annotations"].get("suspected_reward_hack"):
            hacks.append({"id": i, "hack": rec["annotations"]["suspected_reward_hack"], "ours_correct": o["correct"],
                          "ours_reason": o["reason"][:200], "kb_correct": (k or {}).get("correctness")})
        ours_env = o["reason"].startswith("reference failed") or _oom(o["reason"])
        kb_env = not k or not k.get("evaluated", True) or _oom(str(k.get("metadata")))
        if ours_env or kb_env:
            continue
        both += 1
        kb_ok = bool(k.get("correctness"))
        kb_impl_ok = kb_ok and (static is None or static["impl_ok"])
        agree += bool(o["correct"]) == kb_ok
        agree_impl += bool(o["correct"]) == kb_impl_ok
        if bool(o["correct"]) != kb_ok or bool(o["correct"]) != kb_impl_ok:
            disagreements.append({"id": i, "backend": rec["backend"], "ours": o["correct"], "kb": kb_ok,
                                  "kb_with_backend_rule": kb_impl_ok, "published": rec["published"].get("correct"),
                                  "kb_static": static, "ours_reason": o["reason"][:300],
                                  "kb_metadata": str(k.get("metadata"))[:300]})
    pub_both = [(o["correct"], by_id[i]["published"].get("correct")) for i, o in ours.items()
                if by_id[i]["published"].get("correct") is not None and not by_id[i]["annotations"].get("env_failure")]
    ours_times = sorted(o["finished_at"] for o in ours.values() if "finished_at" in o)
    summary = {
        "kernels_ours": len(ours), "kernels_kb": len(kb), "evaluated_by_both": both,
        "agree": agree, "agreement": round(agree / both, 4) if both else None,
        "agree_with_backend_rule": agree_impl,
        "agreement_with_backend_rule": round(agree_impl / both, 4) if both else None,
        "ours_correct": sum(bool(o["correct"]) for o in ours.values()),
        "kb_correct": sum(bool(k.get("correctness")) for k in kb.values()),
        "kb_not_evaluated": sum(not k.get("evaluated", True) or _oom(str(k.get("metadata"))) for k in kb.values()),
        "ours_not_evaluated": sum(o["reason"].startswith("reference failed") or _oom(o["reason"]) for o in ours.values()),
        "agreement_with_published": round(sum(bool(a) == bool(b) for a, b in pub_both) / len(pub_both), 4)
        if pub_both else None,
        "published_compared": len(pub_both),
        "ours_reasons": Counter(o["reason"].split(":")[0][:60] for o in ours.values()).most_common(12),
        "ours_kernels_per_hour": round(3600 * (len(ours_times) - 1) / (ours_times[-1] - ours_times[0]))
        if len(ours_times) > 2 and ours_times[-1] > ours_times[0] else None,
        "hacks": hacks, "disagreements": disagreements,
    }
    (out_dir / "report.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder of ours.jsonl, kb.jsonl, report.json")
    ap.add_argument("--kb-src", help="KernelBench checkout's src folder (KernelBench's evaluator)")
    ap.add_argument("--limit", type=int, default=130, help="kernels to verify (default 130)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=8, help="our verification workers per GPU")
    ap.add_argument("--kb-concurrency", type=int, default=8, help="KernelBench evaluations at once")
    ap.add_argument("--kb-timeout-s", type=float, default=300.0)
    ap.add_argument("--only", choices=("ours", "kb"), help="run one side only")
    ap.add_argument("--report", action="store_true", help="only join the results and print")
    ap.add_argument("--warm-into", help="then verify this call's kernels again (our side, build cache "
                    "warm) into this folder, and print both passes' kernels per hour")
    args = ap.parse_args(argv)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    records = load_corpus()
    if args.report:
        print(json.dumps({k: v for k, v in report(out_dir, records, args.kb_src).items()
                          if k not in ("hacks", "disagreements")}, indent=1, default=str))
        return
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")  # one build key for both evaluators
    import torch

    gpus = torch.cuda.device_count()
    refs = problems()
    chosen = sample(records, args.limit, args.seed)
    todo_ours = [r for r in chosen if r["id"] not in done_ids(out_dir / "ours.jsonl")]
    todo_kb = [r for r in chosen if r["id"] not in done_ids(out_dir / "kb.jsonl")]
    print(f"{len(chosen)} kernels chosen ({Counter(r['backend'] for r in chosen)}); to do: ours {len(todo_ours)}, "
          f"KernelBench {len(todo_kb)}; {gpus} GPU(s)", flush=True)
    threads = []
    if args.only != "kb":
        threads.append(threading.Thread(target=run_ours, args=(
            todo_ours, refs, Appender(out_dir / "ours.jsonl"), args.workers * max(1, gpus))))
    if args.only != "ours" and args.kb_src:
        threads.append(threading.Thread(target=run_kb, args=(
            todo_kb, refs, Appender(out_dir / "kb.jsonl"), args.kb_src, args.kb_concurrency, gpus,
            args.kb_timeout_s)))
    started = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if args.warm_into and todo_ours:
        cold_s = time.time() - started
        warm_dir = Path(args.warm_into)
        warm_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.time()
        run_ours(todo_ours, refs, Appender(warm_dir / "ours.jsonl"), args.workers * max(1, gpus))
        warm_s = time.time() - t0
        rates = {"kernels": len(todo_ours), "cold_s": round(cold_s, 1), "warm_s": round(warm_s, 1),
                 "cold_per_hour": round(3600 * len(todo_ours) / cold_s),
                 "warm_per_hour": round(3600 * len(todo_ours) / warm_s),
                 "cold_includes_kernelbench_side": args.only is None and bool(args.kb_src)}
        (warm_dir / "rates.json").write_text(json.dumps(rates, indent=1))
        print(json.dumps(rates), flush=True)
    print(json.dumps({k: v for k, v in report(out_dir, records, args.kb_src).items()
                      if k not in ("hacks", "disagreements")}, indent=1, default=str))


if __name__ == "__main__":
    main()
