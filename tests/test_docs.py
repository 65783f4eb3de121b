"""README.md is a short front page and docs/ the manual: every stage option, every stage's reject
reasons and every reward setting is documented on its page, the README stays short and links
every page, and no link in either points at a file or heading that does not exist.

The option dataclasses (``curate/<stage>/options.py``) and ``RewardConfig`` are the source: a new
option fails here until its row is added to the stage's ``## Options`` table (one line).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from conftest import REPO
from curate.harness.options import STAGE_OPTIONS, fields, options_class

DOCS = REPO / "docs"
README = REPO / "README.md"
MAX_README_LINES = 160
MAX_LINE_CHARS = 200
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def _is_bool(tp) -> bool:
    return tp is bool or tp == (bool | None)


def _cli_names(stage: str) -> dict[str, str]:
    """What the stage's page must name for each option, as ``curate/harness/cli.py`` makes the
    command from the dataclass: ``--name-with-dashes`` (or the field's ``flag``), the upper-case
    name of a positional argument, the field name of an option kept off the command line; and
    ``--out``, and ``--from`` for every stage but mine."""
    names = {"out": "--out"}
    if stage != "mine":
        names["source"] = "--from"
    for f in fields(options_class(stage)):
        if f.metadata.get("argument"):
            names[f.name] = f.name.upper()
        elif not f.metadata.get("cli", True):
            names[f.name] = f.name
        else:
            names[f.name] = f.metadata.get("flag") or "--" + f.name.replace("_", "-")
    return names


def _section(text: str, heading: str) -> str:
    """The body of the ``## heading`` section of a markdown page ("" when there is none)."""
    m = re.search(rf"^## {re.escape(heading)}\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    return m.group(1) if m else ""


def _first_cells(section: str) -> list[str]:
    """The first cell of every body row of the tables in ``section`` (not header rows, the
    rows a `|---|` line follows)."""
    lines = section.splitlines()
    rule = re.compile(r"\|\s*:?-")
    return [line.split("|")[1] for i, line in enumerate(lines)
            if line.startswith("|") and not rule.match(line)
            and not (i + 1 < len(lines) and rule.match(lines[i + 1]))]


@pytest.mark.parametrize("stage", list(STAGE_OPTIONS))
def test_every_option_is_on_its_stage_page(stage: str):
    page = DOCS / f"{stage}.md"
    assert page.is_file(), f"docs/{stage}.md is missing"
    cells = "\n".join(_first_cells(_section(page.read_text(), "Options")))
    assert cells, f"docs/{stage}.md has no `## Options` table"
    missing = {name: shown for name, shown in _cli_names(stage).items()
               if not re.search(rf"`{re.escape(shown)}(?![\w-])", cells)}
    assert not missing, (f"docs/{stage}.md's Options table does not name {sorted(missing.values())}: "
                         f"add a row  | `{next(iter(missing.values()))}` | default | what it does |")


@pytest.mark.parametrize("stage", list(STAGE_OPTIONS))
def test_no_stage_page_documents_an_option_the_stage_lacks(stage: str):
    flags = set(_cli_names(stage).values())
    flags |= {"--no-" + f.name.replace("_", "-") for f in fields(options_class(stage))
              if _is_bool(f.type) and f.metadata.get("cli", True) and not f.metadata.get("flag")}
    cells = _first_cells(_section((DOCS / f"{stage}.md").read_text(), "Options"))
    stale = {flag for cell in cells for flag in FLAG.findall(cell)} - flags
    assert not stale, f"docs/{stage}.md documents flags `curate {stage}` does not take: {sorted(stale)}"


def _reasons_of(stage: str) -> set[str]:
    """The reasons in the ``## stage`` table of docs/reject-reasons.md."""
    section = _section((DOCS / "reject-reasons.md").read_text(), stage)
    return {name for cell in _first_cells(section) for name in re.findall(r"`([a-z][a-z0-9_]+)`", cell)}


@pytest.mark.parametrize("stage", list(STAGE_OPTIONS))
def test_stage_page_names_the_stage_reject_reasons(stage: str):
    reasons = _reasons_of(stage)
    assert reasons, f"docs/reject-reasons.md has no table under `## {stage}`"
    rejections = _section((DOCS / f"{stage}.md").read_text(), "Rejections")
    assert rejections, f"docs/{stage}.md has no `## Rejections` section"
    missing = {r for r in reasons if f"`{r}`" not in rejections}
    assert not missing, f"docs/{stage}.md's Rejections do not name {sorted(missing)}"


def test_every_reward_setting_is_documented():
    from curate.rl.score import RewardConfig

    table = "\n".join(_first_cells(_section((DOCS / "reward.md").read_text(), "Settings: `RewardConfig`")))
    missing = [f.name for f in dataclasses.fields(RewardConfig) if f"`{f.name}`" not in table]
    assert not missing, f"docs/reward.md's RewardConfig table lacks {missing}"


def test_readme_is_short_and_links_every_docs_page():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines (at most {MAX_README_LINES})"
    long = [(i + 1, len(line)) for i, line in enumerate(lines) if len(line) > MAX_LINE_CHARS]
    assert not long, f"README.md lines over {MAX_LINE_CHARS} characters (line, length): {long}"
    linked = {Path(t.split("#")[0]).name for t in _links(README) if t.startswith("docs/")}
    unlinked = sorted(p.name for p in DOCS.glob("*.md") if p.name not in linked)
    assert not unlinked, f"README.md does not link docs/{unlinked}"


def test_readme_starts_with_the_two_commands():
    """A newcomer's first screen: the set-up and main job, then the tests."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), re.S)
    assert "curate run pipelines/default.yaml --out runs/default" in blocks[0]
    assert "-m pytest" in blocks[1]


def test_docs_index_links_every_page():
    linked = {Path(t.split("#")[0]).name for t in _links(DOCS / "README.md")}
    unlinked = sorted(p.name for p in DOCS.glob("*.md") if p.name != "README.md" and p.name not in linked)
    assert not unlinked, f"docs/README.md does not index {unlinked}"


def _links(page: Path) -> list[str]:
    """Relative link targets of a markdown page (web links left out)."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", t)]


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation but `-` and `_` dropped,
    spaces as `-`."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", text, re.M)}


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_links_resolve(page: Path):
    broken = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(target)
    assert not broken, f"{page.name}: links to missing files or headings: {broken}"


def _pipeline_blocks() -> list[tuple[str, str]]:
    """(page, text) of every YAML block in README.md and docs/ that is a pipeline (its keys
    are stage names; a mine manifest's `sources:` is not)."""
    import yaml

    out = []
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), re.S):
            data = yaml.safe_load(block)
            if isinstance(data, dict) and set(data) <= set(STAGE_OPTIONS):
                out.append((page.name, block))
    return out


def test_pipeline_yaml_in_the_docs_is_valid(tmp_path: Path):
    from curate.pipeline import load_pipeline

    blocks = _pipeline_blocks()
    assert {"README.md", "pipeline.md"} <= {page for page, _ in blocks}
    for i, (page, block) in enumerate(blocks):
        path = tmp_path / f"{i}.yaml"
        path.write_text(block)
        load_pipeline(path)  # raises PipelineError naming the bad key or value
