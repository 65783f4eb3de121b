"""The ``diversify`` stage's options (see :mod:`curate.harness.options` for the metadata keys)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from curate.harness.options import executor_option, ray_address_option


@dataclass
class DiversifyOptions:
    variants: int = field(default=3, metadata={
        "help": "In-band shapes per problem: the primary one and the rest spread across the band "
                "(a held-out odd-size shape for the verifier comes on top)."})
    band_ms: tuple[float, float] = field(default=(0.5, 10.0), metadata={
        "help": "Eager median wanted on the target GPU, LO HI (ms)."})
    target_gpu: str = field(default="h100", metadata={"help": "GPU the band is for: h100, h200 or a100."})
    mem_budget_mb: int = field(default=4096, metadata={
        "help": "Most MiB one forward may need (parameters, inputs, outputs, peak activations)."})
    device: str = field(default="auto", metadata={
        "help": "'cuda': estimate, then time and correct each shape on the GPU; 'cpu': estimates "
                "only (rows flagged 'estimated'); 'auto': cuda when present."})
    workers: Optional[int] = field(default=None, metadata={
        "help": "Planning worker processes (default: all cores)."})
    calibrate_workers: Optional[int] = field(default=None, metadata={
        "help": "GPU calibration worker processes; several share the GPU through a lock, each "
                "probe timed alone (default: 4 on a host with at least 8 cores, else 1)."})
    dtypes: Optional[str] = field(default=None, metadata={
        "help": "Precisions to make variants in, comma-separated: fp32, bf16, fp16 (or float32, "
                "bfloat16, float16). Each is planned, checked and calibrated in that precision "
                "(model and floating inputs cast), a 'dtype' column says which (default: fp32 on "
                "the CPU, fp32,bf16 on the GPU)."})
    timeout_s: float = field(default=60.0, metadata={"help": "Seconds to plan (and calibrate) one problem."})
    mem_mb: Optional[int] = field(default=None, metadata={
        "help": "Address-space budget of one planning process (MiB; default 8192)."})
    executor: str = executor_option(
        "Where planning runs: 'local' (sandboxed processes on this machine) or 'ray' (a "
        "sandboxed Ray task per problem; GPU calibration stays on this host).")
    ray_address: Optional[str] = ray_address_option()
