"""The ``curate`` command line: one command per pipeline stage, and ``run`` for a whole pipeline.

Every stage command reads the previous stage's table from ``OUT/<previous>/`` (or
``--from PATH``) and writes ``OUT/<stage>/problems``, ``OUT/<stage>/rejected`` and
``OUT/<stage>/stats.json``.
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

OutOpt = typer.Option(..., "--out", "-o", help="Run folder; the stage writes OUT/<stage>/.")
FromOpt = typer.Option(None, "--from", help="Read problems from this stage folder or parquet "
                       "instead of OUT/<previous stage>.")


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
    from curate.table import check_input, latest_input, stage_lock

    if stage != "mine":
        check_input(source if source is not None else latest_input(out, stage), stage)
    with stage_lock(out, stage):
        yield


def _existing_file(path: Path, what: str) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} does not exist or is not a file")
    return path


def _echo_stats(stats: dict) -> None:
    typer.echo(json.dumps({k: stats[k] for k in ("stage", "in", "kept", "rejected", "seconds")}))
    if stats.get("rejected_by_reason"):
        typer.echo("  rejected by reason: " + ", ".join(
            f"{k}={v}" for k, v in stats["rejected_by_reason"].items()))


@app.command()
def mine(
    manifest: Path = typer.Argument(..., help="YAML manifest listing sources (see manifests/)."),
    out: Path = OutOpt,
    workers: Optional[int] = typer.Option(None, help="Worker processes (default: all cores)."),
    timeout_s: float = typer.Option(30.0, help="Seconds allowed to synthesize one module's inputs."),
    mem_mb: int = typer.Option(4096, help="Memory budget per synthesis worker (MiB)."),
    limit: Optional[int] = typer.Option(None, help="Stop after this many candidate modules (for trials)."),
    sample_per_source: Optional[int] = typer.Option(
        None, help="Mine a seeded random sample of at most this many classes of each source (every "
        "source of a large manifest represented, in a fraction of the time)."),
    sample_seed: int = typer.Option(0, help="Seed of --sample-per-source."),
    executor: str = typer.Option("local", help="Where indexing, closures and synthesis run: 'local' "
                                 "(a process pool on this machine) or 'ray' (a Ray cluster)."),
    ray_address: Optional[str] = typer.Option(None, help="Ray cluster to join ('auto', 'ray://host:10001'); "
                                              "default: start a local Ray instance (--executor ray)."),
    retry: str = typer.Option("", help="Resuming a stopped run: synthesize again the items its journal "
                              "rejected for these reasons (comma-separated, e.g. "
                              "'constructor_failed,no_runnable_inputs', or 'all'), after an upgrade."),
    export_pending: Optional[Path] = typer.Option(
        None, help="Plan, then write the pending syntheses to this file (.jsonl.xz) and stop: run them "
        "elsewhere with 'python -m curate.mine.offload FILE --out DIR' (torch alone needed there)."),
    import_outcomes: str = typer.Option(
        "", help="Outcome files of curate.mine.offload (comma-separated) to merge into the run's journal "
        "before synthesizing what is left."),
) -> None:
    """Find nn.Module subclasses in the manifest's sources and write KernelBench-format problems.

    A stopped run resumes where it stopped when started again with the same --out. Synthesis
    can run on another machine: --export-pending, python -m curate.mine.offload, --import-outcomes."""
    from curate.mine import run

    with _clear_errors(), _stage(out, "mine"):
        _existing_file(manifest, "manifest")
        stats = run(manifest=manifest, out=out, workers=workers, timeout_s=timeout_s,
                    mem_mb=mem_mb, limit=limit, executor=executor, ray_address=ray_address,
                    retry=[r.strip() for r in retry.split(",") if r.strip()], export_pending=export_pending,
                    import_outcomes=[Path(p.strip()) for p in import_outcomes.split(",") if p.strip()],
                    sample_per_source=sample_per_source, sample_seed=sample_seed)
        if export_pending is not None:
            typer.echo(json.dumps(stats))
        else:
            _echo_stats(stats)


@app.command()
def dedup(
    out: Path = OutOpt,
    source: Optional[Path] = FromOpt,
    threshold: float = typer.Option(0.8, help="MinHash Jaccard threshold for near-duplicates."),
    num_perm: int = typer.Option(128, help="MinHash permutations."),
    kernelbench: str = typer.Option(
        "auto", help="Decontamination reference: a KernelBench problems JSONL, a Hugging Face "
        "dataset id, 'auto' (local copy, then ScalingIntelligence/KernelBench) or 'none'."),
    contamination_threshold: float = typer.Option(
        0.6, help="MinHash Jaccard to a KernelBench problem above which a problem is contaminated."),
    backend: str = typer.Option(
        "rminhash", help="MinHash and LSH: 'rminhash' (compiled R-MinHash, fast) or 'datasketch' (signatures that "
        "interchange with datasketch's MinHash)."),
    workers: Optional[int] = typer.Option(None, help="Processes (default: all cores)."),
    parse_check: bool = typer.Option(
        False, "--parse-check/--no-parse-check",
        help="Parse every problem and reject the ones that are not valid Python (slower)."),
) -> None:
    """Exact and MinHash-LSH near-dedup, then decontamination against KernelBench."""
    from curate.dedup import run

    with _clear_errors(), _stage(out, "dedup", source):
        _echo_stats(run(out=out, source=source, threshold=threshold, num_perm=num_perm,
                        kernelbench=kernelbench, contamination_threshold=contamination_threshold,
                        backend=backend, workers=workers, parse_check=parse_check))


@app.command()
def diversify(
    out: Path = OutOpt,
    source: Optional[Path] = FromOpt,
    variants: int = typer.Option(3, help="In-band shapes per problem: the primary one and the rest spread "
                                 "across the band (a held-out odd-size shape for the verifier comes on top)."),
    band_ms: tuple[float, float] = typer.Option((0.5, 10.0), help="Eager median wanted on the target GPU, "
                                                "LO HI (ms)."),
    target_gpu: str = typer.Option("h100", help="GPU the band is for: h100, h200 or a100."),
    mem_budget_mb: int = typer.Option(4096, help="Most MiB one forward may need (parameters, inputs, "
                                      "outputs, peak activations)."),
    device: str = typer.Option("auto", help="'cuda': estimate, then time and correct each shape on the GPU; "
                               "'cpu': estimates only (rows flagged 'estimated'); 'auto': cuda when present."),
    workers: Optional[int] = typer.Option(None, help="Planning worker processes (default: all cores)."),
    timeout_s: float = typer.Option(60.0, help="Seconds to plan (and calibrate) one problem."),
) -> None:
    """Aim each problem's input shapes at a runtime band on a GPU.

    The forward is priced on the meta device (FLOPs and bytes per operator against a
    roofline of --target-gpu); the batch grows first, then sequence/spatial/feature axes,
    then constructor widths; on a GPU each shape is timed and corrected until its eager
    median is in --band-ms. Problems that cannot reach the band are rejected
    (launch_bound, over_memory) with the best time reached."""
    from curate.diversify import run

    with _clear_errors(), _stage(out, "diversify", source):
        _echo_stats(run(out=out, source=source, variants=variants, band_ms=band_ms, target_gpu=target_gpu,
                        mem_budget_mb=mem_budget_mb, device=device, workers=workers, timeout_s=timeout_s))


@app.command()
def measure(
    out: Path = OutOpt,
    source: Optional[Path] = FromOpt,
    device: str = typer.Option("auto", help="'cuda', 'cpu' or 'auto' (cuda when present)."),
    inductor: Optional[bool] = typer.Option(
        None, "--inductor/--no-inductor",
        help="Also time TorchInductor (torch.compile). Default: on CUDA yes, on CPU no."),
    min_ms: float = typer.Option(0.0, help="Reject problems whose eager median is below this (ms)."),
    max_ms: float = typer.Option(10_000.0, help="Reject problems whose eager median is above this (ms)."),
    trials: int = typer.Option(100, help="Timed trials per problem (median reported)."),
    warmup: int = typer.Option(3, help="Warm-up runs before timing."),
    timeout_s: float = typer.Option(300.0, help="Seconds allowed per problem."),
    workers: Optional[int] = typer.Option(
        None, help="Measure workers (CUDA: one per GPU by default; CPU timing uses 1)."),
    budget_s: Optional[float] = typer.Option(
        None, help="Seconds of timed trials per callable; trials are cut to fit "
        "(default 0.25 s on CUDA, 1 s on the CPU; at least 10 trials on CUDA, 3 on the CPU)."),
    compile_workers: Optional[int] = typer.Option(
        None, help="CUDA: compile-ahead workers per GPU that run TorchInductor compiles on spare "
        "cores while the GPU times (default: spare cores, at most 8; 0: off)."),
    gpu_mem_fraction: Optional[float] = typer.Option(
        None, help="CUDA: share of GPU memory a problem may allocate before it is rejected as "
        "'memory' (default 0.5 with compile-ahead workers, else 0.9)."),
    cuda_graph: str = typer.Option(
        "auto", help="CUDA: also time CUDA-graph replays: 'auto' (launch-bound problems, eager "
        "under 0.1 ms), 'on' or 'off'."),
    profile: Optional[bool] = typer.Option(
        None, "--profile/--no-profile",
        help="CUDA: profile one forward for the share of GPU time in library kernels (default on)."),
    inductor_cache: Optional[Path] = typer.Option(
        None, help="Folder for Inductor's and Triton's compile caches (default: torch's own)."),
    band: bool = typer.Option(
        True, "--band/--no-band", help="CUDA: hold each row to the runtime band diversify aimed it "
        "at (outside it: rejected 'out_of_band')."),
    min_shapes: int = typer.Option(
        3, help="Rows of a base problem left with fewer in-band shapes than this are rejected "
        "('too_few_shapes')."),
    executor: str = typer.Option(
        "local", help="'local' (one measure worker per GPU of this host) or 'ray' (one GPU actor per "
        "GPU of every node of a Ray cluster; see --ray-address)."),
    ray_address: Optional[str] = typer.Option(
        None, help="Ray cluster to join ('auto' on a node started with `ray start`, "
        "'ray://head:10001'); default: start a local Ray instance (--executor ray)."),
) -> None:
    """Time eager (and TorchInductor) runtimes; drop non-finite, non-deterministic, constant problems.

    On CUDA: CUDA events around each trial, warm-up, L2 flushed before each trial, median of up
    to --trials within --budget-s; TorchInductor compiles run ahead on spare cores while timing
    runs alone on the GPU. A problem that segfaults, hangs, runs out of memory or raises a CUDA
    error becomes a rejected row ('crash', 'timeout', 'memory', 'cuda_error') and the run goes on.
    A row whose worker died is measured again on another GPU once before it is rejected.
    """
    from curate.measure import run

    with _clear_errors(), _stage(out, "measure", source):
        _echo_stats(run(out=out, source=source, device=device, inductor=inductor, min_ms=min_ms,
                        max_ms=max_ms, trials=trials, warmup=warmup, timeout_s=timeout_s,
                        workers=workers, budget_s=budget_s, compile_workers=compile_workers,
                        gpu_mem_fraction=gpu_mem_fraction, cuda_graph=cuda_graph, profile=profile,
                        inductor_cache=str(inductor_cache) if inductor_cache else None, band=band,
                        min_shapes=min_shapes, executor=executor, ray_address=ray_address))


@app.command()
def rank(
    out: Path = OutOpt,
    source: Optional[Path] = FromOpt,
    solver: str = typer.Option("none", help="'none' (difficulty from measured figures), 'inductor', 'openai' or 'completions'."),
    k: int = typer.Option(1, help="Candidates per problem."),
    completions: Optional[Path] = typer.Option(None, help="JSONL of {problem_id, completion} "
                                               "(solver=completions)."),
    base_url: Optional[str] = typer.Option(None, help="OpenAI-compatible endpoint (solver=openai)."),
    model: Optional[str] = typer.Option(None, help="Model name at the endpoint (solver=openai)."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", help="Environment variable holding the key."),
    temperature: float = typer.Option(0.8, help="Sampling temperature (solver=openai)."),
    concurrency: int = typer.Option(8, help="Concurrent requests (solver=openai)."),
    cache_dir: Optional[Path] = typer.Option(None, help="On-disk completion cache (default OUT/rank/cache)."),
    max_problems: Optional[int] = typer.Option(None, help="Rank only this many problems; "
                                               "the rest keep the difficulty measure's figures give."),
    timeout_s: float = typer.Option(300.0, help="Seconds allowed to verify one candidate."),
) -> None:
    """Score a baseline solver's candidates with the verifier: pass rate, pass@k, difficulty."""
    from curate.rank import run

    with _clear_errors(), _stage(out, "rank", source):
        _echo_stats(run(out=out, source=source, solver=solver, k=k, completions=completions,
                        base_url=base_url, model=model, api_key_env=api_key_env,
                        temperature=temperature, concurrency=concurrency, cache_dir=cache_dir,
                        max_problems=max_problems, timeout_s=timeout_s))


