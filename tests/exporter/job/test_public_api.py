"""The curated public names of the job-side packages stay in sync with what they export."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "package", ["mfumon.exporter.job.reporter", "mfumon.exporter.job.models", "mfumon.exporter.job.integrations"]
)
def test_all_is_sorted_and_every_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    assert list(module.__all__) == sorted(module.__all__)
    if package == "mfumon.exporter.job.integrations":  # resolving these imports the frameworks
        pytest.importorskip("transformers")
        pytest.importorskip("lightning")
    for name in module.__all__:
        assert getattr(module, name) is not None


def test_reporter_namespace_exports_only_all() -> None:
    module = importlib.import_module("mfumon.exporter.job.reporter")
    public = {name for name in vars(module) if not name.startswith("_")} - {"annotations"}
    assert public == set(module.__all__)


def test_the_facade_is_the_job_side_in_one_short_path() -> None:
    """``from mfumon import X`` gives the very object its module defines, for every name of ``mfumon.__all__``, and
    ``import mfumon`` alone imports neither the reporter nor a framework."""
    probe = (
        "import sys, mfumon; "
        "print(sorted(m for m in sys.modules if m.startswith(('mfumon.', 'torch', 'transformers', 'httpx'))))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
    import mfumon

    assert list(mfumon.__all__) == sorted(mfumon.__all__)
    assert isinstance(mfumon.__version__, str) and mfumon.__version__
    homes = {
        "mfumon.exporter.job.reporter": importlib.import_module("mfumon.exporter.job.reporter"),
        "mfumon.exporter.job.models": importlib.import_module("mfumon.exporter.job.models"),
        "mfumon.exporter.job.integrations": importlib.import_module("mfumon.exporter.job.integrations"),
    }
    exported = {name for module in homes.values() for name in module.__all__}
    assert set(mfumon.__all__) - {"__version__"} == exported  # nothing a job uses is left out, nothing extra
    pytest.importorskip("transformers")
    pytest.importorskip("lightning")
    for name in exported:
        home = next(module for module in homes.values() if name in module.__all__)
        assert getattr(mfumon, name) is getattr(home, name), name
    with pytest.raises(AttributeError):
        _ = mfumon.NoSuchThing  # type: ignore[attr-defined]
