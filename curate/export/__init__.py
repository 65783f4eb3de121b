"""The ``export`` stage: pruned prompts, cluster-level splits, a Hugging Face dataset, card, RL view.

Reads the ranked problem table (``OUT/rank``; when earlier stages were skipped, the last
stage folder that exists) and writes ``OUT/export/``::

    problems/, rejected/, stats.json    the stage table contract (see curate.table)
    hf/                                 DatasetDict.save_to_disk (default config): train / validation / test
    parquet/{train,validation,test}.parquet       the ``default`` config (see .columns)
    measurements/{train,validation,test}.parquet  measure / dedup / rank internals
    verl/{train,validation,test}.parquet          verl's RLHF schema (see .verl)
    README.md                           dataset card: YAML metadata and the run's figures

Each row's ``code`` is first pruned to what ``Model`` and the input functions reach
(:mod:`.prune`, :mod:`.prune_usage`, :mod:`.prune_cover`; proven by running both programs,
:mod:`.prune_table`); its ``prompt`` (the
user message, :mod:`.prompt`) and ``prompt_tokens`` (:mod:`.tokens`) follow.

Rows in = rows of the input table; a row is rejected when it has no ``code``
(reason ``missing_code``) or, with ``max_prompt_tokens``, when its prompt is longer
(``prompt_too_long``). Every kept row gets a ``split``; whole dedup clusters (and with
them all shape variants of a base problem) go to one split (see .split).
"""

from __future__ import annotations

from curate.harness import lazy_stage

__all__ = ["run", "default_source"]


# the stage (polars, the verifier) loads when asked for: the CLI reads the options alone
__getattr__ = lazy_stage(__name__)
