"""The driver and firmware node agents report (issue 59), kept per node and carried into the jobs on its GPUs.

A node's agent sends ``software`` with its pushes: ``[{component, version}]``, the GPU ``driver``, the CUDA version the
driver supports (``cuda_driver``) and one ``vbios`` per distinct version on the node. The aggregator keeps the last
list each node sent in the node's view (a push without one keeps it) and in ``nodes.software``, written only when a
push changed it (:func:`pushed_software` says when).

A job's software, as ``GET /v1/jobs/{id}``, the job page and the regressions comparison see it, is its own fingerprint
plus each component reported by the nodes its GPUs are attributed to, under the component's name (``driver``,
``cuda_driver``, ``vbios``), by these rules (:func:`with_node_software`):

- **the job's own wins**: a ``driver`` the job sent is kept whatever its nodes say, and a component stored before
  (see below) stays as stored;
- **mixed versions are named, not hidden**: where the job's nodes (or one node's GPUs) report several versions of a
  component, the value is the distinct versions, sorted, joined with ``|`` (``vbios``:
  ``96.00.74.00.01|96.00.74.00.02``): in the regressions comparison a mixed job is a version of its own, counted on
  neither side of a step between two clean versions. Past :data:`MAX_VALUE` characters it reads ``mixed (N versions)``;
- components named ``tag.*`` are the user's tags: never taken from a node.

At each report of a job, the components its nodes report that its ``jobs.software`` does not hold yet are stored there
(:func:`new_node_software`), so the comparison, which reads jobs from the database, sees them for ended jobs too.
Nothing is written when nothing is new, which is every report but the first ones of a job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mfumon.api.state.views import NodeView

__all__ = [
    "MAX_VALUE",
    "MIXED_SEPARATOR",
    "new_node_software",
    "node_components",
    "pushed_software",
    "software_json",
    "stored_software",
    "with_node_software",
]

#: What joins the distinct versions of a component a job's nodes disagree on.
MIXED_SEPARATOR = "|"
#: The longest version a job's fingerprint holds (``mfumon.exporter.job.fingerprint.MAX_VALUE``).
MAX_VALUE = 256

Software = tuple[tuple[str, str], ...]


class _Entry(Protocol):
    @property
    def component(self) -> str: ...

    @property
    def version(self) -> str: ...


def pushed_software(sent: Sequence[_Entry] | None, kept: Software | None) -> Software | None:
    """The node's software after a push that sent ``sent`` (None: the push had none): ``kept`` itself (the very
    object) when the push left it unchanged, so ``result is kept`` says there is nothing to store."""
    if sent is None:
        return kept
    pairs = tuple((entry.component, entry.version) for entry in sent)
    return kept if pairs == kept else pairs


def software_json(software: Software | None) -> list[dict[str, str]] | None:
    """The node's software as ``nodes.software`` stores it (and the push sent it)."""
    if software is None:
        return None
    return [{"component": component, "version": version} for component, version in software]


def stored_software(stored: Any) -> Software | None:
    """``nodes.software`` read back; None for anything that is not a list of {component, version}."""
    if not isinstance(stored, list):
        return None
    try:
        return tuple((str(entry["component"]), str(entry["version"])) for entry in stored)
    except (KeyError, TypeError):
        return None


def node_components(nodes: Iterable[NodeView]) -> dict[str, str]:
    """component -> version over ``nodes`` (a job's), the distinct versions of a component joined (module rules)."""
    versions: dict[str, set[str]] = {}
    for node in nodes:
        for component, version in node.software or ():
            if not component.startswith("tag."):
                versions.setdefault(component, set()).add(version)
    out = {}
    for component, found in versions.items():
        joined = MIXED_SEPARATOR.join(sorted(found))
        out[component] = joined if len(joined) <= MAX_VALUE else f"mixed ({len(found)} versions)"
    return out


def with_node_software(own: Mapping[str, str] | None, nodes: Iterable[NodeView]) -> dict[str, str] | None:
    """The job's software as it is shown: its own (or stored) components, and its nodes' where it has none."""
    reported = node_components(nodes)
    if not reported:
        return dict(own) if own is not None else None
    held = own or {}
    return {**held, **{key: value for key, value in reported.items() if key not in held}}


def new_node_software(own: Mapping[str, str] | None, nodes: Iterable[NodeView]) -> dict[str, str] | None:
    """What ``jobs.software`` becomes with its nodes' components it does not hold yet; None when nothing is new
    (then nothing is written)."""
    held = own or {}
    new = {key: value for key, value in node_components(nodes).items() if key not in held}
    return {**held, **new} if new else None
