"""Join the pieces of a large run measured on a GPU (``benchmarks/gpu/scale_piece.py``) into one
run folder, then rank and export it here (issue 21's 2,000-problem run).

    python benchmarks/scale_finish.py --out RUN --dedup SAMPLE.parquet PIECE_STATE [PIECE_STATE ...] \
        [--gpu-seconds S --gpu NAME --note TEXT]

Each ``PIECE_STATE`` is the folder a finished piece's last device call returned (its
``diversify-*`` and ``measure-*`` tables). ``SAMPLE.parquet`` is the dedup table the pieces were
cut from. Writes ``RUN/dedup``, ``RUN/diversify`` and ``RUN/measure`` (kept and rejected rows of
every piece, stats summed), then runs ``curate rank`` (solver none: difficulty from measure's GPU
figures) and ``curate export`` on it. ``--gpu-seconds`` (GPU-seconds the pieces' device calls
held, all GPUs counted) is written to ``RUN/device_time.json`` for the notebook's GPU-time
figures: a stage's own seconds cover only the call that finished it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def join(out: Path, dedup: Path, states: list[Path]) -> dict[str, int]:
    import polars as pl

    from curate.table import Rejections, write_stage

    sample = pl.read_parquet(dedup)
    write_stage(out, "dedup", sample, Rejections("dedup").frame(like=sample), sample.height, 0.0)
    counts = {}
    for stage in ("diversify", "measure"):
        missing = [str(s) for s in states if not (s / f"{stage}-kept.parquet").exists()]
        if missing:
            raise SystemExit(f"error: {stage} is not finished in {', '.join(missing)}")
        kept = pl.concat([pl.read_parquet(s / f"{stage}-kept.parquet") for s in states],
                         how="diagonal_relaxed")
        rejected = pl.concat([pl.read_parquet(s / f"{stage}-rejected.parquet") for s in states],
                             how="diagonal_relaxed")
        stats = [json.loads((s / "state.json").read_text())["stats"][stage] for s in states]
        rows_in = sum(int(x["in"]) for x in stats)
        seconds = sum(float(x.get("seconds") or 0.0) for x in stats)
        write_stage(out, stage, kept, rejected, rows_in, seconds,
                    {"pieces": len(states), "device": stats[0].get("device")},
                    kept_in=sum(int(x["kept"]) for x in stats))
        counts[stage] = kept.height
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("states", type=Path, nargs="+")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dedup", type=Path, required=True)
    ap.add_argument("--gpu-seconds", type=float, default=None)
    ap.add_argument("--gpu", default=None, help="the GPU's name, e.g. 'NVIDIA H100 80GB HBM3'")
    ap.add_argument("--note", default="", help="how the GPU-seconds were counted")
    args = ap.parse_args()
    print(json.dumps(join(args.out, args.dedup, args.states)))
    if args.gpu_seconds is not None:
        (args.out / "device_time.json").write_text(json.dumps(
            {"gpu_seconds": args.gpu_seconds, "gpu": args.gpu, "note": args.note}, indent=1) + "\n")
    from curate.export import run as export
    from curate.rank import run as rank

    print(json.dumps({k: rank(args.out).get(k) for k in ("in", "kept", "rejected")}))
    print(json.dumps({k: export(args.out).get(k) for k in ("in", "kept", "rejected")}))


if __name__ == "__main__":
    main()
