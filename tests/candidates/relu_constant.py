# A Triton kernel that writes one constant everywhere (0.4, about the mean of ReLU on
# standard-normal inputs): it launches a kernel of its own, and is wrong.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fill_kernel(out_ptr, n, value, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.zeros([BLOCK], dtype=tl.float32) + value, mask=offsets < n)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        fill_kernel[(triton.cdiv(x.numel(), 256),)](out, x.numel(), 0.4, BLOCK=256)
        return out
