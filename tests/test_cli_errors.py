"""Bad input of every kind, fed to every command: one ``error:`` line on stderr, exit code 2.

No case mines, dedups or measures anything: each input is refused before a stage starts
(the checks read YAML, parquet footers and the run folder only), so the table runs in
seconds.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import torch.nn as nn
from typer.testing import CliRunner

from curate.cli import app
from curate.problem import assemble
from curate.table import (REQUIRED_COLUMNS, StageLocked, read_problems, stage_lock, write_atomic,
                          write_stage)

TABLE_STAGES = ("dedup", "diversify", "measure", "rank", "export")
SPEC = [{"kind": "tensor", "shape": [8, 64], "dtype": "float32"}]


def real_row() -> dict:
    """One mined-looking row around torch's own ``nn.GELU`` source."""
    code = assemble(inspect.getsource(nn.GELU).replace("class GELU(", "class Model(", 1) +
                    "\n", SPEC, [])
    return {"problem_id": "p0", "name": "torch.GELU", "code": code, "init_args": "[]",
            "input_spec": json.dumps(SPEC)}


@pytest.fixture()
def inputs(tmp_path: Path) -> dict[str, Path]:
    d = tmp_path / "in"
    d.mkdir()
    files = {
        "yaml_syntax": ("sources:\n  - {kind: pypi, name: timm\n", "dedup: {threshold: 0.8\n"),
        "unknown_key": ('sources:\n  - {kind: pypi, name: timm, versoin: "1.0.31"}\n',
                        "dedup:\n  timeout: 30\n"),
        "empty": ("", ""),
    }
    out: dict[str, Path] = {}
    for kind, (manifest, pipeline) in files.items():
        (d / f"{kind}.manifest.yaml").write_text(manifest)
        (d / f"{kind}.pipeline.yaml").write_text(pipeline)
    (d / "corrupt.parquet").write_bytes(b"PAR1 half a table, the rest never written")
    pl.DataFrame({"problem_id": ["p0"], "text": ["x"]}).write_parquet(d / "no_columns.parquet")
    row = real_row()
    pl.DataFrame([row]).clear().write_parquet(d / "empty.parquet")
    pl.DataFrame([row]).write_parquet(d / "good.parquet")
    (d / "a_file").write_text("not a folder")
    out["dir"] = d
    return out


def invoke(args: list[str]):
    return CliRunner().invoke(app, [str(a) for a in args])


def assert_one_error(result, *fragments: str) -> None:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.exit_code == 2, (result.exit_code, result.stderr, result.exception)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output + result.stderr
    for f in fragments:
        assert f in lines[0], (f, lines[0])


def table_cases(stage: str) -> list[tuple[str, list[str], tuple[str, ...]]]:
    need = REQUIRED_COLUMNS[stage]
    return [
        ("missing table", ["--from", "{d}/nowhere"], ("no problems parquet", "nowhere")),
        ("no earlier stage", [], (f"{stage}: no stage output under",)),
        ("corrupt table", ["--from", "{d}/corrupt.parquet"], ("corrupt.parquet", "not a readable parquet")),
        ("missing columns", ["--from", "{d}/no_columns.parquet"], ("missing columns", repr(need[1]))),
        ("empty table", ["--from", "{d}/empty.parquet"], ("0 rows",)),
        ("unwritable out", ["--from", "{d}/good.parquet", "--out-override", "{d}/a_file/run"], ("a_file",)),
        ("mistyped flag", ["--from", "{d}/good.parquet", "--timeout", "3"], ("No such option: --timeout",)),
    ]


