"""Slurm partitions as pools: ``sinfo --json`` into each partition's nodes, overlapping partitions included.

Every node record of ``sinfo --json`` names all its partitions (``partitions``, a list of names, the same from 22.05's
openapi v0.0.38 to 24.11's data_parser v0.0.42; hidden partitions are listed too), so a node in a ``train`` and an
``infer`` partition is a member of both pools. A partition without nodes is no pool (sinfo lists no node for it):
its jobs still count as queued in the pool their partition names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mfumon.exporter.scheduler.model import Pool

__all__ = ["SINFO", "parse_partitions"]

SINFO: tuple[str, ...] = ("sinfo", "--json")


def parse_partitions(document: Mapping[str, Any]) -> list[Pool]:
    """The partitions of ``sinfo --json`` output with their nodes, by partition name."""
    members: dict[str, set[str]] = {}
    for record in document.get("nodes") or []:
        if not isinstance(record, Mapping):
            continue
        name = str(record.get("name") or "").strip()
        if not name:
            continue
        for partition in record.get("partitions") or ():
            if isinstance(partition, str) and partition.strip():
                members.setdefault(partition.strip(), set()).add(name)
    return [Pool(name=p, nodes=tuple(sorted(nodes))) for p, nodes in sorted(members.items())]
