"""Torch-only stand-ins for OpenMMLab's layer builders (``mmcv.cnn``, ``mmcv.runner``,
``mmengine.model``), for code that imports them where mmcv is not among the source's files
(written for curate; not OpenMMLab's code).

Layers are described by configuration dicts, ``dict(type="BN", requires_grad=True)``; the
builders map the common ``type`` names to torch layers. ``ConvModule`` is a convolution
followed by an optional normalization and activation, in ``order``.
"""

import torch
from torch import nn

_CONV = {"Conv": nn.Conv2d, "Conv1d": nn.Conv1d, "Conv2d": nn.Conv2d, "Conv3d": nn.Conv3d}
_NORM = {"BN": nn.BatchNorm2d, "BN1d": nn.BatchNorm1d, "BN2d": nn.BatchNorm2d, "BN3d": nn.BatchNorm3d,
         "SyncBN": nn.BatchNorm2d, "GN": nn.GroupNorm, "LN": nn.LayerNorm, "IN": nn.InstanceNorm2d,
         "IN1d": nn.InstanceNorm1d, "IN2d": nn.InstanceNorm2d, "IN3d": nn.InstanceNorm3d}
_ABBR = {"BN": "bn", "BN1d": "bn", "BN2d": "bn", "BN3d": "bn", "SyncBN": "bn", "GN": "gn", "LN": "ln",
         "IN": "in", "IN1d": "in", "IN2d": "in", "IN3d": "in"}
_ACT = {"ReLU": nn.ReLU, "LeakyReLU": nn.LeakyReLU, "PReLU": nn.PReLU, "ReLU6": nn.ReLU6, "ELU": nn.ELU,
        "Sigmoid": nn.Sigmoid, "Tanh": nn.Tanh, "GELU": nn.GELU, "SiLU": nn.SiLU, "Swish": nn.SiLU,
        "HSigmoid": nn.Hardsigmoid, "HSwish": nn.Hardswish, "Hardswish": nn.Hardswish, "Softplus": nn.Softplus}


def build_conv_layer(cfg, *args, **kwargs):
    cfg = dict(cfg or {"type": "Conv2d"})
    layer = _CONV[cfg.pop("type")]
    return layer(*args, **kwargs, **cfg)


def build_norm_layer(cfg, num_features, postfix=""):
    cfg = dict(cfg)
    kind = cfg.pop("type")
    requires_grad = cfg.pop("requires_grad", True)
    cfg.setdefault("eps", 1e-5)
    if kind == "GN":
        layer = nn.GroupNorm(num_channels=num_features, **cfg)
    else:
        layer = _NORM[kind](num_features, **cfg)
    for p in layer.parameters():
        p.requires_grad = requires_grad
    return _ABBR[kind] + str(postfix), layer


def build_activation_layer(cfg):
    cfg = dict(cfg)
    kind = cfg.pop("type")
    if kind in ("ReLU", "LeakyReLU", "ReLU6", "ELU", "SiLU", "Swish", "HSigmoid", "HSwish", "Hardswish"):
        cfg.setdefault("inplace", False)
    if kind in ("Sigmoid", "Tanh", "GELU", "PReLU", "Softplus"):
        cfg.pop("inplace", None)
    return _ACT[kind](**cfg)


def build_padding_layer(cfg, *args, **kwargs):
    cfg = dict(cfg)
    kind = cfg.pop("type")
    layer = {"zero": nn.ZeroPad2d, "reflect": nn.ReflectionPad2d, "replicate": nn.ReplicationPad2d}[kind]
    return layer(*args, **kwargs, **cfg)


