"""Per-document features for dedup: normalized hash, op names, MinHash signature.

:func:`featurize_table` computes them for many documents: token-level normalization and
shingles (:mod:`.tokens`) and signatures (:mod:`.minhash`) in batches of :data:`BATCH`
documents, compiled code that releases the GIL, so chunks of :data:`CHUNK` documents run
on a pool of threads, one per core, in this process (no worker process to start).

From :data:`PARALLEL_MIN` documents on, when there is parsing to do besides (KernelBench
screening, ``parse_check``: Python that holds the GIL), chunks go to a local pool of
worker processes as well; a spawned worker costs about 0.6 CPU-s of imports (polars,
numpy) plus numba's start (about 2 s: its import and first use, most of that an import
of scipy's BLAS check) before it takes a chunk, so only a large input pays for one.
Workers run polars single-threaded and their chunks in one thread, so that the pool, not
their thread pools, spreads the work over the cores.
"""

from __future__ import annotations

import os
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import ContextManager, Sequence

import numpy as np
import polars as pl

from curate.cpus import cpu_count
from curate.dedup.minhash import sign
from curate.scoped import scoped_items
from curate.dedup.tokens import OP_NAMES, normalize_batch

BATCH = 512
CHUNK = 256
"""Documents per chunk for the threads (about 13 ms of compiled work on one core): the
last chunks decide when the threads finish together, and 512 left one thread idle for
up to a chunk at the end of a small input; the CPU per document at 256 measured the same
as at 512 within noise (per-chunk buffers and the byte-token table are small)."""
PARALLEL_MIN = 65536
"""Documents from which :func:`featurize_table` also starts worker processes, when it
screens for contamination or parses every document (parsing holds the GIL, so threads do
not spread it): about 5-10 CPU-s of parsing at the benchmark corpus's rate (0.4-0.65
CPU-s per 5,899 documents with KernelBench screening), against about 3 CPU-s to start a
worker."""
_WORKER_ENV = {"POLARS_MAX_THREADS": "1", "RAYON_NUM_THREADS": "1"}


@dataclass
class Features:
    """What dedup knows of one document.

    Attributes:
        norm_hash: 32 hex characters of the normalized tokens; ``None`` if the document is
            not usable code (see ``error``).
        ops: op names the document mentions, in text order (:mod:`.tokens`).
        error: why the document is not usable code (``""`` when it is).
        n_tokens: tokens of the normalized document.
        forward_ops: the op sequence of ``Model.forward`` read from the parsed tree
            (:mod:`.ops`), when it was needed and computed; ``None`` otherwise.
    """

    norm_hash: str | None
    ops: tuple[str, ...]
    error: str
    n_tokens: int
    forward_ops: tuple[str, ...] | None = None


def _no_pairs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64)