@app.command()
def export(
    out: Path = OutOpt,
    source: Optional[Path] = FromOpt,
    name: str = typer.Option("curate-kernels", help="Dataset name used in the card."),
    val_fraction: float = typer.Option(0.1, help="Share of dedup clusters in validation."),
    test_fraction: float = typer.Option(0.1, help="Share of dedup clusters in test."),
    seed: int = typer.Option(0, help="Seed of the cluster split."),
    max_prompt_tokens: Optional[int] = typer.Option(
        None, help="Reject rows whose prompt has more tokens (reason prompt_too_long)."),
    prune: bool = typer.Option(True, help="Prune each reference program to what Model and the "
                               "input functions reach (proven by running both versions)."),
    workers: Optional[int] = typer.Option(None, help="Processes proving pruned programs (default: CPU count)."),
    push_to_hub: Optional[str] = typer.Option(
        None, "--push-to-hub", help="Also upload every config to this Hugging Face dataset repo (USER/NAME)."),
    private: bool = typer.Option(False, help="Create the Hub repository private (--push-to-hub)."),
) -> None:
    """Prune, split by dedup cluster and write a Hugging Face DatasetDict, parquet configs,
    card and verl view; optionally push them to the Hugging Face Hub."""
    from curate.export import run

    with _clear_errors(), _stage(out, "export", source):
        _echo_stats(run(out=out, source=source, name=name, val_fraction=val_fraction,
                        test_fraction=test_fraction, seed=seed, max_prompt_tokens=max_prompt_tokens,
                        prune=prune, workers=workers, push_to_hub_repo=push_to_hub, private=private))


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
        for stats in _run(pipeline, out, start=start, stop=stop):
            _echo_stats(stats)


if __name__ == "__main__":
    app()
