# Replaces one of the reference's two ReLUs with a Triton kernel and keeps the other in PyTorch
# (a partial replacement, as models write for networks with repeated layers): correct, and not
# a decoy, since fewer ReLUs run in PyTorch than in the reference.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        first = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 256),)](x, first, x.numel(), BLOCK=256)
        return first + torch.relu(2 * x)
