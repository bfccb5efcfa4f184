"""The per-rank NCCL Inspector families (issue 61) stay bounded and name what they mean: at most three ranks per
job, group and collective (only those their peers wait for), one series per (node, rank) whatever number of
communicators share it, per pair of nodes its weakest GPU pair, and nothing for a job not on show."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from mfumon.api.metrics.collective import RANKS_EXPORTED, render_collectives
from mfumon.api.state.views import CollectiveRankView, NodeView
from tests.utils.factories import inspector_node

MIB = 2**20


def node(name: str, *rows: CollectiveRankView) -> NodeView:
    return inspector_node(name, collective_ranks=rows)


def coll(comm: str, rank: int, seconds: float, job: str = "llm") -> CollectiveRankView:
    return CollectiveRankView(job, "dp", comm, "AllReduce", rank, 8, None, 10, seconds, 1e10, 1.75e10, 10.0)


def p2p(comm: str, rank: int, peer: int, op: str, seconds: float) -> CollectiveRankView:
    size = 64 * MIB * 10
    return CollectiveRankView("llm", "pp", comm, op, rank, 8, peer, 10, seconds, size, size, 10.0)


def series(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def test_ranks_their_peers_wait_for_are_bounded_and_one_series_per_node_and_rank() -> None:
    # Eight ranks of one communicator, four of them faster than the median (waited for); a second communicator
    # whose rank 7 also sits on n1 and is late too: one series for (n1, 7), its larger lag.
    first = [coll("0xa", r, 0.01 * (r + 1)) for r in range(8)]
    second = [coll("0xb", r, 0.5 if r == 7 else 0.8) for r in range(4, 8)]
    text = render_collectives([node("n1", *first, *second)], {"llm"})
    lags = series(text, "mfumon_job_collective_rank_lag_seconds")
    assert len(lags) == RANKS_EXPORTED
    by_rank = {dict(labels)["rank"]: value for labels, value in lags.items()}
    assert set(by_rank) == {"0", "1", "7"}  # rank 0 and 1 of 0xa lag most; (n1, 7) once, from 0xb
    assert by_rank["0"] > by_rank["1"] > 0 and by_rank["7"] > 0
    assert all(dict(labels).keys() == {"job_id", "group", "collective", "node", "rank"} for labels in lags)
    assert "job" not in {key for labels in lags for key, _ in labels}
    # A job not on show renders nothing.
    assert series(render_collectives([node("n1", *first)], {"other"}), "mfumon_job_collective_rank_lag_seconds") == {}


def test_a_node_pair_shows_its_weakest_gpu_pair_and_a_ratio_only_when_judged() -> None:
    # Two pipeline pairs inside n1: one at 20 GB/s, one at 400 GB/s; NVLink 450 GB/s one way.
    slow, fast = 64 * MIB * 10 / 20e9, 64 * MIB * 10 / 400e9
    rows = (
        p2p("0xc", 0, 1, "Send", slow),
        p2p("0xc", 1, 0, "Recv", slow),
        p2p("0xd", 0, 1, "Send", fast),
        p2p("0xd", 1, 0, "Recv", fast),
    )
    text = render_collectives([node("n1", *rows)], {"llm"}, lambda _node: 450e9)
    (bandwidth,) = series(text, "mfumon_job_link_bus_bandwidth_bytes_per_second").values()
    (ratio,) = series(text, "mfumon_job_link_expected_ratio").values()
    assert abs(bandwidth - 20e9) < 1e3 and abs(ratio - 20e9 / 450e9) < 1e-9
    # Unknown NVLink figure: the bandwidth is still a measurement, the ratio is not sent.
    text = render_collectives([node("n1", *rows)], {"llm"})
    assert len(series(text, "mfumon_job_link_bus_bandwidth_bytes_per_second")) == 1
    assert series(text, "mfumon_job_link_expected_ratio") == {}
