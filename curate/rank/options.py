"""The ``rank`` stage's options (see :mod:`curate.harness.options` for the metadata keys)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from curate.harness.options import executor_option, ray_address_option


@dataclass
class RankOptions:
    solver: str = field(default="none", metadata={
        "help": "'none' (difficulty predicted from the problem's structure and code), 'inductor', "
                "'openai' or 'completions' (a solver's verified pass rate sets the difficulty)."})
    k: int = field(default=1, metadata={"help": "Candidates per problem."})
    completions: Optional[Path] = field(default=None, metadata={
        "help": "JSONL of {problem_id, completion} (solver=completions); KernelBench rows also by "
                "{level, problem_name | problem_id, code}."})
    base_url: Optional[str] = field(default=None, metadata={"help": "OpenAI-compatible endpoint (solver=openai)."})
    model: Optional[str] = field(default=None, metadata={"help": "Model name at the endpoint (solver=openai)."})
    api_key_env: str = field(default="OPENAI_API_KEY", metadata={"help": "Environment variable holding the key."})
    temperature: float = field(default=0.8, metadata={"help": "Sampling temperature (solver=openai)."})
    concurrency: int = field(default=8, metadata={"help": "Concurrent requests (solver=openai)."})
    cache_dir: Optional[Path] = field(default=None, metadata={
        "help": "On-disk completion cache (default OUT/rank/cache)."})
    max_problems: Optional[int] = field(default=None, metadata={
        "help": "Rank only this many problems with the solver; the rest keep the predicted difficulty."})
    timeout_s: float = field(default=300.0, metadata={"help": "Seconds allowed to verify one candidate."})
    device: str = field(default="auto", metadata={
        "help": "Verifier device: 'cuda', 'cuda:N', 'cpu' or 'auto' (cuda when present)."})
    workers: Optional[int] = field(default=None, metadata={
        "help": "Concurrent verifications (default 1 on CUDA so timings do not contend, all cores on CPU)."})
    n_trials: int = field(default=5, metadata={"help": "Verifier: random input trials per candidate."})
    seed: int = field(default=0, metadata={"help": "Verifier: seed of the random inputs."})
    time_it: bool = field(default=True, metadata={"help": "Verifier: time correct candidates (speedup)."})
    executor: str = executor_option(
        "Where structure traces and CPU verifications run: 'local' (sandboxed processes on "
        "this machine) or 'ray' (a sandboxed Ray task each).")
    ray_address: Optional[str] = ray_address_option()
