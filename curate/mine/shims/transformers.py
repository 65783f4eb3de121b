"""Stand-in for the top of the ``transformers`` package: its version, which other libraries
(peft) compare at import time, and the base classes other libraries import from the top
(``from transformers import PretrainedConfig``), which the real package binds lazily. The
stand-ins of transformers' submodules imitate the infrastructure of this release. A name the
stand-in lacks stays a placeholder that raises ``ImportError`` when used."""

from transformers.activations import ACT2FN
from transformers.configuration_utils import PretrainedConfig, PreTrainedConfig
from transformers.modeling_utils import PreTrainedModel
from transformers.models.auto import CONFIG_MAPPING, AutoBackbone, AutoConfig, AutoModel

__version__ = "5.23.0"