@dataclass
class FeatureTable:
    """Features of ``n`` documents, by column.

    Attributes:
        norm_hash: ``n`` hex strings or ``None``.
        error: ``n`` strings (``""``: usable).
        n_tokens: ``(n,)`` ``int64``.
        ops: ``int32`` op ids (:data:`curate.dedup.tokens.OP_NAMES`), concatenated.
        op_offsets: ``(n + 1,)`` ``int64``: document ``i``'s ops are
            ``ops[op_offsets[i]:op_offsets[i + 1]]``.
        sigs: ``(n, num_perm)`` ``uint32`` MinHash signatures.
        ref_pairs: ``(doc, ref, jaccard)`` arrays: documents at or above the contamination
            threshold to a reference problem (when screened, :mod:`.decontaminate`).
        forward: document -> its parsed ``Model.forward`` op sequence, for the documents
            that screening chose to parse.
        chunks_in_workers: chunks that worker processes computed (:func:`featurize_table`).
        shingles, shingle_offsets: the documents' shingle hashes (``uint64``, repeats
            kept) and ``(n + 1,)`` offsets, as :class:`curate.dedup.tokens.TokenBatch`
            has them, kept for the exact Jaccard check (:mod:`.exact`) so that it does not
            normalize documents again; ``None`` when not kept.
        worker_cpu_s: CPU seconds the worker processes reported (:func:`featurize_table`).
    """

    norm_hash: list[str | None]
    error: list[str]
    n_tokens: np.ndarray
    ops: np.ndarray
    op_offsets: np.ndarray
    sigs: np.ndarray
    ref_pairs: tuple[np.ndarray, np.ndarray, np.ndarray] = field(default_factory=_no_pairs)
    forward: dict[int, tuple[str, ...] | None] = field(default_factory=dict)
    chunks_in_workers: int = 0
    shingles: np.ndarray | None = None
    shingle_offsets: np.ndarray | None = None
    worker_cpu_s: float = 0.0

    def __len__(self) -> int:
        return len(self.error)

    def op_ids(self, i: int) -> np.ndarray:
        return self.ops[self.op_offsets[i]:self.op_offsets[i + 1]]

    def op_names(self, i: int) -> tuple[str, ...]:
        return tuple(OP_NAMES[k] for k in self.op_ids(i))

    def shingles_of(self, i: int) -> np.ndarray:
        """Document ``i``'s shingle hashes (repeats kept); needs the kept shingles."""
        return self.shingles[self.shingle_offsets[i]:self.shingle_offsets[i + 1]]

    def features(self, i: int) -> Features:
        return Features(self.norm_hash[i], self.op_names(i), self.error[i], int(self.n_tokens[i]),
                        self.forward.get(i))

    @classmethod
    def concat(cls, parts: Sequence["FeatureTable"], num_perm: int) -> "FeatureTable":
        if not parts:
            return cls([], [], np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(1, np.int64),
                       np.zeros((0, num_perm), np.uint32))
        if len(parts) == 1:
            return parts[0]
        op_offsets = [np.zeros(1, np.int64)]
        keep = all(p.shingles is not None for p in parts)
        sh_offsets = [np.zeros(1, np.int64)]
        sh_base = 0
        pairs: list[list[np.ndarray]] = [[], [], []]
        forward: dict[int, tuple[str, ...] | None] = {}
        base = docs = 0
        for p in parts:
            op_offsets.append(p.op_offsets[1:] + base)
            if keep:
                sh_offsets.append(p.shingle_offsets[1:] + sh_base)
                sh_base += int(p.shingle_offsets[-1])
            base += int(p.op_offsets[-1])
            pairs[0].append(p.ref_pairs[0] + docs)
            pairs[1].append(p.ref_pairs[1])
            pairs[2].append(p.ref_pairs[2])
            forward.update({d + docs: ops for d, ops in p.forward.items()})
            docs += len(p)
        return cls([h for p in parts for h in p.norm_hash], [e for p in parts for e in p.error],
                   np.concatenate([p.n_tokens for p in parts]),
                   np.concatenate([p.ops for p in parts]), np.concatenate(op_offsets),
                   np.concatenate([p.sigs for p in parts]),
                   tuple(np.concatenate(a) for a in pairs), forward,
                   shingles=np.concatenate([p.shingles for p in parts]) if keep else None,
                   shingle_offsets=np.concatenate(sh_offsets) if keep else None)


_SCREEN = None  # a worker's decontamination screen, set when the pool starts it


def _ready() -> bool:
    return True


def _start_worker(screen) -> None:
    global _SCREEN
    _SCREEN = screen


def _worker_chunk(codes: list, num_perm: int, backend: str, parse_check: bool,
                  keep_shingles: bool) -> tuple["FeatureTable", int, float]:
    """The chunk's table, this worker's process id and its CPU seconds so far (imports
    included), which the caller adds up: a worker is not always waited for, so its CPU
    time may not reach the caller's ``RUSAGE_CHILDREN``."""
    table = featurize_chunk_table(codes, num_perm, backend, _SCREEN, parse_check,
                                  keep_shingles=keep_shingles)
    return table, os.getpid(), time.process_time()


