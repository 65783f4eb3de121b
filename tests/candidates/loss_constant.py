# A loss answered with one number: a Triton kernel stores VALUE (the test puts in the mean of
# the reference's outputs over several draws, the best constant a policy could learn) into the
# 0-dim output, whatever the inputs. It launches a kernel of its own; it must score no
# correctness on a problem whose output depends on its inputs.
import torch
import torch.nn as nn
import triton
import triton.language as tl

VALUE = 0.0


@triton.jit
def store_kernel(out_ptr, value):
    tl.store(out_ptr, value)


class ModelNew(nn.Module):
    def forward(self, input, target):
        out = torch.empty((), device=input.device, dtype=input.dtype)
        store_kernel[(1,)](out, VALUE)
        return out
