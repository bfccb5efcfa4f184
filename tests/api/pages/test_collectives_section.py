"""The job page's NCCL Inspector section (issue 61): each group and collective summed over the job's nodes, the
group's bus bandwidth and time share, lost records; a plain line saying how to get it when there is none."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.api.collectives.test_collectives_api import push, row
from tests.utils.factories import report


def _section(page: str) -> str:
    return page[page.index("<h2>Collectives (NCCL Inspector)</h2>") : page.index("<h2>Software</h2>")]


def test_the_groups_of_a_job_summed_over_its_nodes(client: TestClient) -> None:
    client.app.state.ctx.clock = lambda: 1.8e9  # type: ignore[attr-defined]
    assert client.post("/v1/jobs/llm/reports", json=report(num_gpus=8)).is_success
    assert "no NCCL Inspector data" in _section(client.get("/ui/jobs/llm").text)
    assert push(client, "n1", [row(), row(group="tp", collective="AllGather", operations_total=5000)]).is_success
    assert push(client, "n2", [row(operations_total=120, window_bus_bytes=1e11)]).is_success
    section = _section(client.get("/ui/jobs/llm").text)
    rows = re.findall(r"<tr><td><code>(\w+)</code></td><td>(\w+)</td><td class=\"num\">([\d,]+)</td>", section)
    assert rows == [("dp", "AllReduce", "220"), ("tp", "AllGather", "5,000")]
    assert "45.0 GB/s" in section  # (8e10 + 1e11) bytes over 4 GPU-timed seconds, the dp group's
    # 4 GPU-timed seconds of dp over 2 nodes x 4 ranks x 10 s: 5 % of its ranks' time, on every dp row.
    assert '<span class="ratio" title="0.0500">5.0 %</span>' in section
