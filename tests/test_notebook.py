"""notebooks/explore.ipynb runs top to bottom on a real (small) export and draws its plots."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from curate.export import run

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "explore.ipynb"


def _build_run():
    # the run builder lives in test_export.py; load it by path so this works with or
    # without a tests/__init__.py
    spec = importlib.util.spec_from_file_location("_export_fixture",
                                                  Path(__file__).with_name("test_export.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.build_run


def _images(nb) -> int:
    return sum("image/png" in out.get("data", {})
               for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", []))


def test_committed_notebook_has_no_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None


@pytest.mark.parametrize("stages", [("mine", "dedup", "diversify", "measure", "rank"), ("mine",)],
                         ids=["full", "mine-only"])
def test_notebook_runs_on_an_export(tmp_path, monkeypatch, stages):
    out = _build_run()(tmp_path / "run", stages=stages)
    run(out=out, name="nb-test")
    # the kernel inherits the environment: point it at this run, keep matplotlib off any display
    monkeypatch.setenv("CURATE_EXPORT", str(out / "export"))
    monkeypatch.setenv("MPLBACKEND", "agg")
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=180,
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
    # one figure each: stages/rejections, runtimes, precisions, difficulty, level/category, sources
    assert _images(nb) == 6
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
                   if o.output_type == "stream")
    assert "class Model(" in text and "ModelNew" in text
    assert " sources, " in text and " base problems, " in text
    assert str(out) in text
