"""Stand-in for ``transformers.modeling_layers``: the gradient-checkpointing layer base."""

from torch import nn


class GradientCheckpointingLayer(nn.Module):
    """A layer transformers can checkpoint; checkpointing is off, so it is a plain module."""

    gradient_checkpointing = False
