"""The RL reward: verify the ``ModelNew`` in a model's reply and score it.

Hookups (each is what a test runs):

- **verl**, any loader: ``reward.custom_reward_function.path`` (``custom_reward_function.path``
  before verl 0.7) set to this file's path (``python -c "import curate.reward as m;
  print(m.__file__)"``) or to ``pkg://curate.reward``, with ``name``:

  - ``compute_score`` for the naive manager (and verl 0.7+'s reward loop, which calls it
    per reply from threads) and for the prime manager (it reads ``result[0]``: the score);
  - ``compute_score_batch`` for the batch manager (``reward_manager=batch``): lists in, one
    result per reply out, verified concurrently.

  Both return :class:`~curate.rl.score.Score` dicts: ``score`` plus its parts
  (``compiled``, ``correct``, ``speedup_vs_eager``, ``speedup_vs_inductor``, ``reason``),
  which verl logs.
- **TRL**: ``GRPOTrainer(reward_funcs=kernel_reward, train_dataset=<verl parquet or hf
  export>)``; :func:`~curate.rl.trl.make_kernel_reward` for other weights or settings.

The score is ``0.1 * compiled + 0.3 * correct + 0.2 * min(speedup vs eager, 3) * correct``
(the Stanford GRPO study's seed reward; :class:`RewardConfig` changes it). Candidates run in
persistent sandboxed verification workers (:mod:`curate.verify.pool`) that never import the
caller's ``__main__`` and die with the caller; a reply that does not parse or names no
``ModelNew`` is scored in this process without starting one.

This file only re-exports :mod:`curate.rl`: loaded by path without being registered in
``sys.modules`` (verl's loader), it still hands out the package's own objects, which pickle
by reference (verl's prime manager sends the function to worker processes) and share one
pool of workers however many times the file is loaded.
"""

from curate.rl.score import (RewardConfig, Score, compute_score, compute_score_batch,
                             default_timeout_s, precheck, score_result)
from curate.rl.trl import kernel_reward, make_kernel_reward

__all__ = ["RewardConfig", "Score", "compute_score", "compute_score_batch", "score_result",
           "precheck", "default_timeout_s", "kernel_reward", "make_kernel_reward"]
