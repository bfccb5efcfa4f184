"""Each GPU view knows where its hardware estimate came from, and a job's account carries the source of its mean
(issue 53): ``cycle_counters`` when the exporter flags ``tensor_active`` as exact cycle-counter differences,
``ratio_clock`` otherwise, ``mixed`` for a job whose GPUs differ; None wherever there is no estimate."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from mfumon.api.state.aggregate import summarize
from mfumon.api.state.store import Snapshot
from mfumon.api.state.views import NodeView
from tests.utils.factories import gpu, node_sample, node_view, report

EXACT = {"tensor_active_exact": 1}
CLOCKS = {"sm_clock_hz": 1.5e9, "max_sm_clock_hz": 2e9}


def _sample(*gpus: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": 1.8e9, "pool": "train", "gpus": list(gpus)}


def _sources(view: NodeView) -> list[str | None]:
    return [g.hardware_estimate_source for g in view.gpus]


def test_a_gpu_view_names_the_source_of_its_estimate() -> None:
    view = node_view(
        _sample(
            gpu(0, **EXACT, **CLOCKS),  # exact tensor activity: the estimate still has the clock factor
            gpu(1, tensor_active_exact=0, **CLOCKS),
            gpu(2, **CLOCKS),  # an exporter that knows nothing of the flag
            gpu(3, tensor_active=None, **EXACT),  # the flag without tensor activity: no estimate, no source
            {**gpu(4, **EXACT), "up": False},
        )
    )
    assert _sources(view) == ["cycle_counters", "ratio_clock", "ratio_clock", None, None]
    assert [g.hardware_mfu for g in view.gpus] == [pytest.approx(0.45 * 0.75)] * 3 + [None, None]


def _summary(*views: NodeView) -> dict[str, Any]:
    accounts = summarize(Snapshot(now=1.8e9, nodes=views, jobs=(), baselines={})).jobs
    return {job: (a.hardware_mfu, a.hardware_estimate_source) for job, a in accounts.items()}


def test_a_job_has_one_source_when_all_its_gpus_share_it_and_mixed_otherwise() -> None:
    n1 = node_view(
        _sample(
            gpu(0, job_id="exact", **EXACT, tensor_active=0.5),
            gpu(1, job_id="exact", **EXACT, tensor_active=0.3),
            gpu(2, job_id="ratio", tensor_active=0.2),
            gpu(3, job_id="mixed", **EXACT, tensor_active=0.6),
            gpu(4, job_id="blind", tensor_active=None),  # no tensor counter: no estimate, no source
        ),
        "n1",
    )
    n2 = node_view(_sample(gpu(0, job_id="mixed", tensor_active=0.2), gpu(1, job_id="ratio", tensor_active=0.4)), "n2")
    assert n1.shares["exact"].estimated_exact == 2 and n1.shares["ratio"].estimated_exact == 0
    assert _summary(n1, n2) == {
        "exact": (pytest.approx(0.4), "cycle_counters"),
        "ratio": (pytest.approx(0.3), "ratio_clock"),
        "mixed": (pytest.approx(0.4), "mixed"),  # across nodes: one GPU exact on n1, one sampled on n2
        "blind": (None, None),
    }


def test_a_shared_gpu_counts_in_the_source_of_each_of_its_jobs() -> None:
    shares = [
        {"job_id": "a", "share": 0.75, "method": "accounting"},
        {"job_id": "b", "share": 0.25, "method": "accounting"},
    ]
    view = node_view(
        _sample(gpu(0, job_id="a", shares=shares, **EXACT), gpu(1, job_id="a"), gpu(2, job_id="b", **EXACT))
    )
    assert (view.shares["a"].estimated, view.shares["a"].estimated_exact) == (2, 1)
    assert (view.shares["b"].estimated, view.shares["b"].estimated_exact) == (2, 2)
    sources = {job: source for job, (_, source) in _summary(view).items()}
    assert sources == {"a": "mixed", "b": "cycle_counters"}


def test_the_gpu_and_job_json_carry_the_source(client: TestClient) -> None:
    def push(exact: int | None) -> None:
        flag: dict[str, Any] = {} if exact is None else {"tensor_active_exact": exact}
        assert client.post("/v1/nodes/n1/samples", json=node_sample(2, job_id="j", **flag)).status_code == 200

    assert client.post("/v1/jobs/j/reports", json=report(num_gpus=2)).status_code == 200
    for exact, source in ((1, "cycle_counters"), (None, "ratio_clock"), (1, "cycle_counters"), (0, "ratio_clock")):
        push(exact)
        gpus = client.get("/v1/nodes").json()["data"][0]["gpus"]
        assert [(g["hardware_mfu"], g["hardware_estimate_source"]) for g in gpus] == [(0.45, source)] * 2
        job = client.get("/v1/jobs/j").json()
        assert (job["hardware_mfu"], job["hardware_estimate_source"]) == (pytest.approx(0.45), source)

    mixed = node_sample(2, job_id="j")
    mixed["gpus"][0]["tensor_active_exact"] = 1
    assert client.post("/v1/nodes/n1/samples", json=mixed).status_code == 200
    assert client.get("/v1/jobs/j").json()["hardware_estimate_source"] == "mixed"

    blind = node_sample(2, job_id="j", tensor_active=None, tensor_active_exact=1)
    assert client.post("/v1/nodes/n1/samples", json=blind).status_code == 200
    gpus = client.get("/v1/nodes").json()["data"][0]["gpus"]
    assert [(g["hardware_mfu"], g["hardware_estimate_source"]) for g in gpus] == [(None, None)] * 2
    job = client.get("/v1/jobs/j").json()
    assert (job["hardware_mfu"], job["hardware_estimate_source"]) == (None, None)
