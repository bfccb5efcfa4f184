"""A job's software fingerprint (issue 59) through the API: stored, merged, shown, bad ones refused, on both databases
and under concurrent writers."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

SOFTWARE = {"python": "3.11.7", "pytorch": "2.5.1+cu124", "nccl": "2.21.5", "tag.experiment": "lr-sweep"}


def test_the_fingerprint_is_stored_and_components_sent_later_are_added(client: TestClient) -> None:
    assert client.put("/v1/jobs/sw-a", json={"num_gpus": 8, "software": SOFTWARE}).status_code == 200
    assert client.get("/v1/jobs/sw-a").json()["software"] == SOFTWARE
    later = {"driver": "550.54.15", "nccl": "2.23.4"}  # a node agent's driver; a newer NCCL after a restart
    assert client.put("/v1/jobs/sw-a", json={"software": later}).status_code == 200
    assert client.put("/v1/jobs/sw-a", json={"name": "no software this time"}).status_code == 200
    assert client.get("/v1/jobs/sw-a").json()["software"] == {**SOFTWARE, **later}


@pytest.mark.parametrize(
    "software",
    [
        {"bad key": "1"},  # a key with a space
        {"": "1"},
        {"nccl": ""},
        {"nccl": "v" * 257},
        {f"k{i}": "1" for i in range(65)},  # more than 64 components
        {"nccl": 2.21},  # a number, not a version string
        ["nccl", "2.21.5"],
    ],
)
def test_a_bad_fingerprint_is_refused_and_changes_nothing(client: TestClient, software: Any) -> None:
    assert client.put("/v1/jobs/sw-b", json={"software": SOFTWARE}).status_code == 200
    response = client.put("/v1/jobs/sw-b", json={"software": software, "name": "changed"})
    assert response.status_code == 422, response.text
    job = client.get("/v1/jobs/sw-b").json()
    assert job["software"] == SOFTWARE and job["name"] is None


def test_concurrent_writers_each_add_their_component(client: TestClient) -> None:
    def put(i: int) -> int:
        return client.put("/v1/jobs/sw-race", json={"software": {f"component{i}": f"{i}.0"}}).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(put, range(16))) == [200] * 16
    assert client.get("/v1/jobs/sw-race").json()["software"] == {f"component{i}": f"{i}.0" for i in range(16)}
