"""The ``curate`` command line: one command per pipeline stage, and ``run`` for a whole pipeline.

Every stage command reads the previous stage's table from ``OUT/<previous>/`` (or
``--from PATH``) and writes ``OUT/<stage>/problems``, ``OUT/<stage>/rejected`` and
``OUT/<stage>/stats.json``. The stage commands' options are made from each stage's options
dataclass (``curate/<stage>/options.py``, :mod:`curate.harness.cli`), the same that the
pipeline YAML is checked against.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

import typer
from typer.core import TyperGroup

from curate.harness.cli import OUT_HELP, command
from curate.harness.options import STAGE_OPTIONS

# the click that typer runs on (its own vendored copy in typer >= 0.25, else click itself)
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
_NoArgsIsHelp = getattr(sys.modules[_ClickException.__module__], "NoArgsIsHelpError", ())


def _one_line(exc: BaseException) -> str:
    """An exception's message on one line (YAML and polars messages span several)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 1000 else text[:997] + "..."


class _OneLineGroup(TyperGroup):
    """Usage errors (an unknown option, a bad value, a missing argument) as one ``error:``
    line and exit code 2, like every other bad input, instead of click's usage block."""

    def main(self, args: Any = None, prog_name: Any = None, complete_var: Any = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _NoArgsIsHelp as exc:  # bare `curate`: the help, as before
            exc.show()
            sys.exit(exc.exit_code)
        except _ClickException as exc:
            if not standalone_mode:
                raise
            typer.echo(f"error: {_one_line(exc.format_message())}", err=True)
            sys.exit(2)
        except typer.Abort:
            if not standalone_mode:
                raise
            typer.echo("error: aborted", err=True)
            sys.exit(1)
        if standalone_mode:
            sys.exit(rv if isinstance(rv, int) else 0)
        return rv


app = typer.Typer(
    help=(
        "Turn real PyTorch code into an RL-ready problem set for GPU-kernel generation.\n\n"
        "Stages, in order: mine -> dedup -> diversify -> measure -> rank -> export. "
        "Run them one at a time on the same --out folder, or all at once with "
        "`curate run pipelines/default.yaml --out runs/default`."
    ),
    cls=_OneLineGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)

OutOpt = typer.Option(..., "--out", "-o", help=OUT_HELP)


@contextmanager
def _clear_errors() -> Iterator[None]:
    """Show bad input (malformed or unknown YAML, a missing, corrupt or empty table, a missing
    column, an unwritable --out, a stage folder in use) as one ``error:`` line and exit code 2
    instead of a traceback; CURATE_DEBUG=1 re-raises."""
    import polars as pl
    import yaml

    try:
        yield
    except (ValueError, OSError, RuntimeError, yaml.YAMLError, pl.exceptions.PolarsError) as exc:
        if os.environ.get("CURATE_DEBUG"):
            raise
        typer.echo(f"error: {_one_line(exc)}", err=True)
        raise typer.Exit(2) from None


@contextmanager
def _stage(out: Path, stage: str, source: Optional[Path] = None) -> Iterator[None]:
    """Before ``stage`` starts: its input table checked (:func:`curate.table.check_input`),
    ``OUT/<stage>`` created and locked against a second run (:func:`curate.table.stage_lock`)."""
    from curate.harness.stage import resolve_input
    from curate.table import check_input, stage_lock

    if stage != "mine":
        check_input(resolve_input(out, stage, source), stage)
    with stage_lock(out, stage):
        yield


def _existing_file(path: Path, what: str) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} does not exist or is not a file")
    return path


def _echo_export(out: Path) -> None:
    """Where the export is and what is in it (:func:`curate.export.summary.describe_export`)."""
    from curate.export.summary import describe_export

    try:
        typer.echo(describe_export(out))
    except FileNotFoundError as exc:  # every row rejected: nothing to describe
        typer.echo(f"export: {exc}")


def _echo_stats(stats: dict) -> None:
    typer.echo(json.dumps({k: stats[k] for k in ("stage", "in", "kept", "rejected", "seconds")}))
    if stats.get("rejected_by_reason"):
        typer.echo("  rejected by reason: " + ", ".join(
            f"{k}={v}" for k, v in stats["rejected_by_reason"].items()))


_HELP = {
    "mine": """Find nn.Module subclasses in the manifest's sources and write KernelBench-format problems.

    A stopped run resumes where it stopped when started again with the same --out. Synthesis
    can run on another machine: --export-pending, python -m curate.mine.offload, --import-outcomes.""",
    "dedup": "Exact and MinHash-LSH near-dedup, then decontamination against KernelBench.",
    "diversify": """Aim each problem's input shapes at a runtime band on a GPU.

    The forward is priced on the meta device (FLOPs and bytes per operator against a
    roofline of --target-gpu); the batch grows first, then sequence/spatial/feature axes,
    then constructor widths; on a GPU each shape is timed and corrected until its eager
    median is in --band-ms. Problems that cannot reach the band are rejected
    (launch_bound, over_memory) with the best time reached.""",
    "measure": """Time eager (and TorchInductor) runtimes; drop non-finite, non-deterministic, constant problems.

    On CUDA: CUDA events around each trial, warm-up, L2 flushed before each trial, median of up
    to --trials within --budget-s; TorchInductor compiles run ahead on spare cores while timing
    runs alone on the GPU. A problem that segfaults, hangs, runs out of memory or raises a CUDA
    error becomes a rejected row ('crash', 'timeout', 'memory', 'cuda_error') and the run goes on.
    A row whose worker died is measured again on another GPU once before it is rejected.""",
    "rank": "Level, category and two difficulty axes per problem (predicted chance a model's kernel is wrong; speed headroom); optionally a solver's verified pass rate and pass@k.",
    "export": """Prune, split by dedup cluster and write a Hugging Face DatasetDict, parquet configs,
    card and verl view; optionally push them to the Hugging Face Hub.""",
}


def _run_stage(stage: str, opts: dict[str, Any]) -> None:
    """One stage command: its input checked, its folder locked, its ``run`` called with the
    options as parsed, its stats echoed; bad input as one ``error:`` line."""
    import importlib

    with _clear_errors(), _stage(opts["out"], stage, opts.get("source")):
        if stage == "mine":
            _existing_file(opts["manifest"], "manifest")
        stats = importlib.import_module(f"curate.{stage}").run(**opts)
        if "in" in stats:
            _echo_stats(stats)
            if stage == "export":
                _echo_export(opts["out"])
        else:  # mine --export-pending: what it wrote, not a table
            typer.echo(json.dumps(stats))


for _name in STAGE_OPTIONS:  # pipeline order
    app.command(_name)(command(_name, _run_stage, _HELP[_name]))


@app.command("run")
def run_pipeline(
    pipeline: Path = typer.Argument(..., help="Pipeline YAML."),
    out: Path = OutOpt,
    start: Optional[str] = typer.Option(None, help="Begin at this stage (earlier ones must exist in OUT)."),
    stop: Optional[str] = typer.Option(None, help="End after this stage."),
) -> None:
    """Run the stages listed in a pipeline YAML, in order, into OUT."""
    from curate.pipeline import run_pipeline as _run

    with _clear_errors():
        _existing_file(pipeline, "pipeline")
        ran = []
        for stats in _run(pipeline, out, start=start, stop=stop):
            _echo_stats(stats)
            ran.append(stats.get("stage"))
        if "export" in ran:
            _echo_export(out)


if __name__ == "__main__":
    app()
