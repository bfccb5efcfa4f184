"""The demo's software history (issue 59) against a real aggregator: the comparison finds the NCCL regression and
calls the driver upgrade harmless, and the runs are ended (no series of theirs stays on /metrics)."""

from __future__ import annotations

import httpx
import pytest

from mfumon.exporter.demo.history import history_runs, seed_history
from tests.conftest import LiveServer
from tests.utils.factories import scrape


def test_the_history_gives_the_comparison_its_regression_and_its_harmless_change(live_server: LiveServer) -> None:
    with httpx.Client(base_url=live_server.url, timeout=10.0) as client:
        assert seed_history(client) == len(history_runs()) == 12
        changes = {c["component"]: c for c in client.get("/v1/regressions", params={"since": "1h"}).json()["changes"]}
        assert changes["nccl"]["verdict"] == "regression" and not changes["nccl"]["confounded"]
        assert changes["nccl"]["relative_change"] == pytest.approx(-0.06, abs=0.005)
        assert changes["nccl"]["mfu_before"]["mean"] == pytest.approx(0.40, abs=0.01)
        assert changes["driver"]["verdict"] == "no_change"
        assert {j["status"] for j in client.get("/v1/jobs", params={"limit": 100}).json()["data"]} == {"ended"}
        assert 'job_id="nightly-7b-0"' not in scrape(client)
