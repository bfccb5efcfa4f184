"""NCCL's bandwidth definitions on the numbers its READMEs print (SUMMARY §4; nccl-tests doc/PERFORMANCE.md)."""

from __future__ import annotations

import pytest

from mfumon.exporter.node.nccl_inspector.bandwidth import (
    algbw_gbs,
    bus_factor,
    busbw_agrees,
    busbw_gbs,
    traffic_bytes,
)
from mfumon.exporter.node.nccl_inspector.jsonl import parse_line
from mfumon.exporter.node.nccl_inspector.records import CollRecord
from tests.exporter.node.nccl_inspector.lines import fixture_lines, render


def _record(line: str) -> CollRecord:
    parsed = parse_line(line)
    assert isinstance(parsed, CollRecord)
    return parsed


@pytest.mark.parametrize(
    ("op", "size", "n", "us", "algbw", "busbw"),
    [
        ("AllReduce", 17179869184, 8, 61974, 277.210914, 485.119099),  # README example
        ("ReduceScatter", 2147483648, 8, 41057, 418.439467, 366.134533),  # README verbose: per-rank size x n
        ("ReduceScatter", 65536, 32, 110, 19.065018, 18.469236),  # exporter README
        ("AllReduce", 2360832, 3, 5663, 0.416887, 0.555850),  # the datadog-agent line
    ],
)
def test_the_readme_numbers(op: str, size: int, n: int, us: int, algbw: float, busbw: float) -> None:
    """Printed with %lf: six decimals."""
    assert algbw_gbs(op, size, us, n) == pytest.approx(algbw, abs=5e-7)
    assert busbw_gbs(op, size, us, n) == pytest.approx(busbw, abs=5e-7)


def test_traffic_and_factors_per_op() -> None:
    assert [traffic_bytes(op, 100, 4) for op in ("AllReduce", "AllGather", "ReduceScatter", "AllGatherV")] == [
        100,
        400,
        400,
        400,
    ]
    assert [traffic_bytes(op, 100, 4) for op in ("Broadcast", "Reduce")] == [100, 100]
    assert traffic_bytes("Send", 100, 4, "p2p") == traffic_bytes("Recv", 100, 4, "p2p") == 100
    assert bus_factor("AllReduce", 8) == pytest.approx(1.75)
    assert bus_factor("AllGather", 8) == bus_factor("ReduceScatter", 8) == pytest.approx(0.875)
    assert bus_factor("Broadcast", 8) == bus_factor("Reduce", 8) == bus_factor("SendRecv", 8, "p2p") == 1.0
    assert bus_factor("AllReduce", 1) == 0.0  # one rank moves nothing over the bus
    for op in ("Invalid", "All2All", "AlltoAll"):  # NCCL defines none: it writes 0, we say unknown
        assert traffic_bytes(op, 100, 4) is None and bus_factor(op, 4) is None and busbw_gbs(op, 100, 10, 4) is None
    assert algbw_gbs("AllReduce", 100, 0, 4) == 0.0  # NCCL writes 0 for a zero time


@pytest.mark.parametrize(
    "name",
    [
        "readme-2.28-example.jsonl",
        "readme-2.28-verbose.jsonl",
        "exporter-readme-2.28.jsonl",
        "rendered-2.28.jsonl",
        "datadog-agent-2.28.jsonl",
        "constructed-2.30.jsonl",
        "constructed-2.30-uint8.jsonl",
    ],
)
def test_every_fixture_line_agrees_with_its_own_bus_bandwidth(name: str) -> None:
    for line in fixture_lines(name):
        assert busbw_agrees(_record(line)) is True


def test_a_bus_bandwidth_that_is_not_the_definition_is_caught() -> None:
    (line,) = fixture_lines("rendered-2.28.jsonl")
    assert busbw_agrees(_record(line.replace("485.119099", "277.210914"))) is False  # algbw written as busbw
    assert busbw_agrees(_record(render(op="Invalid"))) is True  # NCCL writes 0 for what it does not define
    nan = render().replace('"coll_busbw_gbs":', '"coll_busbw_gbs":"nan","x":')
    assert busbw_agrees(_record(nan)) is None
