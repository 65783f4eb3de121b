"""Write the problem table as a Hugging Face ``DatasetDict``, as parquet per config, and push it.

Layout under the export folder (each config one folder of ``<split>.parquet`` files, named
in the card's ``configs``)::

    hf/                        DatasetDict.save_to_disk of the ``default`` config
    parquet/<split>.parquet    the ``default`` config
    measurements/<split>.parquet
    verl/<split>.parquet       (written by :mod:`curate.export.verl`)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl

#: config name -> folder of its parquet files.
CONFIG_DIRS = {"default": "parquet", "measurements": "measurements", "verl": "verl"}


def _datasets():
    import datasets  # 0.9 s to import: only when writing

    return datasets


def dataset_dict(splits: dict[str, pl.DataFrame]):
    """A ``datasets.DatasetDict`` with one ``Dataset`` per split (polars -> Arrow, no copy)."""
    datasets = _datasets()
    return datasets.DatasetDict({s: datasets.Dataset.from_polars(df) for s, df in splits.items()})


def write_hf(splits: dict[str, pl.DataFrame], directory: Path) -> None:
    """``DatasetDict.save_to_disk(directory)`` with one ``Dataset`` per split.

    A previous export in ``directory`` is removed first, so a re-run never mixes files of
    two runs.
    """
    datasets = _datasets()
    if directory.exists():
        shutil.rmtree(directory)
    dd = dataset_dict(splits)
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # one bar per split of a few ms each is noise in the log
    try:
        dd.save_to_disk(str(directory))
    finally:
        if bars:
            datasets.enable_progress_bars()


def write_parquet(splits: dict[str, pl.DataFrame], directory: Path) -> dict[str, int]:
    """``directory/<split>.parquet`` for each split; returns each split's Arrow size in bytes
    (the card's ``num_bytes``, what ``datasets`` reports for a split it has loaded)."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    sizes = {}
    for split, df in splits.items():
        df.write_parquet(directory / f"{split}.parquet")
        sizes[split] = int(df.to_arrow().nbytes)
    return sizes


def push_to_hub(export_dir: Path, repo_id: str, configs: dict[str, dict[str, pl.DataFrame]],
                card: str, private: bool = False, token: str | None = None) -> None:
    """Upload every config with ``datasets``' own ``DatasetDict.push_to_hub``.

    The card's text goes up first, without its ``configs`` and ``dataset_info`` (the Hub
    layout differs from the local folders); each ``push_to_hub(config_name=...)`` then
    adds its config's data files and split sizes to that card, as ``datasets`` does.

    Args:
        export_dir: the export folder (for the card file written beside the data).
        repo_id: ``"user/name"`` of a dataset repository (created when missing).
        configs: config name -> split -> rows.
        card: the rendered ``README.md``.
        private: create the repository private.
        token: a Hugging Face token (default: the logged-in one / ``HF_TOKEN``).
    Raises:
        whatever ``datasets`` / ``huggingface_hub`` raise: no network, no token, no access.
    """
    import yaml
    from huggingface_hub import HfApi

    head, _, body = card.partition("\n---\n")
    meta = yaml.safe_load(head.removeprefix("---\n")) or {}
    meta.pop("configs", None)
    meta.pop("dataset_info", None)
    hub_card = "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n" + body
    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    api.upload_file(path_or_fileobj=hub_card.encode(), path_in_repo="README.md", repo_id=repo_id,
                    repo_type="dataset", commit_message="curate: dataset card")
    for name, splits in configs.items():
        dataset_dict(splits).push_to_hub(repo_id, config_name=name, private=private, token=token,
                                         commit_message=f"curate: config {name}")
