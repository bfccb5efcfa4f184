"""The software comparison on ``/metrics`` (issue 59): one series set per called change, labelled with the component
and both versions; a change that did nothing is not a series."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from mfumon.api.services.regressions import refresh_regressions
from tests.api.routes.test_regressions_api import upgrade_fleet
from tests.utils.factories import metric_value, scrape

SIGNATURE_LABELS = {"component": "nccl", "from_version": "2.21.5", "to_version": "2.23.4", "verdict": "regression"}


def test_a_regression_is_a_series_with_its_versions_and_a_harmless_change_is_not(client: TestClient) -> None:
    upgrade_fleet(client)
    text = scrape(client)
    assert "# TYPE mfumon_regression_mfu_after_ratio gauge" in text
    assert "mfumon_regression_mfu_after_ratio{" not in text  # computed every REGRESSIONS_INTERVAL_SECONDS
    refresh_regressions(client.app.state.ctx)  # type: ignore[attr-defined]
    text = scrape(client)
    (signature,) = {
        line.split('signature="')[1].split('"')[0] for line in text.splitlines() if "regression_jobs{" in line
    }
    labels = {"signature": signature, **SIGNATURE_LABELS}
    before = metric_value(text, "mfumon_regression_mfu_before_ratio", **labels)
    after = metric_value(text, "mfumon_regression_mfu_after_ratio", **labels)
    assert before is not None and after is not None and after / before == pytest.approx(0.94, abs=0.003)
    change = metric_value(text, "mfumon_regression_mfu_change_ratio", **labels)
    assert change == pytest.approx(after / before)  # the interface's one-number view, the alert's value
    assert metric_value(text, "mfumon_regression_jobs", **labels) == 8  # every job on the new NCCL
    assert metric_value(text, "mfumon_regression_confounded", **labels) == 0
    assert metric_value(text, "mfumon_regression_confidence_ratio", **labels) > 0.99
    assert metric_value(text, "mfumon_regression_gpu_seconds", **labels) > 0
    assert 'component="driver"' not in text  # no change beyond the noise: GET /v1/regressions only
