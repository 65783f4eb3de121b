# An honest reply to KernelBench level 2 "23_Conv3d_GroupNorm_Mean": the convolution and the group
# normalization stay in PyTorch, a Triton kernel takes each sample's mean. The reference's output
# is zero in exact arithmetic (group normalization leaves every group with mean zero), so in
# float32 both sides return rounding noise near 1e-9, different noise.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_mean_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) / n_cols)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        x = self.conv(x)
        x = self.group_norm(x)
        x = x.reshape(x.shape[0], -1).contiguous()
        out = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        row_mean_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=1024)
        return out