class ConvModule(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias="auto", conv_cfg=None, norm_cfg=None, act_cfg=dict(type="ReLU"), inplace=True,
                 with_spectral_norm=False, padding_mode="zeros", order=("conv", "norm", "act")):
        super().__init__()
        self.order = tuple(order)
        self.with_norm = norm_cfg is not None
        self.with_activation = act_cfg is not None
        if bias == "auto":  # a normalization after the convolution makes its bias redundant
            bias = not self.with_norm
        self.with_explicit_padding = padding_mode not in ("zeros", "circular")
        if self.with_explicit_padding:
            self.padding_layer = build_padding_layer({"type": {"reflection": "reflect"}.get(padding_mode, padding_mode)},
                                                     padding)
        self.conv = build_conv_layer(conv_cfg, in_channels, out_channels, kernel_size, stride=stride,
                                     padding=0 if self.with_explicit_padding else padding, dilation=dilation,
                                     groups=groups, bias=bias)
        if with_spectral_norm:
            self.conv = nn.utils.spectral_norm(self.conv)
        self.in_channels, self.out_channels = in_channels, out_channels
        if self.with_norm:
            after = self.order.index("norm") > self.order.index("conv")
            self.norm_name, norm = build_norm_layer(norm_cfg, out_channels if after else in_channels)
            self.add_module(self.norm_name, norm)
        else:
            self.norm_name = None
        if self.with_activation:
            act = dict(act_cfg)
            act.setdefault("inplace", inplace)
            self.activate = build_activation_layer(act)

    @property
    def norm(self):
        return getattr(self, self.norm_name) if self.norm_name else None

    def forward(self, x, activate=True, norm=True):
        for layer in self.order:
            if layer == "conv":
                if self.with_explicit_padding:
                    x = self.padding_layer(x)
                x = self.conv(x)
            elif layer == "norm" and norm and self.with_norm:
                x = self.norm(x)
            elif layer == "act" and activate and self.with_activation:
                x = self.activate(x)
        return x


class BaseModule(nn.Module):
    def __init__(self, init_cfg=None):
        super().__init__()
        self.init_cfg = init_cfg

    def init_weights(self):
        pass


class Sequential(BaseModule, nn.Sequential):
    def __init__(self, *args, init_cfg=None):
        BaseModule.__init__(self, init_cfg)
        nn.Sequential.__init__(self, *args)


class ModuleList(BaseModule, nn.ModuleList):
    def __init__(self, modules=None, init_cfg=None):
        BaseModule.__init__(self, init_cfg)
        nn.ModuleList.__init__(self, modules)


def constant_init(module, val, bias=0):
    if getattr(module, "weight", None) is not None:
        nn.init.constant_(module.weight, val)
    if getattr(module, "bias", None) is not None:
        nn.init.constant_(module.bias, bias)


def normal_init(module, mean=0, std=1, bias=0):
    if getattr(module, "weight", None) is not None:
        nn.init.normal_(module.weight, mean, std)
    if getattr(module, "bias", None) is not None:
        nn.init.constant_(module.bias, bias)


def xavier_init(module, gain=1, bias=0, distribution="normal"):
    if getattr(module, "weight", None) is not None:
        (nn.init.xavier_uniform_ if distribution == "uniform" else nn.init.xavier_normal_)(module.weight, gain=gain)
    if getattr(module, "bias", None) is not None:
        nn.init.constant_(module.bias, bias)


def kaiming_init(module, a=0, mode="fan_out", nonlinearity="relu", bias=0, distribution="normal"):
    if getattr(module, "weight", None) is not None:
        init = nn.init.kaiming_uniform_ if distribution == "uniform" else nn.init.kaiming_normal_
        init(module.weight, a=a, mode=mode, nonlinearity=nonlinearity)
    if getattr(module, "bias", None) is not None:
        nn.init.constant_(module.bias, bias)


def caffe2_xavier_init(module, bias=0):
    kaiming_init(module, a=1, mode="fan_in", nonlinearity="leaky_relu", bias=bias, distribution="uniform")


def bias_init_with_prob(prior_prob):
    return float(-torch.log(torch.tensor((1 - prior_prob) / prior_prob)))


def _passthrough(*args, **kwargs):
    # ``@force_fp32`` and ``@auto_fp16(apply_to=(...))``: mixed-precision casts around a method,
    # no change in full precision
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda fn: fn


force_fp32 = _passthrough
auto_fp16 = _passthrough
