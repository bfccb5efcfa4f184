"""The job page's NCCL Inspector section (issue 61): each group and collective summed over the job's nodes, the
group's bus bandwidth and time share, lost records; a plain line saying how to get it when there is none. Per rank:
the ranks their peers wait for, and the point-to-point links against what the fabric carries."""

from __future__ import annotations

import re
from typing import Any

from fastapi.testclient import TestClient

from tests.api.collectives.test_collectives_api import push, row
from tests.utils.factories import gpu, ib_port, report

MIB = 2**20


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


def rank_row(comm_id: str, rank: int, seconds: float, *, group: str = "dp", **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "job_id": "llm",
        "group": group,
        "comm_id": comm_id,
        "collective": "AllReduce",
        "rank": rank,
        "n_ranks": 6,
        "operations": 100,
        "seconds": seconds,
        "traffic_bytes": 100 * 64 * MIB,
        "bus_bytes": 100 * 64 * MIB,
        "interval_seconds": 10.0,
    }
    body.update(fields)
    return body


def push_ranks(client: TestClient, node: str, ranks: list[dict[str, Any]]) -> Any:
    body = {
        "timestamp": 1.8e9,
        "gpus": [gpu(i, uuid=f"GPU-{node}-{i}", job_id="llm") for i in range(4)],
        "ib_ports": [ib_port(rate_bytes_per_second=50e9)],
        "collectives": [row()],
        "collective_ranks": ranks,
    }
    return client.post(f"/v1/nodes/{node}/samples", json=body)


def test_the_ranks_their_peers_wait_for_and_the_links_from_pushed_ranks(client: TestClient) -> None:
    client.app.state.ctx.clock = lambda: 1.8e9  # type: ignore[attr-defined]
    assert client.post("/v1/jobs/llm/reports", json=report(num_gpus=12)).is_success
    assert push(client, "n1", [row()]).is_success  # per-node figures only: neither table
    section = _section(client.get("/ui/jobs/llm").text)
    assert "Ranks their peers wait for" not in section and "<h3>Links</h3>" not in section
    # dp: six ranks over three nodes, rank 3 on n2 arrives late (2 ms a kernel against the others' ~10 ms).
    # pp: rank 0 on n1 sends to rank 1 on n2 at 1.7 GB/s, against 50 GB/s ports over 4 GPUs each.
    # tp: two GPUs of n1 at 168 GB/s, against NVLink's 450 GB/s one way on an H100 SXM board.
    n1 = [
        rank_row("0xd0", 0, 1.0),
        rank_row("0xd0", 1, 1.1),
        rank_row("0xa0", 0, 4.0, group="pp", collective="Send", peer=1, n_ranks=2),
        rank_row("0xb0", 0, 0.04, group="tp", collective="Send", peer=1, n_ranks=2),
        rank_row("0xb0", 1, 0.04, group="tp", collective="Recv", peer=0, n_ranks=2),
    ]
    n2 = [
        rank_row("0xd0", 2, 0.9),
        rank_row("0xd0", 3, 0.2),
        rank_row("0xa0", 1, 4.0, group="pp", collective="Recv", peer=0, n_ranks=2),
    ]
    n3 = [rank_row("0xd0", 4, 1.0), rank_row("0xd0", 5, 0.95)]
    for node, ranks in (("n1", n1), ("n2", n2), ("n3", n3)):
        assert push_ranks(client, node, ranks).is_success
    page = client.get("/ui/jobs/llm").text
    section = _section(page)
    waited = section[section.index('<table id="waited">') : section.index("</table>", section.index('id="waited"'))]
    cells = re.findall(r"<tr><td>(n\d)</td><td class=\"num\">(\d+)</td><td><code>(\w+)</code></td>", waited)
    # The late rank first, then the others below the median; ranks above it wait themselves and are not listed.
    assert cells == [("n2", "3", "dp"), ("n2", "2", "dp"), ("n3", "5", "dp")]
    assert '<span class="latency" title="0.002 s">2 ms</span>' in waited  # 0.2 s over 100 operations
    assert "9.75 ms</span> <small>over 6 ranks</small>" in waited and "79.5 %" in waited
    assert "shows the shortest kernel time" in section
    links = section[section.index('<table id="links">') :]
    pairs = re.findall(
        r"<td>(n\d) <small>rank (\d)</small> ↔ (n\d) <small>rank (\d)</small></td><td>([\w ()]+)</td>", links
    )
    assert pairs == [("n1", "0", "n2", "1", "across nodes"), ("n1", "0", "n1", "1", "within node (NVLink)")]
    assert "12.5 GB/s" in links and "450.0 GB/s" in links and "64.0 MiB" in links
    assert '<span class="ratio" title="0.1342">13.4 %</span>' in links
    # The diagnosis names both, with their titles and runbooks.
    assert 'id="finding-slow_rank"' in page and "A rank its peers wait for" in page
    assert 'id="finding-slow_link"' in page and "A link below what the fabric carries" in page
    # The tables sort like the page's others.
    by_rank = _section(client.get("/ui/jobs/llm?sort=waited.rank&dir=asc").text)
    ranks = re.findall(r"<tr><td>(n\d)</td><td class=\"num\">(\d+)</td>", by_rank)
    assert ranks == [("n2", "2"), ("n2", "3"), ("n3", "5")]
