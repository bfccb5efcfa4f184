"""The README stays a true landing page: its test command is the one CI runs, it lists every subcommand, and the
hand-written metrics guide explains every metric the aggregator exposes."""

from __future__ import annotations

import re
from pathlib import Path

from mfumon.api.metrics import families
from mfumon.cli import SUBCOMMANDS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
GUIDE = (ROOT / "docs" / "operators" / "metrics-rules-dashboards.md").read_text()
MAX_README_LINES = 150


def _first_code_block() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", README, re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line and not line.startswith("#")]


def test_readme_opens_with_the_run_and_test_commands_ci_uses() -> None:
    run_command, test_command, quick_command = _first_code_block()
    assert run_command.endswith("mfumon demo")
    assert test_command in (ROOT / ".ci" / "run").read_text().splitlines()
    # The quick subset beside it: the marker conftest.py gives every test that starts a server, cluster or browser.
    assert quick_command == ".venv/bin/pytest -m 'not slow'"
    assert quick_command in (ROOT / "docs" / "developing.md").read_text()
    markers = (ROOT / "pyproject.toml").read_text()
    assert '"slow: ' in markers and "`pytest -m 'not slow'` is the quick subset" in markers


def test_readme_is_a_landing_page() -> None:
    assert README.count("\n") <= MAX_README_LINES
    linked = set(re.findall(r"\]\((docs/[^)#]+)", README))
    assert len(linked) >= 20 and all((ROOT / page).exists() for page in linked), sorted(linked)


def test_every_metric_is_explained_in_the_guide() -> None:
    every = [
        name
        for value in vars(families).values()
        if isinstance(value, dict)
        for name, family in value.items()
        if isinstance(family, families.Family)
    ]
    assert every, "no metric families found"
    unexplained = [name for name in every if f"`{name}`" not in GUIDE]
    assert unexplained == []


def test_every_subcommand_is_on_the_landing_page() -> None:
    assert [name for name in SUBCOMMANDS if f"`mfumon {name}`" not in README] == []
