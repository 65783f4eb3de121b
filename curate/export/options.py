"""The ``export`` stage's options (see :mod:`curate.harness.options` for the metadata keys)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from curate.harness.options import executor_option, ray_address_option


@dataclass
class ExportOptions:
    name: str = field(default="curate-kernels", metadata={"help": "Dataset name used in the card."})
    val_fraction: float = field(default=0.1, metadata={"help": "Share of dedup clusters in validation."})
    test_fraction: float = field(default=0.1, metadata={"help": "Share of dedup clusters in test."})
    seed: int = field(default=0, metadata={"help": "Seed of the cluster split."})
    max_prompt_tokens: Optional[int] = field(default=None, metadata={
        "help": "Reject rows whose prompt has more tokens (reason prompt_too_long)."})
    prune: bool = field(default=True, metadata={
        "help": "Prune each reference program to what Model and the input functions reach (proven "
                "by running both versions)."})
    workers: Optional[int] = field(default=None, metadata={
        "help": "Processes proving pruned programs (default: CPU count)."})
    push_to_hub_repo: Optional[str] = field(default=None, metadata={
        "flag": "--push-to-hub",
        "help": "Also upload every config to this Hugging Face dataset repo (USER/NAME)."})
    private: bool = field(default=False, metadata={"help": "Create the Hub repository private (--push-to-hub)."})
    prune_timeout_s: float = field(default=60.0, metadata={
        "help": "Seconds to run one original and its pruned program."})
    token: Optional[str] = field(default=None, metadata={
        "cli": False, "help": "Hugging Face token for the upload (default: the logged-in one)."})
    executor: str = executor_option(
        "Where the pruned programs are proven: 'local' (sandboxed processes on this machine) or "
        "'ray' (a sandboxed Ray task per program body).")
    ray_address: Optional[str] = ray_address_option()