CASES = [(stage, *case) for stage in TABLE_STAGES for case in table_cases(stage)] + [
    ("measure", "negative autotune cap", ["--from", "{d}/good.parquet", "--device", "cpu", "--autotune-ms", "-1"],
     ("autotune_ms must be positive", "-1")),
    ("mine", "yaml syntax", ["{d}/yaml_syntax.manifest.yaml"], ("not valid YAML",)),
    ("mine", "unknown key", ["{d}/unknown_key.manifest.yaml"],
     ("unknown keys ['versoin']", "allowed: kind, name, version")),
    ("mine", "missing manifest", ["{d}/nowhere.yaml"], ("nowhere.yaml does not exist",)),
    ("mine", "empty manifest", ["{d}/empty.manifest.yaml"], ("'sources' list",)),
    ("mine", "unwritable out", ["manifests/default.yaml", "--out-override", "{d}/a_file/run"], ("a_file",)),
    ("mine", "mistyped flag", ["manifests/default.yaml", "--timeout", "3"], ("No such option: --timeout",)),
    ("run", "yaml syntax", ["{d}/yaml_syntax.pipeline.yaml"], ("not valid YAML",)),
    ("run", "unknown key", ["{d}/unknown_key.pipeline.yaml"],
     ("dedup: unknown option 'timeout'", "dedup takes: threshold, num_perm")),
    ("run", "unknown stage", ["{d}/unknown_stage.pipeline.yaml"], ("unknown stages ['dedupe']",)),
    ("run", "missing pipeline", ["{d}/nowhere.yaml"], ("nowhere.yaml does not exist",)),
    ("run", "empty pipeline", ["{d}/empty.pipeline.yaml"], ("empty pipeline",)),
    ("run", "corrupt first table", ["{d}/corrupt_source.pipeline.yaml"], ("not a readable parquet",)),
    ("run", "unwritable out", ["{d}/good.pipeline.yaml", "--out-override", "{d}/a_file/run"], ("a_file",)),
    ("run", "mistyped flag", ["{d}/good.pipeline.yaml", "--stpo", "dedup"], ("No such option: --stpo",)),
]


@pytest.mark.parametrize("command,kind,args,fragments", CASES,
                         ids=[f"{c[0]}-{c[1].replace(' ', '_')}" for c in CASES])
def test_bad_input_is_one_error_line_and_exit_2(inputs, tmp_path: Path, command, kind, args, fragments):
    d = inputs["dir"]
    (d / "unknown_stage.pipeline.yaml").write_text("dedupe: {}\n")
    (d / "corrupt_source.pipeline.yaml").write_text(f"dedup:\n  source: {d}/corrupt.parquet\n")
    (d / "good.pipeline.yaml").write_text(f"dedup:\n  source: {d}/good.parquet\n  kernelbench: none\n")
    args = [a.format(d=d) for a in args]
    out = str(tmp_path / "run")
    if "--out-override" in args:
        k = args.index("--out-override")
        out = args[k + 1]
        del args[k:k + 2]
    result = invoke([command, *args, "--out", out])
    assert_one_error(result, *fragments)


@pytest.mark.parametrize("command", TABLE_STAGES + ("mine",))
def test_a_stage_folder_in_use_is_refused(inputs, tmp_path: Path, command):
    d = inputs["dir"]
    out = tmp_path / "run"
    (out / command).mkdir(parents=True)
    # a live process holds the lock: this one (the CliRunner runs in it)
    (out / command / ".lock").write_text(json.dumps({"pid": os.getpid(), "host": os.uname().nodename}))
    args = ["manifests/default.yaml"] if command == "mine" else ["--from", d / "good.parquet"]
    result = invoke([command, *args, "--out", out])
    assert_one_error(result, "being written by another curate process", f"pid {os.getpid()}")
    assert (out / command / ".lock").exists()  # the holder's lock is left alone


def test_stage_lock_takes_over_a_stale_lock_and_releases(tmp_path: Path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(dead.stdout)  # a process that has exited
    (tmp_path / "dedup").mkdir()
    lock_file = tmp_path / "dedup" / ".lock"
    lock_file.write_text(json.dumps({"pid": pid, "host": os.uname().nodename}))
    with stage_lock(tmp_path, "dedup") as lock:
        assert json.loads(lock.read_text())["pid"] == os.getpid()
        with pytest.raises(StageLocked):  # the same folder twice
            with stage_lock(tmp_path, "dedup"):
                pass
    assert not lock_file.exists()


def test_a_killed_write_leaves_the_old_table_whole(tmp_path: Path):
    row = real_row()
    kept = pl.DataFrame([row])
    write_stage(tmp_path, "dedup", kept, pl.DataFrame(), 1, 0.0)
    part = tmp_path / "dedup" / "problems" / "part-00000.parquet"
    before = part.read_bytes()

    def dies_halfway(tmp: Path) -> None:
        tmp.write_bytes(before[: len(before) // 2])
        raise KeyboardInterrupt  # the process is stopped mid-write

    with pytest.raises(KeyboardInterrupt):
        write_atomic(part, dies_halfway)
    assert part.read_bytes() == before
    assert read_problems(tmp_path / "dedup").to_dicts() == [row]
    assert sorted(p.name for p in part.parent.iterdir()) == ["part-00000.parquet"]
