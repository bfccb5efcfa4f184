"""The systemd units in deploy/systemd/: each runs a real subcommand, reads its settings from an environment file
whose example names only settings that exist, and takes its token as a credential, never from the file."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from mfumon.api.core.config import Settings
from mfumon.cli import SUBCOMMANDS
from tests.deploy._support import DEPLOY, REPO

SYSTEMD = DEPLOY / "systemd"


def _unit(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def _settings(example: Path) -> tuple[set[str], dict[str, str]]:
    """The settings an example environment file names (set or commented out), and those it sets."""
    text = example.read_text()
    named = set(re.findall(r"^#?(MFUMON_\w+)=", text, re.MULTILINE))
    return named, dict(re.findall(r"^(MFUMON_\w+)=(.*)$", text, re.MULTILINE))


@pytest.mark.parametrize("path", sorted(SYSTEMD.glob("*.service")), ids=lambda p: p.name)
def test_every_unit_runs_a_subcommand_with_its_token_as_a_credential(path: Path) -> None:
    unit = _unit(path)
    (exec_start,) = unit["ExecStart"]
    words = shlex.split(exec_start)
    assert words[0] == "/opt/mfu-monitor/.venv/bin/mfumon" and words[1] in SUBCOMMANDS
    assert unit["EnvironmentFile"] == [f"-/etc/mfumon/{path.stem.removeprefix('mfumon-')}.env"]
    (credential,) = unit["LoadCredential"]
    name, _, source = credential.partition(":")
    assert source.startswith("/etc/mfumon/") and any(e.endswith(f"=%d/{name}") for e in unit["Environment"])
    assert unit["Restart"] == ["on-failure"] and unit["NoNewPrivileges"] == ["yes"]


def test_the_aggregator_unit_serves_from_its_environment_file() -> None:
    unit = _unit(SYSTEMD / "mfumon-serve.service")
    assert shlex.split(unit["ExecStart"][0])[1:] == ["serve"]  # host, port, database: all from serve.env
    assert unit["Environment"] == ["MFUMON_INGEST_TOKENS_FILE=%d/ingest-tokens"]
    assert unit["LoadCredential"] == ["ingest-tokens:/etc/mfumon/ingest-tokens"]
    assert unit["WorkingDirectory"] == ["/var/lib/mfumon-serve"] and unit["StateDirectory"] == ["mfumon-serve"]
    assert (REPO / unit["Documentation"][0].removeprefix("file:/opt/mfu-monitor/")).exists()
    named, example = _settings(SYSTEMD / "serve.env.example")
    known = {f"MFUMON_{name}" for name in Settings.model_fields}
    assert named <= known, named - known
    # Listening beyond loopback needs tokens, which the unit hands over; a real database, not ./mfumon.db.
    assert example["MFUMON_HOST"] == "0.0.0.0" and example["MFUMON_DATABASE_URL"].startswith("postgresql")
    assert "TOKEN=" not in (SYSTEMD / "serve.env.example").read_text().replace("REQUIRES_TOKEN=", "")
    settings = Settings(**{k.removeprefix("MFUMON_"): v for k, v in example.items() if "DATABASE" not in k})
    assert settings.PORT == 8000 and settings.HOST == "0.0.0.0"
