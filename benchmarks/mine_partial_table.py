"""The runnable problems of a stopped (or still running) `curate mine` run, as a table that
`curate dedup --from` reads.

    python benchmarks/mine_partial_table.py RUN OUT.parquet
    curate dedup --from OUT.parquet --out RUN-partial

A run killed part way keeps its finished syntheses in `RUN/mine/_journal.jsonl` and its
plan (which source each task belongs to) in `RUN/mine/_plan.json`; the stage writes its table
only when every task is done. This script writes the kept rows so far, so the dedup and
decontamination figures of a long run can be taken before it ends. Each row's problem id is
the journal key (the stage's ids are a different hash), its source name comes from the plan,
and its file path and class from the provenance line the stage writes into every problem.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import polars as pl

from curate.journal import read_done
from curate.table import source_struct

_PROVENANCE = re.compile(r"Reference problem mined from (\S+) (\S*): (\S+)::(\w+) \(licence: ([^)]*)\)")


def partial_rows(stage: Path) -> list[dict]:
    """Kept rows of a partial mine stage folder (``RUN/mine``)."""
    plan = json.loads((stage / "_plan.json").read_text())
    rows = []
    for key, v in read_done(stage / "_journal.jsonl").items():
        if not v.get("ok") or key not in plan["tasks"]:
            continue  # a task of an earlier manifest or closure: not part of this plan
        m = _PROVENANCE.search(v["code"])
        name, version, path, cls, licence = m.groups() if m else (plan["tasks"][key], None, None, None, None)
        rows.append({"problem_id": key, "name": f"{name}.{cls}", "code": v["code"],
                     "init_args": json.dumps(v["init_args"]), "input_spec": json.dumps(v["input_spec"]),
                     "source": source_struct(name=plan["tasks"][key], version=version or None,
                                             path=path, class_name=cls, licence=licence)})
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path, help="the run folder given to `curate mine --out`")
    p.add_argument("out", type=Path, help="parquet file to write")
    args = p.parse_args()
    rows = partial_rows(args.run / "mine")
    pl.DataFrame(rows, infer_schema_length=None).sort("problem_id").write_parquet(args.out)
    print(f"{len(rows):,} runnable problems so far -> {args.out}")


if __name__ == "__main__":
    main()
