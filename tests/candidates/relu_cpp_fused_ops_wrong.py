# A WRONG ReLU (negative values pass through halved) as a C++ extension named "fused_ops"
# with a function "fused_ops_cuda", as the correct relu_cpp_fused_ops.py names them.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor fused_ops_cuda(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) out[i] = in[i] > 0.f ? in[i] : 0.5f * in[i];
    return y;
}
"""

fused_ops = load_inline(name="fused_ops", cpp_sources=cpp_source, functions=["fused_ops_cuda"],
                        verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return fused_ops.fused_ops_cuda(x)