def featurize_chunk_table(codes: Sequence, num_perm: int, backend: str = "rminhash", screen=None,
                          parse_check: bool = False, batch: int = BATCH,
                          keep_shingles: bool = True) -> FeatureTable:
    """:class:`FeatureTable` of ``codes``, in this process.

    Args:
        screen: a :class:`curate.dedup.decontaminate.Screen`: also find the documents
            near a reference problem and parse the ones it asks for (``ref_pairs``,
            ``forward``).
        parse_check: parse every usable document with ``ast``; one that does not parse
            gets an ``error`` (without it, only the documents screening parses are).
        keep_shingles: keep the shingle hashes in the table (``shingles``; 8 bytes per
            token, about 0.6x the size of the code on mined problems).
    """
    parts = []
    for s in range(0, len(codes), batch):
        part = codes[s:s + batch]
        tb = normalize_batch(part if isinstance(part, (list, pl.Series)) else list(part))
        sigs = sign(tb.shingles, tb.shingle_offsets, num_perm, backend)
        parts.append(FeatureTable(tb.norm_hash, tb.error, tb.n_tokens, tb.ops, tb.op_offsets, sigs,
                                  shingles=tb.shingles if keep_shingles else None,
                                  shingle_offsets=tb.shingle_offsets if keep_shingles else None))
    table = FeatureTable.concat(parts, num_perm)
    todo: set[int] = set()
    if screen is not None:
        from curate.dedup.decontaminate import parse_forward

        i, j, sim, todo = screen.screen(table, codes)
        table.ref_pairs = (i, j, sim)
        for d in sorted(todo):
            ops, why = parse_forward(codes[d])
            table.forward[d] = ops
            if why:
                table.error[d], table.norm_hash[d] = why, None
    if parse_check:
        for d, code in enumerate(codes):
            if not table.error[d] and d not in todo:
                why = _parse_error(code)
                if why:
                    table.error[d], table.norm_hash[d] = why, None
    return table


