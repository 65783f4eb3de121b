# A WRONG CUDA ReLU (negative values pass through halved) as an extension named "fused_ops" with
# a function "fused_ops_cuda", as the correct relu_cuda_fused_ops.py names them (GPU only).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>

__global__ void relu_kernel(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.5f * x[i];
}

torch::Tensor fused_ops_cuda(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long n = xc.numel();
    int threads = 256;
    long blocks = (n + threads - 1) / threads;
    relu_kernel<<<blocks, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
cpp_src = "torch::Tensor fused_ops_cuda(torch::Tensor x);"

fused_ops = load_inline(name="fused_ops", cpp_sources=cpp_src, cuda_sources=cuda_src,
                       functions=["fused_ops_cuda"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return fused_ops.fused_ops_cuda(x)
