"""InfiniBand and RoCE ports from sysfs: ``/sys/class/infiniband/<device>/ports/<port>/``.

What is read, per port (the kernel's ABI, Documentation/ABI/stable/sysfs-class-infiniband):

- ``state`` (``"4: ACTIVE"``), ``phys_state`` (``"5: LinkUp"``), ``link_layer`` (``InfiniBand``, or ``Ethernet`` for
  RoCE) and ``rate`` (``"400 Gb/sec (4X NDR)"``: Gb/s of the active width x speed, sent as bytes/s).
- ``counters/``: ``link_downed``, ``symbol_error``, ``port_rcv_errors``, ``link_error_recovery``,
  ``port_xmit_discards`` and the data counters ``port_xmit_data``/``port_rcv_data``, which count **4-byte words**
  (octets divided by 4): sent as bytes. Since Linux 4.5 these files hold the 64-bit PortCountersExtended values
  where the HCA supports them; older kernels (and Mellanox OFED on mlx4) put the 64-bit data counters in
  ``counters_ext/port_xmit_data_64`` and ``port_rcv_data_64``, which are preferred when present: the 32-bit PMA
  counters stop at 2**32 - 1, a few seconds of traffic at 400 Gb/s.

A file that is absent, unreadable or says ``N/A (no PMA)`` is left out, never sent as zero. The same reading rules
as prometheus/procfs ``sysfs/class_infiniband.go`` (the node_exporter ``infiniband`` collector).
"""

from __future__ import annotations

import fnmatch
import logging
import re
from collections.abc import Sequence
from pathlib import Path

from mfumon.exporter.samples import IbPortSample

__all__ = ["DEFAULT_ROOT", "InfinibandReader", "parse_rate", "parse_state"]

logger = logging.getLogger(__name__)

DEFAULT_ROOT = Path("/sys/class/infiniband")
_WORD = 4  # port_xmit_data / port_rcv_data count octets divided by 4
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")
#: counter file -> sample field
_COUNTERS: dict[str, str] = {
    "link_downed": "link_downed_total",
    "symbol_error": "symbol_errors_total",
    "port_rcv_errors": "receive_errors_total",
    "link_error_recovery": "link_error_recovery_total",
    "port_xmit_discards": "transmit_discards_total",
}
#: data field -> (64-bit file under counters_ext/, file under counters/)
_DATA: dict[str, tuple[str, str]] = {
    "transmit_bytes_total": ("port_xmit_data_64", "port_xmit_data"),
    "receive_bytes_total": ("port_rcv_data_64", "port_rcv_data"),
}


def parse_state(text: str) -> str | None:
    """``"4: ACTIVE"`` -> ``"ACTIVE"``; ``None`` for anything else."""
    _, sep, name = text.partition(":")
    name = name.strip()
    return name if sep and name else None


def parse_rate(text: str) -> float | None:
    """``"100 Gb/sec (4X EDR)"`` -> 12.5e9 bytes/s; ``None`` when unreadable."""
    match = _RATE.match(text)
    return float(match.group(1)) * 1e9 / 8 if match else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _count(path: Path) -> int | None:
    text = _read(path)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:  # "N/A (no PMA)" on ports without a performance-management agent
        return None


class InfinibandReader:
    """Reads every port of every RDMA device under ``root`` once per :meth:`collect`.

    Args:
        root: the ``/sys/class/infiniband`` directory (a container may mount the host's elsewhere).
        include: shell patterns matched against ``"<device>:<port>"``; a port matching none is not read. Exclude
            ports that are not cabled, or ``ib_ports_active`` fails for them.
    """

    name = "infiniband"

    def __init__(self, root: Path = DEFAULT_ROOT, include: Sequence[str] = ("*",)) -> None:
        self.root = Path(root)
        self.include = tuple(include) or ("*",)

    def available(self) -> bool:
        """Whether this host has RDMA devices at all (no directory: no ``ib_ports`` in the samples)."""
        return self.root.is_dir()

    def collect(self) -> list[IbPortSample]:
        """One sample per included port, sorted by device and port; empty when there are none."""
        out: list[IbPortSample] = []
        try:
            devices = sorted(p for p in self.root.iterdir() if (p / "ports").is_dir())
        except OSError as exc:
            logger.debug("cannot list %s: %s", self.root, exc)
            return out
        for device in devices:
            try:
                ports = sorted((p for p in (device / "ports").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
            except OSError:
                continue
            for port in ports:
                key = f"{device.name}:{port.name}"
                if any(fnmatch.fnmatchcase(key, pattern) for pattern in self.include):
                    out.append(self._port(device.name, int(port.name), port))
        return out

    @staticmethod
    def _port(device: str, number: int, path: Path) -> IbPortSample:
        values: dict[str, object] = {
            "link_layer": _read(path / "link_layer") or None,
            "state": parse_state(_read(path / "state") or ""),
            "phys_state": parse_state(_read(path / "phys_state") or ""),
            "rate_bytes_per_second": parse_rate(_read(path / "rate") or ""),
        }
        for file, field in _COUNTERS.items():
            values[field] = _count(path / "counters" / file)
        for field, (wide, narrow) in _DATA.items():
            words = _count(path / "counters_ext" / wide)
            if words is None:
                words = _count(path / "counters" / narrow)
            values[field] = None if words is None else words * _WORD
        return IbPortSample(device=device, port=number, **values)  # type: ignore[arg-type]
