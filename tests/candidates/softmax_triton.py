# A correct ModelNew for KernelBench level 1 "23_Softmax" (softmax over dim 1 of a 2-D input)
# in any floating-point precision: one program per row, three passes over the row in blocks
# (its maximum, the sum of exponentials, the output), arithmetic in float32, the output
# stored in the input's dtype.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * n_cols
    m = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m = tl.maximum(m, x)
    row_max = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        s += tl.exp(x - row_max)
    total = tl.sum(s, axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row + cols, mask=mask, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - row_max) / total
        tl.store(out_ptr + row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        rows, cols = x.shape
        softmax_kernel[(rows,)](x, out, cols, BLOCK=1024)
        return out
