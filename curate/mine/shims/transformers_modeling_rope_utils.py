"""Stand-in for ``transformers.modeling_rope_utils``: default rotary embeddings only (mined
configurations use ``rope_type="default"``, computed by each model's own code)."""

from typing import TypedDict

from transformers.utils import _decorator

dynamic_rope_update = _decorator
ROPE_INIT_FUNCTIONS = {}


class RopeParameters(TypedDict, total=False):
    rope_type: str
    rope_theta: float
