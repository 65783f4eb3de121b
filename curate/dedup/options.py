"""The ``dedup`` stage's options (see :mod:`curate.harness.options` for the metadata keys)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from curate.harness.options import executor_option, ray_address_option


@dataclass
class DedupOptions:
    threshold: float = field(default=0.8, metadata={"help": "MinHash Jaccard threshold for near-duplicates."})
    num_perm: int = field(default=128, metadata={"help": "MinHash permutations."})
    kernelbench: str = field(default="auto", metadata={
        "help": "Decontamination reference: a KernelBench problems JSONL, a Hugging Face dataset id, "
                "'auto' (local copy, then ScalingIntelligence/KernelBench) or 'none'."})
    contamination_threshold: float = field(default=0.6, metadata={
        "help": "MinHash Jaccard to a KernelBench problem above which a problem is contaminated."})
    backend: str = field(default="rminhash", metadata={
        "help": "MinHash and LSH: 'rminhash' (compiled R-MinHash, fast) or 'datasketch' (signatures "
                "that interchange with datasketch's MinHash)."})
    workers: Optional[int] = field(default=None, metadata={"help": "Processes (default: all cores)."})
    parse_check: bool = field(default=False, metadata={
        "help": "Parse every problem and reject the ones that are not valid Python (slower)."})
    executor: str = executor_option(
        "Where documents are featurized (normalized, hashed, screened against KernelBench): "
        "'local' (threads and processes here) or 'ray' (Ray tasks); the rest runs here.")
    ray_address: Optional[str] = ray_address_option()
