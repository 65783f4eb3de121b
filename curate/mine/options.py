"""The ``mine`` stage's options (see :mod:`curate.harness.options` for the metadata keys)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from curate.harness.options import executor_option, ray_address_option


@dataclass
class MineOptions:
    manifest: Path = field(metadata={"argument": True, "help": "YAML manifest listing sources (see manifests/)."})
    workers: Optional[int] = field(default=None, metadata={
        "help": "Worker processes (default: all cores; with --executor ray and no address, the CPUs "
                "of the local Ray instance)."})
    timeout_s: float = field(default=30.0, metadata={"help": "Seconds allowed to synthesize one module's inputs."})
    mem_mb: int = field(default=4096, metadata={"help": "Memory budget per synthesis worker (MiB)."})
    limit: Optional[int] = field(default=None, metadata={
        "help": "Stop after this many candidate modules (for trials)."})
    sample_per_source: Optional[int] = field(default=None, metadata={
        "help": "Mine a seeded random sample of at most this many classes of each source (every "
                "source of a large manifest represented, in a fraction of the time)."})
    sample_seed: int = field(default=0, metadata={"help": "Seed of --sample-per-source."})
    executor: str = executor_option(
        "Where indexing, closures and synthesis run: 'local' (a process pool on this "
        "machine) or 'ray' (a Ray cluster).")
    ray_address: Optional[str] = ray_address_option()
    retry: tuple[str, ...] = field(default=(), metadata={"sep": ",", "help": (
        "Resuming a stopped run: synthesize again the items its journal rejected for these reasons "
        "(comma-separated, e.g. 'constructor_failed,no_runnable_inputs', or 'all'), after an upgrade.")})
    export_pending: Optional[Path] = field(default=None, metadata={
        "help": "Plan, then write the pending syntheses to this file (.jsonl.xz) and stop: run them "
                "elsewhere with 'python -m curate.mine.offload FILE --out DIR' (torch alone needed there)."})
    import_outcomes: tuple[Path, ...] = field(default=(), metadata={"sep": ",", "help": (
        "Outcome files of curate.mine.offload (comma-separated) to merge into the run's journal "
        "before synthesizing what is left.")})
    cache_dir: Optional[Path] = field(default=None, metadata={
        "help": "Download and clone cache (default: $CURATE_CACHE or ~/.cache/curate)."})
