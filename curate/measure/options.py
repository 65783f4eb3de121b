"""The ``measure`` stage's options (see :mod:`curate.harness.options` for the metadata keys).

Standard library only: the GPU machine imports :mod:`curate.measure` without polars.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from curate.harness.options import executor_option, ray_address_option

CPU_MEM_MB = 8192
"""Default address-space budget of a CPU measurement process (MiB)."""


@dataclass
class MeasureOptions:
    device: str = field(default="auto", metadata={"help": "'cuda', 'cuda:N', 'cpu' or 'auto' (cuda when present)."})
    inductor: Optional[bool] = field(default=None, metadata={
        "help": "Also time TorchInductor (torch.compile). Default: on CUDA yes, on CPU no."})
    min_ms: float = field(default=0.0, metadata={"help": "Reject problems whose eager median is below this (ms)."})
    max_ms: float = field(default=10_000.0, metadata={
        "help": "Reject problems whose eager median is above this (ms)."})
    trials: int = field(default=100, metadata={"help": "Timed trials per problem (median reported)."})
    warmup: int = field(default=3, metadata={"help": "Warm-up runs before timing."})
    timeout_s: float = field(default=300.0, metadata={"help": "Seconds allowed per problem."})
    workers: Optional[int] = field(default=None, metadata={
        "help": "Measure workers (CUDA default: with at least 8 cores per GPU, all of a GPU's cores "
                "but two, each worker compiling its own rows and taking the GPU alone only for "
                "timed trials, on the two cores kept for them; else one per GPU with compile-ahead "
                "workers. CPU timing uses 1)."})
    budget_s: Optional[float] = field(default=None, metadata={
        "help": "Seconds of timed trials per callable; trials are cut to fit (default 0.05 s on "
                "CUDA, 1 s on the CPU; at least 10 trials on CUDA, 3 on the CPU)."})
    compile_workers: Optional[int] = field(default=None, metadata={
        "help": "CUDA: compile-ahead workers per GPU that run TorchInductor compiles on spare cores "
                "while the GPU times (default: spare cores, at most 8; 0: off)."})
    gpu_mem_fraction: Optional[float] = field(default=None, metadata={
        "help": "CUDA: share of GPU memory a problem may allocate before it is rejected as 'memory' "
                "(default 0.5 with compile-ahead workers, else 0.9)."})
    cuda_graph: str = field(default="auto", metadata={
        "help": "CUDA: also time CUDA-graph replays: 'auto' (launch-bound problems, eager under "
                "0.1 ms), 'on' or 'off'."})
    profile: Optional[bool] = field(default=None, metadata={
        "help": "CUDA: profile one forward for the share of GPU time in library kernels (default on)."})
    inductor_cache: Optional[str] = field(default=None, metadata={
        "help": "Folder for Inductor's and Triton's compile caches (default: torch's own)."})
    band: bool = field(default=True, metadata={
        "help": "CUDA: hold each row to the runtime band diversify aimed it at (outside it: "
                "rejected 'out_of_band')."})
    min_shapes: int = field(default=3, metadata={
        "help": "Rows of a base problem left with fewer in-band shapes than this are rejected "
                "('too_few_shapes')."})
    executor: str = executor_option(
        "'local' (one measure worker per GPU of this host) or 'ray' (one GPU actor per GPU "
        "of every node of a Ray cluster; see --ray-address).")
    ray_address: Optional[str] = ray_address_option()
    mem_mb: int = field(default=CPU_MEM_MB, metadata={
        "help": "CPU: address-space budget of one measurement process (MiB)."})
    dynamic_shapes: bool = field(default=False, metadata={
        "help": "CUDA: compile TorchInductor with the input dimensions a base problem's shape "
                "variants differ in marked dynamic, so the variants share one compiled graph "
                "(FX-graph cache)."})
    autotune_ms: Optional[float] = field(default=5.0, metadata={
        "help": "CUDA: cap, in ms, on TorchInductor's benchmark of each configuration when it "
                "autotunes a kernel at its first call (Inductor's own: 25 ms; measured on an H100: "
                "12.5% more rows an hour, Inductor medians unchanged within the run-to-run spread); 0 keeps "
                "Inductor's own."})
    conform: bool = field(default=True, metadata={
        "help": "Run each problem as a KernelBench-style harness does first (a failure rejects it)."})
