"""A job's ranks and links from NCCL Inspector's per-rank figures (issue 61): the rank its peers wait for, and the
links that carry less than the fabric should.

Each node agent pushes, per rank, communicator (``comm_id``, the same on every rank of it on every node) and kind,
the operations NCCL timed on the GPU over its last interval. Lined up across the job's nodes they tell two causes
apart that the per-node sums (:mod:`mfumon.api.state.collectives`) cannot:

* A collective ends on every rank only when the last rank has arrived: each rank's kernel starts when it gets
  there and waits inside for the others. A rank that arrives late (a slow or throttled GPU, a straggling data
  loader, a busy host CPU) finds its peers already waiting, so *its* kernel time per operation is the shortest and
  theirs are long. The rank its peers wait for is the one whose time per operation is far *below* its
  communicator's median (:meth:`JobRanks.waited`).
* A slow link slows the transfers across it, not the waiting: point-to-point operations (Send, Recv, SendRecv,
  which NCCL 2.30 reports with their peer) over it show low bus bandwidth, which we compare with what the fabric
  should carry: NVLink inside a node, the InfiniBand/RoCE ports across nodes (:meth:`JobRanks.links`).

Bandwidth is bus bytes ÷ GPU-timed seconds (NCCL's definition); a mean message size is traffic bytes ÷ operations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from statistics import median
from typing import NamedTuple

from mfumon.api.state.views import CollectiveRankView, NodeView
from mfumon.mfu import PeakTable

#: A median of two ranks cannot say which one is late; three can.
MIN_RANKS = 3
#: A rank's time per operation from fewer operations is one kernel's noise, not its pace.
MIN_OPERATIONS = 3
#: Below this mean message size a transfer is bound by latency (launch, handshakes, protocol), not by the link's
#: bandwidth: such links are never judged against the fabric, however low their bandwidth reads.
MIN_MESSAGE_BYTES = 8 * 2**20


class WaitedRank(NamedTuple):
    """One rank of a communicator, one collective kind, against the communicator's other ranks.

    ``lag_seconds`` > 0: its kernels take less time per operation than the communicator's median, because its
    peers wait for it inside theirs: the larger, the later it arrives. < 0: it is one of those waiting.
    """

    node: str
    group: str
    comm_id: str
    collective: str
    rank: int
    n_ranks: int  # the communicator's size
    ranks_seen: int  # its ranks with enough operations, on the job's nodes that pushed them
    operations: int
    seconds_per_operation: float  # GPU-timed kernel seconds per operation over the agent's last interval
    peers_median_seconds_per_operation: float  # the median over the communicator's ranks seen (itself included)
    lag_seconds: float  # per operation: median - its own
    lag_ratio: float  # lag ÷ median: 0.5 means its peers spend twice its kernel time per operation
    bus_bandwidth: float | None  # bytes/s: bus bytes ÷ seconds; None without bus bytes
    interval_seconds: float  # wall-clock seconds of the agent's interval these figures cover


class LinkFigure(NamedTuple):
    """Point-to-point traffic between two GPUs (two ranks of one communicator), both directions.

    Per pair of GPUs, not per pair of nodes: one degraded NVLink among a node's 28 pairs, or one port among its
    eight rails, would vanish in a node pair's sum; :func:`node_pairs` gives the node-pair view from these. The pair
    is unordered: (``node``, ``rank``) <= (``peer_node``, ``peer_rank``). A Send on A to B and the matching Recv on
    B from A time the same transfers, so they are summed into one row whichever end's agent reported; sums therefore
    count a transfer once per end that reported it, which leaves the ratios (bandwidth, mean message) unchanged.
    """

    group: str
    node: str
    peer_node: str
    within_node: bool  # both ranks on one node: NVLink (or PCIe), not the network
    operations: int
    seconds: float  # GPU-timed kernel seconds
    traffic_bytes: float
    bus_bytes: float
    bus_bandwidth: float | None  # bytes/s: bus bytes ÷ seconds
    mean_message_bytes: float | None  # traffic bytes ÷ operations
    expected: float | None  # bytes/s one GPU should get over this link (NVLink or ports per GPU); None: unknown
    expected_ratio: float | None  # bus bandwidth ÷ expected
    time_ratio: float | None  # its seconds ÷ the reporting ranks' interval seconds: their time in these transfers
    comm_id: str = ""  # the communicator the two ranks belong to
    rank: int = 0  # the rank on ``node``
    peer_rank: int = 0  # the rank on ``peer_node``

    @property
    def judged(self) -> bool:
        """Whether its bandwidth says something about the link: an expected figure, and messages large enough."""
        return (
            self.expected_ratio is not None
            and self.mean_message_bytes is not None
            and self.mean_message_bytes >= MIN_MESSAGE_BYTES
        )


def node_pairs(links: Iterable[LinkFigure]) -> list[LinkFigure]:
    """Per group and pair of nodes (or one node, for its GPUs' links), its slowest GPU pair: the lowest share of
    the expected figure among those judged, else the lowest bandwidth; in :meth:`JobRanks.links`' order. A node pair's
    figure is its weakest link, not a sum that one degraded link would hide in."""
    worst: dict[tuple[str, str, str], LinkFigure] = {}
    for link in links:
        key = (link.group, link.node, link.peer_node)
        held = worst.get(key)
        if held is None or _link_order(link) < _link_order(held):
            worst[key] = link
    return sorted(worst.values(), key=_link_order)


def port_bandwidth(node: NodeView) -> float:
    """What ``node`` can send across nodes: the rate of its ACTIVE InfiniBand/RoCE ports, bytes/s (0 without)."""
    return sum(p.counters.get("rate_bytes_per_second", 0.0) for p in node.ib_ports or () if p.state == "ACTIVE")


def port_bandwidth_per_gpu(node: NodeView) -> float | None:
    """What one GPU of ``node`` can expect across nodes: its ACTIVE InfiniBand/RoCE ports' rate ÷ its up GPUs;
    None without an active port (the exporter reads none) or an up GPU."""
    ports = port_bandwidth(node)
    up = sum(1 for gpu in node.gpus if gpu.up)
    return ports / up if ports > 0 and up > 0 else None


def _weaker_end(node: NodeView, peer: NodeView) -> float | None:
    """A link across nodes carries what its slower end can: the lower of the two ends' per-GPU port figures."""
    ends = (port_bandwidth_per_gpu(node), port_bandwidth_per_gpu(peer))
    return None if None in ends else min(e for e in ends if e is not None)


def _link_order(link: LinkFigure) -> tuple[int, float, float, str, str, str, str, int, int]:
    judged = 0 if link.judged else 1 if link.expected_ratio is not None else 2
    bandwidth = link.bus_bandwidth if link.bus_bandwidth is not None else float("inf")
    return (
        judged,
        link.expected_ratio or 0.0,
        bandwidth,
        link.group,
        link.node,
        link.peer_node,
        link.comm_id,
        link.rank,
        link.peer_rank,
    )


_End = tuple[str, int]  # (node name, rank)
_LinkKey = tuple[str, str, _End, _End]  # group, comm_id, the lower end, the higher end


class JobRanks:
    """One job's per-rank rows from its nodes, each (communicator, rank) kept from the one node that has it: found
    once, then read for the ranks their peers wait for and for the links (a scrape reads both for every job).

    A rank two nodes claim is a stale view (the job moved, one agent's last push is old): the node with the newest
    sample has it, then the last push, then the first name, so the answer does not depend on the order of views.
    """

    def __init__(self, nodes: Iterable[NodeView], job_id: str) -> None:
        views = tuple(nodes)
        self._by_name = {node.name: node for node in views}
        owners: dict[tuple[str, int], NodeView] = {}
        rows: list[tuple[NodeView, CollectiveRankView]] = []
        for node in views:
            for row in node.collective_ranks or ():
                if row.job_id != job_id:
                    continue
                rows.append((node, row))
                key = (row.comm_id, row.rank)
                held = owners.get(key)
                if held is None or (held is not node and _preferred(node, held)):
                    owners[key] = node
        self._owner = {key: node.name for key, node in owners.items()}
        self._rows = [(node, row) for node, row in rows if owners[(row.comm_id, row.rank)] is node]
        self.unmapped = 0  # point-to-point rows whose peer no node reported: left out of the links
        self._sums = self._link_sums()

    def waited(self, *, waiting_only: bool = False) -> list[WaitedRank]:
        """Every rank of the job's collectives against its communicator's median time per operation, the rank its
        peers wait for longest first; communicators with fewer than :data:`MIN_RANKS` ranks of
        :data:`MIN_OPERATIONS` or more operations are left out (nothing to compare with).
        ``waiting_only``: only the ranks their peers wait for (a lag above 0), as the page and ``/metrics`` show.
        """
        communicators: dict[tuple[str, str], list[tuple[NodeView, CollectiveRankView]]] = {}
        for node, row in self._rows:
            if row.peer is None and row.operations >= MIN_OPERATIONS and row.seconds > 0:
                communicators.setdefault((row.comm_id, row.collective), []).append((node, row))
        lags: list[tuple[float, str, str, int, NodeView, CollectiveRankView, float, int]] = []
        for members in communicators.values():
            if len(members) < MIN_RANKS:
                continue
            typical = median(row.seconds / row.operations for _node, row in members)
            for node, row in members:
                lag = typical - row.seconds / row.operations
                if lag > 0 or not waiting_only:
                    lags.append((-lag, row.comm_id, row.collective, row.rank, node, row, typical, len(members)))
        lags.sort(key=lambda item: item[:4])
        return [_waited(node, row, typical, seen) for _lag, _c, _k, _r, node, row, typical, seen in lags]

    def links(self, nvlink_of: Callable[[NodeView], float | None]) -> list[LinkFigure]:
        """The job's point-to-point traffic per pair of GPUs, against what the fabric should carry: the lowest share
        of it first, then links not judged (messages below :data:`MIN_MESSAGE_BYTES`), then those with no expected
        figure. A rank's peer whose node no agent reported is left out (:attr:`unmapped`).

        Args:
            nvlink_of: what one GPU of a node sends to another GPU of it, one direction (the peak table's NVLink
                figure for its device); None where unknown, and links inside that node are then not judged.
        """
        out = []
        for (group, comm_id, (name, rank), (peer_name, peer_rank)), figures in self._sums.items():
            operations, seconds, traffic, bus_bytes, interval = figures
            node, peer = self._by_name[name], self._by_name[peer_name]
            within = name == peer_name
            expected = nvlink_of(node) if within else _weaker_end(node, peer)
            bandwidth = bus_bytes / seconds if seconds > 0 else None
            out.append(
                LinkFigure(
                    group=group,
                    node=name,
                    peer_node=peer_name,
                    within_node=within,
                    operations=int(operations),
                    seconds=seconds,
                    traffic_bytes=traffic,
                    bus_bytes=bus_bytes,
                    bus_bandwidth=bandwidth,
                    mean_message_bytes=traffic / operations if operations > 0 else None,
                    expected=expected,
                    expected_ratio=bandwidth / expected if bandwidth is not None and expected else None,
                    time_ratio=min(1.0, seconds / interval) if interval > 0 else None,
                    comm_id=comm_id,
                    rank=rank,
                    peer_rank=peer_rank,
                )
            )
        out.sort(key=_link_order)
        return out

    def _link_sums(self) -> dict[_LinkKey, list[float]]:
        """Per (group, communicator, pair of ranks with their nodes), the pair unordered: [operations, seconds,
        traffic bytes, bus bytes, interval seconds] summed over the point-to-point rows of both ends."""
        sums: dict[_LinkKey, list[float]] = {}
        for node, row in self._rows:
            if row.peer is None:
                continue
            peer_name = self._owner.get((row.comm_id, row.peer))
            if peer_name is None:
                self.unmapped += 1
                continue
            low, high = sorted(((node.name, row.rank), (peer_name, row.peer)))
            held = sums.setdefault((row.group, row.comm_id, low, high), [0.0, 0.0, 0.0, 0.0, 0.0])
            held[0] += row.operations
            held[1] += row.seconds
            held[2] += row.traffic_bytes
            held[3] += row.bus_bytes
            held[4] += row.interval_seconds
        return sums


def _waited(node: NodeView, row: CollectiveRankView, typical: float, seen: int) -> WaitedRank:
    own = row.seconds / row.operations
    lag = typical - own
    return WaitedRank(
        node=node.name,
        group=row.group,
        comm_id=row.comm_id,
        collective=row.collective,
        rank=row.rank,
        n_ranks=row.n_ranks,
        ranks_seen=seen,
        operations=row.operations,
        seconds_per_operation=own,
        peers_median_seconds_per_operation=typical,
        lag_seconds=lag,
        lag_ratio=lag / typical,
        bus_bandwidth=row.bus_bytes / row.seconds if row.bus_bytes > 0 else None,
        interval_seconds=row.interval_seconds,
    )


def _preferred(node: NodeView, other: NodeView) -> bool:
    if node.revision != other.revision:
        return node.revision > other.revision
    return node.name < other.name


def nvlink_of(table: PeakTable) -> Callable[[NodeView], float | None]:
    """What one GPU of a node sends to another GPU of it, one direction: the peak table's NVLink figure for the
    node's device; None for a node of mixed or unknown devices, or a device without a switch-connected figure."""

    def of(node: NodeView) -> float | None:
        spec = table.get(node.device) if node.device else None
        return None if spec is None else spec.nvlink_bandwidth_bytes_per_second

    return of
