"""``einops.layers.torch`` for mined problems: the layer forms of :mod:`.einops` (our own code)."""

from torch import nn

from einops import _einops_apply


class Rearrange(nn.Module):
    """Layer form of :func:`rearrange`."""

    def __init__(self, pattern, **axes_lengths):
        super().__init__()
        self.pattern = pattern
        self.axes_lengths = axes_lengths

    def forward(self, x):
        return _einops_apply(x, self.pattern, None, self.axes_lengths)

    def extra_repr(self):
        return repr(self.pattern)


class Reduce(nn.Module):
    """Layer form of :func:`reduce`."""

    def __init__(self, pattern, reduction, **axes_lengths):
        super().__init__()
        self.pattern = pattern
        self.reduction = reduction
        self.axes_lengths = axes_lengths

    def forward(self, x):
        return _einops_apply(x, self.pattern, self.reduction, self.axes_lengths)

    def extra_repr(self):
        return f"{self.pattern!r}, {self.reduction!r}"
