"""Run a whole pipeline from a YAML file.

The YAML maps stage names to that stage's options (the fields of its options dataclass,
``curate/<stage>/options.py``: the keyword arguments of ``curate.<stage>.run``, the same as
the stage command's flags with ``-`` written ``_``)::

    mine:
      manifest: manifests/default.yaml
    dedup:
      threshold: 0.8
    diversify: {}
    measure: {device: auto}
    rank: {solver: inductor, max_problems: 20}
    export: {name: curate-default}

Stages run in pipeline order (mine, dedup, diversify, measure, rank, export) whatever the
order in the file; a stage left out is skipped, and the next one reads the last one run.
Relative paths are taken from the current working directory.
"""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path
from typing import Any, Iterator

import yaml

from curate.harness.options import OptionError, check_options, fields, options_class, suggest
from curate.harness.stage import resolve_input
from curate.table import STAGES, check_input, stage_dir, stage_lock, write_atomic


class PipelineError(ValueError):
    """The pipeline YAML is malformed (unknown stage, options not a mapping, ...)."""


def stage_options(stage: str) -> tuple[str, ...]:
    """The options a pipeline YAML may give ``stage``: the fields of its options dataclass
    (:func:`curate.harness.options.options_class`), and ``source``, less ``out``, which the
    pipeline sets."""
    names = [f.name for f in fields(options_class(stage))]
    return tuple(names + (["source"] if stage != "mine" else []))


def load_pipeline(path: Path | str) -> dict[str, dict[str, Any]]:
    """Parse and check a pipeline YAML; return ``{stage: options}`` in pipeline order.

    Raises:
        PipelineError: not YAML, no stages, unknown stage names, non-mapping options, an
            option the stage does not take (the message names the closest and all allowed
            ones), a value of the wrong type, or mine without a manifest; all before any
            stage runs (:func:`curate.harness.options.check_options`).
    """
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as exc:
        raise PipelineError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    if raw is None:
        raise PipelineError(f"{path}: empty pipeline; list stages among {list(STAGES)}")
    if not isinstance(raw, dict):
        raise PipelineError(f"{path}: expected a mapping of stage -> options")
    unknown = set(raw) - set(STAGES)
    if unknown:
        hints = "".join(suggest(u, STAGES) for u in sorted(unknown, key=str))
        raise PipelineError(f"{path}: unknown stages {sorted(unknown, key=str)}{hints}; "
                            f"known: {list(STAGES)}")
    stages = {}
    for name in STAGES:
        if name not in raw:
            continue
        opts = raw[name] if raw[name] is not None else {}
        if not isinstance(opts, dict):
            raise PipelineError(f"{path}: options of {name} must be a mapping")
        try:
            stages[name] = check_options(name, opts, fixed=("out",))
        except OptionError as exc:
            raise PipelineError(f"{path}: {exc}") from None
    return stages


def run_pipeline(path: Path | str, out: Path | str, start: str | None = None,
                 stop: str | None = None) -> Iterator[dict[str, Any]]:
    """Run the pipeline's stages into ``out``; yield each stage's stats as it finishes.

    Each stage holds ``OUT/<stage>/.lock`` while it runs (:func:`curate.table.stage_lock`).

    Raises:
        PipelineError: a malformed pipeline (:func:`load_pipeline`) or an unknown start/stop.
        curate.table.TableError, FileNotFoundError: the first stage's input table is missing,
            unreadable, without a needed column, or empty.
        curate.table.StageLocked: another process is writing a stage folder of ``out``.
    """
    stages = load_pipeline(path)
    names = list(stages)
    for bound in (start, stop):
        if bound is not None and bound not in names:
            raise PipelineError(f"stage {bound!r} is not in {path} ({names})")
    if start:
        names = names[names.index(start):]
    if stop:
        names = names[: names.index(stop) + 1]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    summary = []
    t0 = time.monotonic()
    previous = None
    if start:
        done = [s for s in stages if STAGES.index(s) < STAGES.index(start)]
        previous = done[-1] if done else None
    for k, name in enumerate(names):
        opts = dict(stages[name])
        if name != "mine" and previous is not None and "source" not in opts:
            opts["source"] = stage_dir(out, previous)
        if k == 0 and name != "mine":  # what the pipeline did not write itself
            check_input(resolve_input(out, name, opts.get("source")), name)
        module = importlib.import_module(f"curate.{name}")
        with stage_lock(out, name):
            stats = module.run(out=out, **opts)
        summary.append(stats)
        previous = name
        yield stats
    text = json.dumps({"pipeline": str(path), "seconds": round(time.monotonic() - t0, 1),
                       "stages": summary}, indent=2, default=str)
    write_atomic(out / "pipeline.json", lambda tmp: tmp.write_text(text))
