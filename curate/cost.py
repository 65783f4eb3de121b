"""What one eager forward costs, read on the ``meta`` device, and a roofline of a target GPU.

:func:`forward_cost` runs a model's forward on ``meta`` tensors (shapes propagate, nothing is
computed, so a shape a GPU would take seconds on costs milliseconds here) under a dispatch
mode that records, per ATen operator:

- FLOPs, from torch's own formulas (``torch.utils.flop_counter``: matmuls, convolutions,
  attention; other operators count 0 FLOPs and are priced by their bytes);
- bytes moved: every tensor argument read once and every output written once (an eager
  forward runs one kernel per operator, so nothing is fused away);
- kernels: operators that launch one (views, aliases and ``empty`` launch none);
- the peak of live activation bytes (outputs are released when Python drops them).

:func:`estimate_ms` turns that into an eager time on a :class:`GpuProfile`: each kernel
costs the larger of its FLOPs over the sustained rate of its class and its bytes over the
sustained memory bandwidth (a per-kernel roofline, Williams et al., "Roofline", CACM 2009),
at least ``min_kernel_us``; the forward costs the larger of the kernels' sum and the CPU
time to launch them (``launch_us`` each: eager PyTorch is launch-bound when kernels are
short). The estimate picks a first shape; a GPU confirms it (:mod:`curate.diversify.calibrate`).

Imports only torch and the standard library: it runs in sandboxed workers and on GPU hosts.
"""

from __future__ import annotations

import weakref
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry


@dataclass(frozen=True)
class GpuProfile:
    """Sustained rates of a GPU for eager PyTorch (not datasheet peaks).

    Attributes:
        name: the name ``--target-gpu`` takes.
        bandwidth: bytes/s a large elementwise kernel sustains (reads + writes).
        matmul_fp32: FLOP/s of fp32 matmuls (TF32 off, PyTorch's default for matmul).
        conv_fp32: FLOP/s of fp32 convolutions (cuDNN may use TF32: PyTorch's default).
        half: FLOP/s of fp16/bf16 matmuls and convolutions (tensor cores).
        attention_fp32: FLOP/s of fp32 scaled-dot-product attention.
        min_kernel_us: the shortest a kernel takes (us).
        launch_us: CPU time to dispatch and launch one operator in eager mode (us).
        memory_bytes: device memory (bytes).
    """

    name: str
    bandwidth: float
    matmul_fp32: float
    conv_fp32: float
    half: float
    attention_fp32: float
    min_kernel_us: float
    launch_us: float
    memory_bytes: int


#: Known targets. H100 SXM (80 GB HBM3): a device-to-device copy measured about 3.0 TB/s
#: (reads + writes) on the lent H100; fp32 non-tensor peak is 67 TFLOP/s, TF32 tensor 495
#: (NVIDIA H100 datasheet); the sustained shares here were fitted on problems timed there.
#: H200: same compute, 4.3 TB/s measured. A100 (80 GB): 2.0 TB/s HBM2e, 19.5 TFLOP/s fp32,
#: 156 TF32, 312 bf16 (NVIDIA A100 datasheet), with the same sustained shares.
GPU_PROFILES: dict[str, GpuProfile] = {
    "h100": GpuProfile("h100", 2.6e12, 40e12, 100e12, 450e12, 30e12, 2.5, 6.0, 80 * 10**9),
    "h200": GpuProfile("h200", 3.7e12, 40e12, 100e12, 450e12, 30e12, 2.5, 6.0, 141 * 10**9),
    "a100": GpuProfile("a100", 1.7e12, 15e12, 60e12, 220e12, 12e12, 3.0, 6.0, 80 * 10**9),
}


def gpu_profile(name: str) -> GpuProfile:
    """The profile for ``name`` (case-insensitive; ``"NVIDIA H100 80GB HBM3"`` finds ``h100``).

    Raises:
        ValueError: no profile matches.
    """
    low = name.lower()
    if low in GPU_PROFILES:
        return GPU_PROFILES[low]
    for key, prof in GPU_PROFILES.items():
        if key in low.replace(" ", "").replace("-", ""):
            return prof
    raise ValueError(f"unknown target GPU {name!r}; known: {', '.join(GPU_PROFILES)}")


@dataclass
class OpCost:
    """One kernel: its class (``matmul``, ``conv``, ``attention``, ``other``), FLOPs, bytes,
    whether it computes in half precision, and the ATen operator's name (``addmm``, ``relu``;
    :mod:`curate.structure` reads a problem's level and category from them)."""

    kind: str
    flops: int
    bytes: int
    half: bool
    name: str = ""


@dataclass
class ForwardCost:
    """The cost of one eager forward (see the module docstring).

    Attributes:
        ops: one :class:`OpCost` per kernel-launching operator.
        flops: total FLOPs.
        bytes: total bytes moved (each kernel's tensor arguments and outputs).
        kernels: kernel-launching operators.
        input_bytes, output_bytes, param_bytes: bytes of the forward's inputs, its outputs,
            and the model's parameters and buffers.
        peak_bytes: inputs + parameters + the peak of live intermediate bytes (an upper
            bound on what the forward needs on the device; the caching allocator rounds up).
    """

    ops: list[OpCost] = field(default_factory=list)
    flops: int = 0
    bytes: int = 0
    kernels: int = 0
    input_bytes: int = 0
    output_bytes: int = 0
    param_bytes: int = 0
    peak_bytes: int = 0

    def summary(self) -> dict[str, int]:
        """The totals as a plain dict (no per-operator list)."""
        d = asdict(self)
        d.pop("ops")
        return d


