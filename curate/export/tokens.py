"""Prompt length in tokens, counted offline.

The count uses OpenAI's ``o200k_base`` BPE (the GPT-4o tokenizer; 200k-token vocabulary)
from the ``bpe-openai`` package, which ships the encoding's merge table inside the wheel,
so nothing is downloaded (``tiktoken`` itself fetches its tables from the network on first
use). Open models' tokenizers (Qwen, Llama 3, DeepSeek) have vocabularies of 100k-150k
tokens built the same way and give counts within roughly 10-20% of it on Python source;
verl's ``data.max_prompt_length`` is counted in the policy's own tokenizer and also
includes the chat template's few tokens, so leave some margin.

Where ``bpe-openai`` is not installed, :func:`count_tokens` falls back to an estimate of
one token per :data:`CHARS_PER_TOKEN` characters and says so in :func:`tokenizer_name`.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Iterable

ENCODING = "o200k_base"
#: Characters per token of the fallback estimate (Python source averages 3.5 to 4).
CHARS_PER_TOKEN = 3.5


@functools.lru_cache(maxsize=1)
def _encoding():
    try:
        import bpe_openai
    except ImportError:
        return None
    with warnings.catch_warnings():  # its data loader uses a deprecated importlib.resources call
        warnings.simplefilter("ignore", DeprecationWarning)
        return bpe_openai.get_encoding(ENCODING)


def tokenizer_name() -> str:
    """``"o200k_base"`` or ``"estimate: 3.5 characters per token"``."""
    return ENCODING if _encoding() is not None else f"estimate: {CHARS_PER_TOKEN} characters per token"


def count_tokens(texts: Iterable[str]) -> list[int]:
    """Tokens of each text (special-token strings in the text count as plain text).

    Args:
        texts: strings (None counts as 0).
    Returns:
        One non-negative int per text.
    """
    with warnings.catch_warnings():  # bpe-openai reads its tables lazily (see _encoding)
        warnings.simplefilter("ignore", DeprecationWarning)
        return _count(texts, _encoding())


def _count(texts: Iterable[str], enc) -> list[int]:
    out = []
    for t in texts:
        if not t:
            out.append(0)
        elif enc is None:
            out.append(math.ceil(len(t) / CHARS_PER_TOKEN))
        else:
            out.append(len(enc.encode_ordinary(t)))
    return out
