"""docs/reject-reasons.md against the reasons the code produces (read by docs/reject_reasons.py)."""

from __future__ import annotations

import importlib.util
import re

from conftest import REPO

DOC = REPO / "docs" / "reject-reasons.md"


def _scanner():
    spec = importlib.util.spec_from_file_location("reject_reasons", REPO / "docs" / "reject_reasons.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _documented() -> set[str]:
    """Names in the first column of the page's ``| reason | meaning |`` tables."""
    names: set[str] = set()
    in_table = False
    for line in DOC.read_text().splitlines():
        if re.match(r"\|\s*reason\s*\|\s*meaning\s*\|", line):
            in_table = True
            continue
        if not line.startswith("|"):
            in_table = False
            continue
        if in_table and not line.startswith("|---"):
            names.update(re.findall(r"`([a-z][a-z0-9_]+)`", line.split("|")[1]))
    return names


def test_every_reason_the_code_produces_is_documented():
    produced = _scanner().reasons()
    missing = {name: sorted(where) for name, where in produced.items() if name not in _documented()}
    assert not missing, f"reasons missing from docs/reject-reasons.md: {missing}"


def test_every_documented_reason_is_produced():
    stale = _documented() - set(_scanner().reasons())
    assert not stale, f"docs/reject-reasons.md names reasons no code produces: {sorted(stale)}"


def test_one_name_per_failure():
    produced = _scanner().reasons()
    # a spec that is not a JSON list: one name in every stage that parses the columns
    files = {w.split(":")[0] for w in produced["bad_input_spec"]}
    assert {"curate/diversify/stage.py", "curate/measure/stage.py", "curate/rank/stage.py"} <= files
    # the retired spellings are gone; measure uses the conformance names
    assert not {"bad_spec", "non_finite", "forward_error"} & set(produced)
    assert any(w.startswith("curate/measure/") for w in produced["non_finite_output"])
    assert any(w.startswith("curate/measure/") for w in produced["forward_fails"])
