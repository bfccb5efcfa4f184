"""InfiniBand/RoCE ports read from a sysfs tree laid out as the kernel lays it out (fixtures/sysfs/README.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mfumon.exporter.node.sources.infiniband import InfinibandReader, parse_rate, parse_state

TREE = Path(__file__).parent / "fixtures" / "sysfs" / "class" / "infiniband"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A writable copy of the recorded tree."""
    return Path(shutil.copytree(TREE, tmp_path / "infiniband"))


def test_every_port_of_the_recorded_tree_in_bytes() -> None:
    ports = InfinibandReader(TREE).collect()
    assert [(p.device, p.port) for p in ports] == [("hfi1_0", 1), ("mlx4_0", 1), ("mlx4_0", 2), ("mlx5_0", 1)]
    mlx5 = ports[3]
    assert (mlx5.link_layer, mlx5.state, mlx5.phys_state) == ("InfiniBand", "ACTIVE", "ACTIVE")
    assert mlx5.rate_bytes_per_second == 25e9 / 8
    # port_xmit_data / port_rcv_data count 4-byte words.
    assert mlx5.transmit_bytes_total == 2880761508848 * 4
    assert mlx5.receive_bytes_total == 18126345378 * 4
    assert (mlx5.link_downed_total, mlx5.symbol_errors_total, mlx5.receive_errors_total) == (0, 0, 0)
    assert (mlx5.link_error_recovery_total, mlx5.transmit_discards_total) == (0, 0)
    mlx4 = ports[2]
    assert mlx4.link_layer == "InfiniBand"  # the file's trailing blank line is not part of it
    assert mlx4.rate_bytes_per_second == 40e9 / 8 and mlx4.transmit_bytes_total == 26540356890 * 4
    hfi = ports[0]
    assert (hfi.state, hfi.phys_state, hfi.rate_bytes_per_second) == ("ACTIVE", "LinkUp", 100e9 / 8)
    assert hfi.receive_bytes_total == 345091702026 * 4


def test_64_bit_extended_counters_are_preferred_where_present(tree: Path) -> None:
    """Kernels before 4.5 put the 64-bit data counters in counters_ext/ beside the 32-bit PMA ones."""
    port = tree / "mlx4_0" / "ports" / "1"
    (port / "counters" / "port_xmit_data").write_text(f"{2**32 - 1}\n")  # saturated 32-bit counter
    (port / "counters_ext").mkdir()
    (port / "counters_ext" / "port_xmit_data_64").write_text("26509113295123\n")
    (port / "counters_ext" / "port_rcv_data_64").write_text("N/A (no PMA)\n")  # unreadable: fall back
    sample = next(p for p in InfinibandReader(tree).collect() if (p.device, p.port) == ("mlx4_0", 1))
    assert sample.transmit_bytes_total == 26509113295123 * 4
    assert sample.receive_bytes_total == 2221223609 * 4


def test_a_down_port_and_unreadable_counters_are_reported_as_such(tree: Path) -> None:
    port = tree / "mlx5_0" / "ports" / "1"
    (port / "state").write_text("1: DOWN\n")
    (port / "phys_state").write_text("2: Polling\n")
    (port / "link_layer").write_text("Ethernet\n")  # a RoCE port
    (port / "counters" / "symbol_error").write_text("N/A (no PMA)\n")
    (port / "counters" / "link_downed").unlink()
    (port / "rate").write_text("garbage\n")
    sample = next(p for p in InfinibandReader(tree).collect() if p.device == "mlx5_0")
    assert (sample.state, sample.phys_state, sample.link_layer) == ("DOWN", "Polling", "Ethernet")
    body = sample.to_json()
    for absent in ("symbol_errors_total", "link_downed_total", "rate_bytes_per_second"):
        assert absent not in body  # left out, never 0
    assert body["receive_errors_total"] == 0


def test_ports_can_be_selected_and_a_host_without_rdma_reads_none(tmp_path: Path) -> None:
    assert [(p.device, p.port) for p in InfinibandReader(TREE, include=("mlx*:1",)).collect()] == [
        ("mlx4_0", 1),
        ("mlx5_0", 1),
    ]
    missing = InfinibandReader(tmp_path / "nope")
    assert not missing.available() and missing.collect() == []
    assert InfinibandReader(TREE).available()


@pytest.mark.parametrize(
    ("text", "rate"),
    [("400 Gb/sec (4X NDR)", 50e9), ("2.5 Gb/sec (1X SDR)", 0.3125e9), ("10 Gb/sec (4X)", 1.25e9), ("", None)],
)
def test_rate_text(text: str, rate: float | None) -> None:
    assert parse_rate(text) == rate


def test_state_text() -> None:
    assert parse_state("4: ACTIVE") == "ACTIVE"
    assert parse_state("5: LinkUp\n") == "LinkUp"
    assert parse_state("ACTIVE") is None