def _parse_error(code: str) -> str:
    import ast

    from curate.problem import INPUTS_MARKER

    try:
        ast.parse(code.split(INPUTS_MARKER, 1)[0])
    except (SyntaxError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"[:500]
    except RecursionError:
        return "RecursionError: nesting too deep to parse"
    return ""


def _worker_env() -> "ContextManager[None]":
    """Environment for worker processes spawned inside the block (they copy it at start)."""
    return scoped_items(os.environ, _WORKER_ENV)


def warm_up(num_perm: int = 128, backend: str = "rminhash") -> None:
    """Load (or compile) the compiled features code in this thread, so that threads
    started afterwards do not wait on it one after the other."""
    tb = normalize_batch(["x = 1\n"])
    sign(tb.shingles, tb.shingle_offsets, num_perm, backend)


def _executor_chunk(shared: tuple, codes: list) -> "FeatureTable":
    """One chunk's table on an executor's worker (a Ray task); ``shared`` = (num_perm, backend,
    screen, parse_check, keep_shingles), sent once per worker."""
    num_perm, backend, screen, parse_check, keep_shingles = shared
    return featurize_chunk_table(codes, num_perm, backend, screen, parse_check, keep_shingles=keep_shingles)


def featurize_table(codes: Sequence, num_perm: int, workers: int | None = None,
                    parallel_min: int | None = None, chunk: int | None = None, backend: str = "rminhash",
                    description: str = "dedup: features", screen=None,
                    parse_check: bool = False, share: bool = True,
                    keep_shingles: bool = True, executor=None) -> FeatureTable:
    """:func:`featurize_chunk_table` over many documents in chunks of ``chunk``, with a
    progress bar, on ``workers`` threads (default: one per core). From ``parallel_min``
    documents on, when ``screen`` or ``parse_check`` asks for parsing, on ``workers``
    processes instead: this process and ``workers - 1`` spawned worker processes take
    chunks as they free up. This process starts at once; a worker gets chunks once it has
    started (a few seconds of imports on the CI machine), so a small input is done here
    before a worker could help, and a large one is shared by all. The result does not
    depend on ``workers`` or ``chunk``.

    Args:
        codes: a sequence of documents (a list, or anything that slices into lists, such
            as a polars String Series).
        screen, parse_check, keep_shingles: see :func:`featurize_chunk_table`.
        share: this process takes chunks too (False: from ``parallel_min`` documents on,
            only worker processes do, parsing or not: for a caller with other work, and
            for tests).
        executor: a :class:`curate.executor.Executor` (Ray) whose tasks featurize every
            chunk instead (``workers``, ``parallel_min`` and ``share`` then do not apply).
    """
    from curate.progress import progress  # rich: not needed in the workers

    workers = workers or cpu_count()
    parallel_min = PARALLEL_MIN if parallel_min is None else parallel_min
    chunk = chunk or CHUNK
    n = len(codes)
    bounds = list(range(0, n, chunk))

    def piece(s: int) -> list | pl.Series:
        part = codes[s:s + chunk]
        if isinstance(part, pl.Series):
            return part
        return part.to_list() if hasattr(part, "to_list") else list(part)

    def local(k: int) -> FeatureTable:
        return featurize_chunk_table(piece(bounds[k]), num_perm, backend, screen, parse_check,
                                     keep_shingles=keep_shingles)

    if executor is not None:
        shared = (num_perm, backend, screen, parse_check, keep_shingles)
        stream = executor.map(_executor_chunk, [piece(b) for b in bounds], shared=shared)
        table = FeatureTable.concat(list(progress(stream, len(bounds), description)), num_perm)
        table.chunks_in_workers = len(bounds)
        return table
    parsing = screen is not None or parse_check
    if n < parallel_min or workers <= 1 or len(bounds) < 2 or (share and not parsing):
        if workers > 1 and len(bounds) > 1:
            warm_up(num_perm, backend)  # compile or load once, before the threads
            with ThreadPoolExecutor(workers) as pool:
                results = pool.map(local, range(len(bounds)))
                table = FeatureTable.concat(list(progress(results, len(bounds), description)),
                                            num_perm)
        else:
            results = (local(k) for k in range(len(bounds)))
            table = FeatureTable.concat(list(progress(results, len(bounds), description)), num_perm)
        table.chunks_in_workers = 0
        return table
    parts: dict[int, FeatureTable] = {}
    mine: set[int] = set()  # chunks this process did
    worker_cpu: dict[int, float] = {}  # worker pid -> its CPU seconds at its last chunk
    todo = deque(range(len(bounds)))
    pool = ProcessPoolExecutor(workers - 1, mp_context=get_context("spawn"),
                               initializer=_start_worker, initargs=(screen,))
    try:
        with _worker_env():  # the workers start with these first submissions
            probes = [pool.submit(_ready) for _ in range(workers - 1)]
        pending: dict = {}
        bar = progress(iter(int, 1), len(bounds), description)
        while todo or pending:
            for f in [f for f in pending if f.done()]:
                parts[pending.pop(f)], pid, cpu = f.result()
                worker_cpu[pid] = max(cpu, worker_cpu.get(pid, 0.0))
                next(bar, None)
            # chunks go to a worker only once it has started (a second one waits behind
            # the first), so that none waits for a worker still importing its modules
            ready = sum(p.done() for p in probes)
            while todo and len(pending) < 2 * ready:
                k = todo.pop()  # workers take chunks from the end, this process from the start
                with _worker_env():
                    pending[pool.submit(_worker_chunk, piece(bounds[k]), num_perm, backend,
                                        parse_check, keep_shingles)] = k
            if todo and share:
                k = todo.popleft()
                parts[k] = local(k)
                mine.add(k)
                next(bar, None)
            elif pending:
                wait(list(pending), return_when=FIRST_COMPLETED)
            elif todo:
                wait(probes, return_when=FIRST_COMPLETED)
        bar.close()
    finally:
        # a worker that never got a chunk may still be importing: do not wait for it
        pool.shutdown(wait=False, cancel_futures=True)
    table = FeatureTable.concat([parts[k] for k in range(len(bounds))], num_perm)
    table.chunks_in_workers = len(bounds) - len(mine)
    table.worker_cpu_s = sum(worker_cpu.values())
    return table


def featurize(codes: Sequence, num_perm: int, workers: int | None = None,
              parallel_min: int = PARALLEL_MIN, chunk: int = CHUNK, backend: str = "rminhash",
              description: str = "dedup: features") -> tuple[list[Features], np.ndarray]:
    """:func:`featurize_table` as a list of :class:`Features` and the ``(n, num_perm)``
    ``uint32`` signatures."""
    table = featurize_table(codes, num_perm, workers, parallel_min, chunk, backend, description,
                            keep_shingles=False)
    return [table.features(i) for i in range(len(table))], table.sigs


def featurize_chunk(codes: Sequence, num_perm: int, backend: str = "rminhash") -> tuple[list[Features], np.ndarray]:
    """:func:`featurize` of ``codes`` in this process."""
    table = featurize_chunk_table(codes, num_perm, backend, keep_shingles=False)
    return [table.features(i) for i in range(len(table))], table.sigs
