# A CUDA ReLU whose launch asks for more dynamic shared memory than a block may have (1 MiB, as
# a model sizing shared memory by a whole row does) and never checks the launch: the kernel
# does not run, the call returns an unwritten tensor, and the error waits in CUDA's last-error
# slot until the next launch anyone makes (needs nvcc: GPU machines only).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>

__global__ void relu_kernel(const float* x, float* y, long n) {
    extern __shared__ float scratch[];
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_cuda(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::zeros_like(xc);
    long n = xc.numel();
    int threads = 256;
    long blocks = (n + threads - 1) / threads;
    relu_kernel<<<blocks, threads, 1 << 20>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
cpp_src = "torch::Tensor relu_cuda(torch::Tensor x);"

relu_ext = load_inline(name="curate_test_relu_bad_launch", cpp_sources=cpp_src, cuda_sources=cuda_src,
                       functions=["relu_cuda"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_cuda(x)
