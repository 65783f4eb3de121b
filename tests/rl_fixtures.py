"""A tiny real export and a locally built tokenizer for the verl and TRL integration tests.

The export comes from curate's own stages: a mine-stage table holding torch's ``nn.ReLU``
and ``nn.Tanh`` made into KernelBench problems (the sources of the installed torch), then
``curate.export.run``. The tokenizer is a byte-level BPE trained here on those prompts (no
Hub), wrapped in ``PreTrainedTokenizerFast`` with a chat template: byte-level, so a decoded
response is exactly the text that was encoded.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import polars as pl
import torch

from curate.problem import assemble, dumps
from curate.table import Rejections, source_struct, write_stage

SPEC = [{"kind": "tensor", "shape": [4, 250], "dtype": "float32"}]
CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def _problem(cls: type) -> dict:
    body = ("import torch\nimport torch.nn.functional as F\nfrom torch import Tensor\n"
            "from torch.nn import Module\n\n\n" + inspect.getsource(cls) + f"\n\nModel = {cls.__name__}\n")
    return {"problem_id": f"torch-{cls.__name__.lower()}", "name": f"torch.{cls.__name__}",
            "code": assemble(body, SPEC, []), "init_args": dumps([]), "input_spec": dumps(SPEC),
            "source": source_struct(kind="package", name="torch", uri="torch", version=torch.__version__,
                                    path=inspect.getsourcefile(cls).split("site-packages/")[-1],
                                    class_name=cls.__name__, licence="BSD-3-Clause")}


def tiny_export(out: Path) -> Path:
    """Run curate's export on a two-problem mine table; return ``out/export``."""
    from curate.export import run

    df = pl.DataFrame([_problem(torch.nn.ReLU), _problem(torch.nn.Tanh)])
    write_stage(out, "mine", df, Rejections("mine").frame(like=df), df.height, 0.1)
    run(out, val_fraction=0.0, test_fraction=0.0)
    return out / "export"


def verl_rows(export: Path) -> list[dict]:
    """Every row of the verl view, all splits."""
    files = sorted((export / "verl").glob("*.parquet"))
    return [r for f in files for r in pl.read_parquet(f).to_dicts()]


def local_tokenizer(texts: list[str]):
    """A byte-level BPE tokenizer trained on ``texts``, as a ``PreTrainedTokenizerFast``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|pad|>", "<|end|>", "<|user|>", "<|assistant|>", "<|system|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>", eos_token="<|end|>",
                                   bos_token=None, unk_token=None)
    fast.chat_template = CHAT_TEMPLATE
    return fast
