"""The client package's imports run one way, and its stable public paths keep working.

``exporter.node`` (runs on GPU nodes) and ``exporter.job`` (runs inside jobs) never import each other, the demo, or
the server; only ``exporter.demo`` and ``exporter.cli`` sit above them.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "exporter"

#: sub-package -> import prefixes it must never use
FORBIDDEN = {
    "node": ("exporter.job", "exporter.demo", "exporter.scheduler", "api"),
    "job": ("exporter.node", "exporter.demo", "exporter.scheduler", "api"),
    "scheduler": ("exporter.node", "exporter.demo", "api"),
    "ops": ("exporter.node", "exporter.job", "exporter.demo", "exporter.scheduler", "api"),
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


def test_stable_public_paths() -> None:
    import exporter
    from exporter import integrations, models, reporter
    from exporter.job import models as job_models
    from exporter.job import reporter as job_reporter

    assert exporter.JobReporter is job_reporter.JobReporter is reporter.JobReporter
    assert models.from_hf_config is job_models.from_hf_config
    assert set(integrations.__all__) == set(importlib.import_module("exporter.job.integrations").__all__)
    for module in (reporter, models, integrations):
        assert list(module.__all__) == sorted(module.__all__)
