"""The client package's imports run one way, and its stable public paths keep working.

``mfumon.exporter.node`` (runs on GPU nodes) and ``mfumon.exporter.job`` (runs inside jobs) never import each other, the
demo, or the server; only ``mfumon.exporter.demo`` and ``mfumon.exporter.cli`` sit above them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "exporter"

#: sub-package -> import prefixes it must never use
FORBIDDEN = {
    "node": ("mfumon.exporter.job", "mfumon.exporter.demo", "mfumon.exporter.scheduler", "api"),
    "job": ("mfumon.exporter.node", "mfumon.exporter.demo", "mfumon.exporter.scheduler", "api"),
    "scheduler": ("mfumon.exporter.node", "mfumon.exporter.demo", "api"),
    "ops": ("mfumon.exporter.node", "mfumon.exporter.job", "mfumon.exporter.demo", "mfumon.exporter.scheduler", "api"),
}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_run_one_way(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for name in _imports(path):
            if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN[package]):
                offenders.append(f"{path.relative_to(ROOT.parent)} imports {name}")
    assert not offenders, offenders
