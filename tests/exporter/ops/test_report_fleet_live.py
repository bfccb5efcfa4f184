"""``mfumon report --clusters FILE`` and repeated ``--url`` against two running aggregators (one requiring a read
token, given per cluster in the file) and a URL where nothing listens."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from mfumon.exporter.ops import cli
from tests.conftest import reserved_port, start_server
from tests.utils.factories import report

TOKEN = "fleet-test-token-4f9c2a7e"


def _push(url: str, job_id: str, headers: dict[str, str] | None = None) -> None:
    body = report(team="nlp", pool="train", interval_seconds=30, tokens=600_000)
    del body["tokens_per_second"]
    response = httpx.post(f"{url}/v1/jobs/{job_id}/reports", json=body, headers=headers or {})
    assert response.status_code == 200, response.text


def test_fleet_report_over_two_live_clusters_and_a_dead_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secured = {"MFUMON_INGEST_TOKENS": TOKEN, "MFUMON_READ_REQUIRES_TOKEN": "true"}
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    with (
        start_server(tmp_path / "a") as a,
        start_server(tmp_path / "b", env=secured) as b,
        reserved_port() as port,
    ):
        _push(a.url, "job-in-a")
        _push(b.url, "job-in-b", {"Authorization": f"Bearer {TOKEN}"})
        (tmp_path / "b.token").write_text(TOKEN + "\n")
        clusters = tmp_path / "clusters.yaml"
        clusters.write_text(
            "clusters:\n"
            f"  - {{name: alpha, url: '{a.url}'}}\n"
            f"  - {{name: beta, url: '{b.url}', token_file: b.token}}\n"
            f"  - {{name: gamma, url: 'http://127.0.0.1:{port}'}}\n"
        )
        assert cli.main(["--clusters", str(clusters), "--since", "24h", "--timeout", "5"]) == 0
        captured = capsys.readouterr()
        assert "cluster gamma did not answer" in captured.err
        out = captured.out
        assert out.startswith("# Fleet GPU-hours report: ") and "2 of 3 clusters answered" in out
        assert "**Not answering: gamma**" in out
        assert "| alpha | " in out and "| beta | " in out and "| **fleet** | " in out
        assert "## Cluster alpha" in out and "## Cluster beta" in out

        # Without its token, beta refuses: named too, and the report still comes out for alpha.
        assert cli.main(["--url", f"alpha={a.url}", "--url", f"beta={b.url}", "--since", "24h"]) == 0
        captured = capsys.readouterr()
        assert "cluster beta did not answer" in captured.err and "'read' scope" in captured.err
        assert "1 of 2 clusters answered" in captured.out and "**Not answering: beta**" in captured.out

        # Nobody answering is a failure; two clusters with one name are refused before anything is read.
        assert cli.main(["--url", f"http://127.0.0.1:{port}", "--url", f"x=http://127.0.0.1:{port}"]) == 1
        assert cli.main(["--url", f"a={a.url}", "--url", f"a={b.url}"]) == 2
