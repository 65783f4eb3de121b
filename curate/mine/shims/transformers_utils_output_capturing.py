"""Stand-in for ``transformers.utils.output_capturing``: output capture hooks are not
installed, so a decorated forward returns what its body builds."""

from transformers.utils import _decorator

capture_outputs = _decorator
select_hidden_states = _decorator


class OutputRecorder:
    """Which submodule outputs a model would record (kept as data, unused here)."""

    def __init__(self, target_class=None, index=0, layer_name=None, class_name=None, **kwargs):
        self.target_class = target_class
        self.index = index
        self.layer_name = layer_name
        self.class_name = class_name
