"""Synthesis on another machine: a run's pending syntheses go out as one file, come back as
outcome files, and are merged into the run's journal.

Synthesis (constructing each mined class and finding inputs it runs on) is most of a mine
run's time and needs only torch and curate's synthesizer: no sources, no libcst, no network.
A machine with more cores and no route to the package index (a GPU host, a batch node) can
do it; the planning machine keeps the sources and the run.

    curate mine MANIFEST --out RUN --export-pending tasks.jsonl.xz     # plan, write what is pending
    python -m curate.mine.offload tasks.jsonl.xz --out DIR             # anywhere with torch
    curate mine MANIFEST --out RUN --import-outcomes DIR/outcomes-000.jsonl.xz,...

The runner writes ``outcomes-NNN.jsonl.xz`` shards (each under ``--shard-mib`` compressed,
for transports that limit file sizes) and ``done.txt``, the keys finished; ``--skip`` takes
earlier ``done.txt`` files, so a run cut into several calls of limited length goes on where
the last stopped. ``--deadline-s`` stops starting tasks so that the call ends in time, with
every outcome written. An outcome is what the local executor would have journaled: the same
sandbox (time, memory and guard limits), the same synthesizer (its version is recorded with
the outcome), so a merged run reads as one.
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable, Iterator

from curate.cpus import cpu_count

#: lzma preset for outcome and task files: closures repeat the same stand-ins and
#: configuration classes, so even a fast preset compresses them 10-30 times.
PRESET = 3


def write_tasks(path: Path | str, items: Iterable[tuple[str, tuple]]) -> int:
    """Write ``(key, synthesize_task args)`` pairs as compressed JSON lines; return the count."""
    n = 0
    with lzma.open(path, "wt", preset=PRESET) as f:
        for key, args in items:
            f.write(json.dumps({"key": key, "args": list(args)}) + "\n")
            n += 1
    return n


def read_lines(path: Path | str) -> Iterator[dict[str, Any]]:
    """The JSON lines of a task or outcome file (``.xz`` compressed or plain)."""
    opener = lzma.open if str(path).endswith(".xz") else open
    with opener(path, "rt") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def read_outcomes(paths: Iterable[Path | str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(key, outcome)`` of each outcome file's lines, in order."""
    for path in paths:
        for item in read_lines(path):
            yield item["key"], item["value"]


def _write_shards(lines: list[str], out: Path, shard_mib: float, threads: int) -> list[Path]:
    """Compress ``lines`` into as few ``outcomes-NNN.jsonl.xz`` files as keep each under
    ``shard_mib`` MiB (estimated from a first compression, then split further if needed)."""
    limit = int(shard_mib * 2**20)
    parts = 1
    while True:
        size = -(-len(lines) // parts) if lines else 0
        chunks = [lines[i:i + size] for i in range(0, len(lines), size)] if lines else [[]]
        with ThreadPoolExecutor(max(1, threads)) as pool:  # lzma releases the GIL
            blobs = list(pool.map(lambda c: lzma.compress("".join(c).encode(), preset=PRESET), chunks))
        biggest = max(len(b) for b in blobs)
        if biggest <= limit or size <= 1:
            break
        parts = max(parts + 1, int(parts * biggest / (0.9 * limit)) + 1)
    paths = []
    for i, blob in enumerate(blobs):
        p = out / f"outcomes-{i:03d}.jsonl.xz"
        p.write_bytes(blob)
        paths.append(p)
    return paths


def run_tasks(tasks: Path | str, out: Path | str, workers: int | None = None, timeout_s: float = 30.0,
              mem_mb: int = 4096, deadline_s: float | None = None, skip: Iterable[Path | str] = (),
              shard_mib: float = 15.0, progress_every: int = 200) -> dict[str, Any]:
    """Synthesize the tasks of ``tasks`` in the sandbox; write outcome shards and ``done.txt``
    into ``out``. Returns counts: ``{"tasks", "skipped", "done", "kept", "seconds", "files"}``.

    Args:
        workers: sandbox processes at once (default: CPU count).
        timeout_s, mem_mb: per task, as ``curate mine`` (must match the run's, whose journal
            fingerprint holds them).
        deadline_s: seconds after which no task is started (those running finish, within
            ``timeout_s``); None runs every task.
        skip: ``done.txt`` files of earlier calls: their keys are not run again.
    """
    from curate.mine.synthesize import synthesis_version, synthesize_task
    from curate.sandbox import Sandbox

    t0 = time.monotonic()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    done_before = set()
    for p in skip:
        done_before |= {k.strip() for k in Path(p).read_text().split() if k.strip()}
    items = [t for t in read_lines(tasks) if t["key"] not in done_before]
    version = synthesis_version()

    def calls() -> Iterator[tuple[tuple, dict]]:
        for t in items:
            if deadline_s is not None and time.monotonic() - t0 > deadline_s:
                return
            yield tuple(t["args"]), {}

    sandbox = Sandbox(workers=workers, timeout_s=timeout_s, mem_mb=mem_mb, guard=True)
    lines: list[str] = []
    keys: list[str] = []
    kept = 0
    for n, (i, outcome) in enumerate(sandbox.map(synthesize_task, calls()), start=1):
        value = outcome.value if outcome.ok else {"ok": False, "reason": outcome.status, "detail": outcome.error}
        value = {**value, "synthesis": version}
        kept += bool(value.get("ok"))
        keys.append(items[i]["key"])
        lines.append(json.dumps({"key": items[i]["key"], "value": value}, default=str) + "\n")
        if progress_every and n % progress_every == 0:
            print(f"synthesized {n}/{len(items)}, kept {kept}, {time.monotonic() - t0:.0f} s", flush=True)
    (out / "done.txt").write_text("".join(k + "\n" for k in keys))
    files = _write_shards(lines, out, shard_mib, workers or cpu_count())
    return {"tasks": len(items) + len(done_before), "skipped": len(done_before), "done": len(keys),
            "kept": kept, "seconds": round(time.monotonic() - t0, 1), "files": [p.name for p in files]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m curate.mine.offload",
        description="Synthesize a mine run's exported pending tasks (curate mine --export-pending) "
                    "on this machine; merge the outcome files back with curate mine --import-outcomes.")
    ap.add_argument("tasks", type=Path, help="the exported tasks file (.jsonl.xz)")
    ap.add_argument("--out", type=Path, required=True, help="folder for outcome shards and done.txt")
    ap.add_argument("--workers", type=int, default=None, help="sandbox processes (default: all cores)")
    ap.add_argument("--timeout-s", type=float, default=30.0, help="seconds per task, as the run's (30)")
    ap.add_argument("--mem-mb", type=int, default=4096, help="memory budget per task, as the run's (4096 MiB)")
    ap.add_argument("--deadline-s", type=float, default=None,
                    help="start no task after this many seconds (the call then ends within --timeout-s)")
    ap.add_argument("--skip", type=Path, nargs="*", default=[], help="done.txt files of earlier calls")
    ap.add_argument("--shard-mib", type=float, default=15.0, help="largest outcome file, compressed (MiB)")
    args = ap.parse_args(argv)
    stats = run_tasks(args.tasks, args.out, args.workers, args.timeout_s, args.mem_mb, args.deadline_s,
                      args.skip, args.shard_mib)
    print(json.dumps(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
