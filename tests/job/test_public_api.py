"""The curated public names of the job-side packages stay in sync with what they export."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("package", ["exporter.job.reporter", "exporter.job.models", "exporter.job.integrations"])
def test_all_is_sorted_and_every_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    assert list(module.__all__) == sorted(module.__all__)
    if package == "exporter.job.integrations":  # resolving these imports the frameworks
        pytest.importorskip("transformers")
        pytest.importorskip("lightning")
    for name in module.__all__:
        assert getattr(module, name) is not None


def test_reporter_namespace_exports_only_all() -> None:
    module = importlib.import_module("exporter.job.reporter")
    public = {name for name in vars(module) if not name.startswith("_")} - {"annotations"}
    assert public == set(module.__all__)
