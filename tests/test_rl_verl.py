"""verl 0.9.1 on the CPU: its own dataset over our verl parquet, its own reward-function loader
(by file path and by ``pkg://``) and its reward managers calling our reward, as the README says.

Real verl code paths throughout; the replies are an honest Triton candidate, a red-team hack
(a Triton kernel that writes zeros) and a syntax error, decoded by verl from token ids.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

verl = pytest.importorskip("verl")  # the test extra pins it

from omegaconf import OmegaConf  # noqa: E402

import curate.reward  # noqa: E402
from rl_fixtures import local_tokenizer, tiny_export, verl_rows  # noqa: E402
from verify_fixtures import candidate, reply  # noqa: E402

REWARD_FILE = str(Path(curate.reward.__file__).resolve())
REPLIES = [reply(candidate("relu_triton")), reply(candidate("relu_zeros")), reply(candidate("relu_syntax_error"))]
KWARGS = {"time_it": False}  # verl's reward_kwargs: no timing on the CPU (faster)


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    return tiny_export(tmp_path_factory.mktemp("run"))


@pytest.fixture(scope="module")
def tokenizer(export):
    rows = verl_rows(export)
    return local_tokenizer([r["prompt"][0]["content"] for r in rows] + REPLIES)


def _custom_reward(path: str, name: str):
    from verl.trainer.ppo.reward import get_custom_reward_fn

    cfg = OmegaConf.create({"reward": {"custom_reward_function": {
        "path": path, "name": name, "reward_kwargs": KWARGS}}})
    return get_custom_reward_fn(cfg)


def test_rlhf_dataset_reads_the_verl_parquet(export, tokenizer, tmp_path):
    from verl.utils.dataset.rl_dataset import RLHFDataset

    import polars as pl

    # the split files that hold rows (two problems are one split's worth)
    files = sorted(str(p) for p in (export / "verl").glob("*.parquet") if pl.read_parquet(p).height)
    cfg = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 8192, "cache_dir": str(tmp_path),
                            "filter_overlong_prompts": True, "filter_overlong_prompts_workers": 1})
    ds = RLHFDataset(files, tokenizer, cfg)
    assert len(ds) == 2
    items = [ds[i] for i in range(len(ds))]
    assert {it["extra_info"]["problem_id"] for it in items} == {"torch-relu", "torch-tanh"}
    for it in items:
        assert it["raw_prompt"][0]["role"] == "user" and "class Model" in it["raw_prompt"][0]["content"]
        assert "def get_inputs" in it["reward_model"]["ground_truth"] and it["data_source"].startswith("curate/")
    # verl's own filter drops a prompt over max_prompt_length (tokens of our chat template)
    short = RLHFDataset(files, tokenizer, OmegaConf.merge(cfg, {"max_prompt_length": 8}))
    assert len(short) == 0


def test_reward_loads_by_path_without_sys_modules_and_by_pkg():
    before = set(sys.modules)
    by_path = _custom_reward(REWARD_FILE, "compute_score")
    assert not [m for m in set(sys.modules) - before if m.startswith("custom_module_")]
    by_pkg = _custom_reward("pkg://curate.reward", "compute_score")
    batch = _custom_reward(REWARD_FILE, "compute_score_batch")
    # the file loaded by path hands out the package's own functions
    assert by_path.args[0] is by_pkg.args[0] is curate.reward.compute_score
    assert batch.args[0] is curate.reward.compute_score_batch


def _batch(export, tokenizer, replies: list[str]):
    """A DataProto as verl's trainer hands it to a reward manager: the dataset's columns
    (non-tensor), prompt and response token ids, the attention mask."""
    from verl import DataProto

    relu = next(r for r in verl_rows(export) if r["extra_info"]["problem_id"] == "torch-relu")
    n = len(replies)
    prompt = tokenizer.apply_chat_template(relu["prompt"], add_generation_prompt=True, tokenize=True,
                                           return_dict=False)
    responses = [tokenizer(r)["input_ids"] for r in replies]
    width = max(map(len, responses)) + 3  # right padding, as rollouts pad
    pad = tokenizer.pad_token_id
    resp = torch.full((n, width), pad, dtype=torch.long)
    mask = torch.zeros((n, len(prompt) + width), dtype=torch.long)
    for i, ids in enumerate(responses):
        resp[i, :len(ids)] = torch.tensor(ids)
        mask[i, :len(prompt) + len(ids)] = 1
    prompts = torch.tensor([prompt] * n)
    data = DataProto.from_dict(
        tensors={"prompts": prompts, "responses": resp, "attention_mask": mask,
                 "input_ids": torch.cat([prompts, resp], dim=1)},
        non_tensors={"data_source": np.array([relu["data_source"]] * n, dtype=object),
                     "reward_model": np.array([dict(relu["reward_model"]) for _ in range(n)], dtype=object),
                     "extra_info": np.array([dict(relu["extra_info"]) for _ in range(n)], dtype=object)})
    return data, [len(ids) for ids in responses]


def _scores(out, lengths) -> list[float]:
    tensor = out["reward_tensor"] if isinstance(out, dict) else out
    return [float(tensor[i, n - 1]) for i, n in enumerate(lengths)]


def test_naive_and_batch_managers_score_real_replies(export, tokenizer):
    from verl.workers.reward_manager import BatchRewardManager, NaiveRewardManager

    data, lengths = _batch(export, tokenizer, REPLIES)
    naive = NaiveRewardManager(tokenizer, 0, compute_score=_custom_reward(REWARD_FILE, "compute_score"))
    out = naive(data, return_dict=True)
    scores = _scores(out, lengths)
    assert out["reward_extra_info"]["correct"] == [True, False, False], out["reward_extra_info"]["reason"]
    assert scores == pytest.approx([0.4, 0.1, 0.0])  # untimed: compiled + correct, compiled, nothing

    data, lengths = _batch(export, tokenizer, REPLIES)
    batch = BatchRewardManager(tokenizer, 0, compute_score=_custom_reward(REWARD_FILE, "compute_score_batch"))
    out = batch(data, return_dict=True)
    assert _scores(out, lengths) == pytest.approx([0.4, 0.1, 0.0])
    assert out["reward_extra_info"]["correct"] == [True, False, False]


def test_reward_loop_manager_scores_from_its_threads(export, tokenizer):
    """verl 0.9's default path: the reward loop's naive manager, one reply per call, in threads."""
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

    manager = NaiveRewardManager(None, tokenizer, _custom_reward("pkg://curate.reward", "compute_score"))
    data, _ = _batch(export, tokenizer, REPLIES[:2])

    async def both():
        return await asyncio.gather(*(manager.run_single(data[i:i + 1]) for i in range(2)))

    out = manager.loop.run_until_complete(both())  # the loop the manager was made on
    assert [o["reward_extra_info"]["correct"] for o in out] == [True, False]
    assert out[0]["reward_score"] == pytest.approx(0.4)


def test_prime_manager_reads_the_score_not_zero(export, tokenizer):
    """The prime manager runs the reward in forked worker processes and reads ``result[0]``."""
    from verl.workers.reward_manager import PrimeRewardManager

    data, lengths = _batch(export, tokenizer, REPLIES[:2])
    prime = PrimeRewardManager(tokenizer, 0, compute_score=_custom_reward(REWARD_FILE, "compute_score"))
    out = prime(data, return_dict=True)
    assert _scores(out, lengths) == pytest.approx([0.4, 0.1])
