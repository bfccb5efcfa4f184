"""The README stays true: its test command is the one CI runs, and every metric the aggregator exposes is documented."""

from __future__ import annotations

import re
from pathlib import Path

from mfumon.api.metrics import families
from mfumon.cli import SUBCOMMANDS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _first_code_block() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", README, re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line and not line.startswith("#")]


def test_readme_opens_with_the_run_and_test_commands_ci_uses() -> None:
    run_command, test_command = _first_code_block()
    assert run_command.endswith("mfumon demo")
    assert test_command in (ROOT / ".ci" / "run").read_text().splitlines()


def test_every_metric_is_documented() -> None:
    every = [
        name
        for value in vars(families).values()
        if isinstance(value, dict)
        for name, family in value.items()
        if isinstance(family, families.Family)
    ]
    assert every, "no metric families found"
    undocumented = [name for name in every if f"`{name}`" not in README]
    assert undocumented == []


def test_every_subcommand_is_documented() -> None:
    assert [name for name in SUBCOMMANDS if f"mfumon {name}" not in README] == []