_NO_KERNEL = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "lift_fresh",
              "detach", "alias", "_unsafe_view", "view", "expand", "_reshape_alias", "as_strided",
              "t", "permute", "transpose", "unsqueeze", "squeeze", "select", "slice", "unbind",
              "split", "split_with_sizes", "chunk", "narrow", "unfold", "diagonal", "view_as_real",
              "view_as_complex", "_local_scalar_dense", "sym_size", "sym_stride", "sym_numel",
              "sym_storage_offset", "is_same_size", "_has_compatible_shallow_copy_type"}
_MATMUL = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_scaled_mm", "addbmm"}
_CONV = {"convolution", "_convolution", "conv2d", "conv1d", "conv3d", "cudnn_convolution",
         "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "convolution_backward"}
_HALF = (torch.float16, torch.bfloat16)


def _nbytes(t: torch.Tensor) -> int:
    n = t.numel() * t.element_size()
    try:  # a broadcast (expanded) argument is read once per stored element
        n = min(n, t.untyped_storage().nbytes())
    except Exception:
        pass
    return n


class TooManyKernels(RuntimeError):
    """A forward launched more kernels than ``forward_cost``'s ``max_kernels``; ``cost`` holds
    what was recorded up to there (an RNN unrolled over a long sequence runs tens of
    thousands of operators, seconds of tracing for an answer already clear)."""

    def __init__(self, cost: "ForwardCost", limit: int):
        super().__init__(f"more than {limit} kernels in one forward")
        self.cost = cost


class _CostMode(TorchDispatchMode):
    def __init__(self, max_kernels: int | None = None) -> None:
        super().__init__()
        self.cost = ForwardCost()
        self.max_kernels = max_kernels
        self.live = 0
        self.peak = 0

    def _free(self, n: int) -> None:
        self.live -= n

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func._overloadpacket.__name__
        returns = func._schema.returns
        aliases = bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write
                                        for r in returns)
        if name in _NO_KERNEL or aliases:
            return out
        flat_in = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        flat_out = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        nbytes = sum(_nbytes(t) for t in flat_in) + sum(_nbytes(t) for t in flat_out)
        flops = 0
        packet = func._overloadpacket
        if packet in flop_registry:
            try:
                flops = int(flop_registry[packet](*args, **kwargs, out_val=out))
            except Exception:  # a formula that cannot read these arguments: price by bytes
                flops = 0
        kind = ("matmul" if name in _MATMUL else "conv" if name in _CONV
                else "attention" if "attention" in name else "other")
        half = any(t.dtype in _HALF for t in flat_in)
        self.cost.ops.append(OpCost(kind, flops, nbytes, half, name))
        self.cost.flops += flops
        self.cost.bytes += nbytes
        self.cost.kernels += 1
        if self.max_kernels is not None and self.cost.kernels > self.max_kernels:
            raise TooManyKernels(self.cost, self.max_kernels)
        written = [o for o in flat_out if not any(o.untyped_storage() is i.untyped_storage() for i in flat_in)]
        for o in written:
            n = _nbytes(o)
            self.live += n
            try:
                weakref.finalize(o, self._free, n)
            except TypeError:
                pass
        self.peak = max(self.peak, self.live)
        return out


def _tensors(x: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor)]


def forward_cost(model: torch.nn.Module, inputs: list[Any],
                 max_kernels: int | None = None) -> ForwardCost:
    """Run ``model(*inputs)`` (meta tensors, or real ones: then it computes) and record its cost.

    Args:
        model: the module, built under ``torch.device("meta")`` for a free estimate.
        inputs: its forward arguments (tensors on the model's device, plain values).
        max_kernels: stop the forward past this many kernel-launching operators (None: never).
    Returns:
        A :class:`ForwardCost`; all byte counts in bytes.
    Raises:
        TooManyKernels: past ``max_kernels`` (its ``cost`` holds the operators seen so far).
        Whatever the forward raises (a shape error for an input the model does not accept).
    """
    mode = _CostMode(max_kernels)
    params = sum(_nbytes(p) for p in list(model.parameters()) + list(model.buffers()))
    in_bytes = sum(_nbytes(t) for t in _tensors(inputs))
    with torch.no_grad(), mode:
        out = model(*inputs)
    cost = mode.cost
    cost.param_bytes = params
    cost.input_bytes = in_bytes
    cost.output_bytes = sum(_nbytes(t) for t in _tensors(out))
    cost.peak_bytes = params + in_bytes + max(mode.peak, cost.output_bytes)
    return cost


def estimate_ms(cost: ForwardCost, gpu: GpuProfile) -> float:
    """Estimated eager forward time (ms) of ``cost`` on ``gpu`` (see the module docstring)."""
    host_s = cost.kernels * gpu.launch_us * 1e-6
    return max(device_ms(cost, gpu), 1e3 * host_s, gpu.launch_us * 1e-3)


def device_ms(cost: ForwardCost, gpu: GpuProfile, floor: bool = True) -> float:
    """The kernels' own time (ms) on ``gpu``, without the launch floor: the part of the
    estimate that grows with the problem's size (``floor=False``: without the shortest
    kernel time either, so that it grows from the smallest size up)."""
    device_s = 0.0
    for op in cost.ops:
        if op.half and op.kind in ("matmul", "conv", "attention"):
            rate = gpu.half
        else:
            rate = {"matmul": gpu.matmul_fp32, "conv": gpu.conv_fp32,
                    "attention": gpu.attention_fp32}.get(op.kind, gpu.matmul_fp32)
        device_s += max(op.flops / rate, op.bytes / gpu.bandwidth, gpu.min_kernel_us * 1e-6 if floor else 0.0)
    return 1e3 * device_s
