"""Torch-only stand-ins for timm's most imported layer helpers, for code that imports them where
timm is not among the source's files or dependencies (written for curate; not timm's code).

Behaviour follows timm's documentation: stochastic depth (``drop_path``/``DropPath``) drops
whole samples and rescales the kept ones by ``1 / keep_prob``; ``to_2tuple`` repeats a scalar and
passes an iterable through; ``trunc_normal_`` fills in place from a truncated normal.
"""

import collections.abc
import math
from itertools import repeat as _repeat

import torch
from torch import nn


def _ntuple(n):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(_repeat(x, n))
    return parse


to_1tuple = _ntuple(1)
to_2tuple = _ntuple(2)
to_3tuple = _ntuple(3)
to_4tuple = _ntuple(4)
to_ntuple = _ntuple


def make_divisible(v, divisor=8, min_value=None, round_limit=0.9):
    min_value = min_value or divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < round_limit * v:  # rounding down lost too much: one step up
        new_v += divisor
    return new_v


def drop_path(x, drop_prob: float = 0.0, training: bool = False, scale_by_keep: bool = True):
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)  # one draw per sample, broadcast over the rest
    mask = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        mask.div_(keep_prob)
    return x * mask


class DropPath(nn.Module):
    def __init__(self, drop_prob: float = 0.0, scale_by_keep: bool = True):
        super().__init__()
        self.drop_prob = drop_prob
        self.scale_by_keep = scale_by_keep

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training, self.scale_by_keep)

    def extra_repr(self):
        return f"drop_prob={round(self.drop_prob, 3):0.3f}"


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    return nn.init.trunc_normal_(tensor, mean=mean, std=std, a=a, b=b)


def variance_scaling_(tensor, scale=1.0, mode="fan_in", distribution="normal"):
    fan_in, fan_out = nn.init._calculate_fan_in_and_fan_out(tensor)
    denom = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
    variance = scale / denom
    if distribution == "truncated_normal":
        # the standard deviation of a unit normal truncated to [-2, 2] is about 0.8796
        return nn.init.trunc_normal_(tensor, std=math.sqrt(variance) / 0.87962566103423978)
    if distribution == "normal":
        with torch.no_grad():
            return tensor.normal_(std=math.sqrt(variance))
    bound = math.sqrt(3 * variance)
    with torch.no_grad():
        return tensor.uniform_(-bound, bound)


def lecun_normal_(tensor):
    return variance_scaling_(tensor, mode="fan_in", distribution="truncated_normal")


class Mlp(nn.Module):
    def __init__(self, in_features, hidden_features=None, out_features=None, act_layer=nn.GELU,
                 norm_layer=None, bias=True, drop=0.0, use_conv=False):
        super().__init__()
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        bias = to_2tuple(bias)
        drop = to_2tuple(drop)
        linear = (lambda i, o, bias: nn.Conv2d(i, o, 1, bias=bias)) if use_conv else nn.Linear
        self.fc1 = linear(in_features, hidden_features, bias=bias[0])
        self.act = act_layer()
        self.drop1 = nn.Dropout(drop[0])
        self.norm = norm_layer(hidden_features) if norm_layer is not None else nn.Identity()
        self.fc2 = linear(hidden_features, out_features, bias=bias[1])
        self.drop2 = nn.Dropout(drop[1])

    def forward(self, x):
        return self.drop2(self.fc2(self.norm(self.drop1(self.act(self.fc1(x))))))


def register_model(fn):
    return fn
