"""The documentation site builds with no warning, serves nothing from the internet, and its generated reference
pages (metrics, alerts and recording rules, CLI) are what the code and rule files say today."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))

import gen_reference  # noqa: E402

EXTERNAL = re.compile(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=["'](?:https?:)?//""", re.I)


@pytest.mark.parametrize("page", sorted(gen_reference.PAGES))
def test_generated_reference_is_current(page: str) -> None:
    committed = (gen_reference.REFERENCE / page).read_text()
    assert committed == gen_reference.PAGES[page](), (
        f"run python docs/gen_reference.py to refresh docs/reference/{page}"
    )


def test_the_generated_pages_name_every_metric_alert_and_subcommand() -> None:
    metrics = gen_reference.metrics_page()
    assert all(f"`{family.name}`" in metrics for family in gen_reference._families())
    alerts = gen_reference.alerts_page()
    assert "MfumonTrainingMFULow" in alerts and "MfumonNodeDrain" in alerts
    cli = gen_reference.cli_page()
    assert all(f"## `mfumon {name}`" in cli for name in gen_reference.SUBCOMMANDS)
    assert "`--token-file`" in cli


@pytest.mark.slow
def test_the_site_builds_strict_and_loads_nothing_from_outside(tmp_path: Path) -> None:
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs is not None, "mkdocs comes with the dev extra"
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(site)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    pages = list(site.rglob("*.html"))
    assert len(pages) > 30
    outside = [f"{p.relative_to(site)}: {m.group(0)}" for p in pages for m in EXTERNAL.finditer(p.read_text())]
    assert outside == []
    assert (site / "reference" / "metrics" / "index.html").exists()
    assert not list(site.rglob("__pycache__"))  # docs/ holds gen_reference.py, whose import leaves one (exclude_docs)
