"""Kubernetes for ``mfumon remediate``: cordon plus a ``NoSchedule`` taint naming the check, through lightkube.

A drain is one JSON merge patch of the Node: ``spec.unschedulable: true`` and the node's taints with ours added
(``mfumon.io/unhealthy=<checks>:NoSchedule``). A resume is the reverse: ``unschedulable`` removed and our taint
taken out of the list. Both carry the ``metadata.resourceVersion`` they were computed from, so the API server
refuses (409) a patch based on a node that changed meanwhile (another copy of the loop, a person): the loop reads
again and decides again instead of overwriting. A node cordoned without our taint is a person's, and is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from mfumon.exporter.scheduler.remediate.driver import SchedulerCommandError
from mfumon.exporter.scheduler.remediate.model import Action, Decision, SchedulerNode

__all__ = ["TAINT_KEY", "KubernetesDriver", "drain_patch", "node_of", "resume_patch", "taint_value"]

TAINT_KEY = "mfumon.io/unhealthy"
_NOT_LABEL = re.compile(r"[^A-Za-z0-9._-]+")


def taint_value(decision: Decision) -> str:
    """The checks as a label value (at most 63 characters, alphanumeric at both ends): ``xid.responsive``."""
    value = _NOT_LABEL.sub("-", ".".join(decision.checks) or decision.reason)[:63]
    return value.strip("._-") or "drain"


def node_of(obj: Mapping[str, Any], pool_labels: Sequence[str]) -> SchedulerNode:
    """A Node object (as JSON) into a scheduler node."""
    metadata, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    labels = metadata.get("labels") or {}
    taints = spec.get("taints") or []
    ours = [t for t in taints if t.get("key") == TAINT_KEY]
    cordoned = bool(spec.get("unschedulable"))
    pools = tuple(labels[label] for label in pool_labels if labels.get(label))[:1]
    if ours:
        reason: str | None = f"{TAINT_KEY}={ours[0].get('value', '')}"
    elif cordoned:
        reason = "cordoned"
    else:
        reason = None
    return SchedulerNode(
        name=str(metadata.get("name")), pools=pools, drained=cordoned or bool(ours), ours=bool(ours), reason=reason
    )


def drain_patch(obj: Mapping[str, Any], decision: Decision) -> dict[str, Any]:
    """The merge patch that cordons the node and adds our taint (replacing an older one of ours)."""
    taints = [t for t in (obj.get("spec") or {}).get("taints") or [] if t.get("key") != TAINT_KEY]
    taints.append({"key": TAINT_KEY, "value": taint_value(decision), "effect": "NoSchedule"})
    return {
        "metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")},
        "spec": {"unschedulable": True, "taints": taints},
    }


def resume_patch(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that uncordons the node and removes our taint, keeping everyone else's."""
    taints = [t for t in (obj.get("spec") or {}).get("taints") or [] if t.get("key") != TAINT_KEY]
    return {
        "metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")},
        "spec": {"unschedulable": None, "taints": taints or None},
    }


class KubernetesDriver:
    """Nodes through a lightkube ``Client`` (in a pod: its service account; elsewhere ``$KUBECONFIG``)."""

    kind = "kubernetes"

    def __init__(self, client: Any, *, pool_labels: Sequence[str] | None = None) -> None:
        from mfumon.exporter.scheduler.kubernetes import POOL_LABELS

        self._client = client
        self._pool_labels = tuple(pool_labels or POOL_LABELS)

    @classmethod
    def from_environment(cls, **options: Any) -> KubernetesDriver:
        from lightkube import Client

        return cls(Client(), **options)

    def action_name(self, action: Action) -> str:
        return "cordon" if action == "drain" else "uncordon"

    def _call(self, what: str, call: Any) -> Any:
        from lightkube.core.exceptions import ApiError
        from lightkube.core.exceptions import ConfigError as KubeConfigError

        try:
            return call()
        except ApiError as exc:
            raise SchedulerCommandError(f"{what}: {exc.status.code} {exc.status.reason}: {exc.status.message}") from exc
        except (OSError, KubeConfigError) as exc:
            raise SchedulerCommandError(f"{what}: {exc}") from exc
        except Exception as exc:  # httpx transport errors and the like: reported, never assumed done
            if type(exc).__module__.startswith(("httpx", "httpcore")):
                raise SchedulerCommandError(f"{what}: {exc}") from exc
            raise

    def _node(self, name: str) -> dict[str, Any]:
        from lightkube.resources.core_v1 import Node

        return self._call(f"get node {name}", lambda: self._client.get(Node, name).to_dict())  # type: ignore[no-any-return]

    def read_nodes(self) -> list[SchedulerNode]:
        from lightkube.resources.core_v1 import Node

        objects = self._call("list nodes", lambda: [n.to_dict() for n in self._client.list(Node)])
        return sorted((node_of(o, self._pool_labels) for o in objects), key=lambda n: n.name)

    def _patch(self, name: str, body: dict[str, Any]) -> None:
        from lightkube.resources.core_v1 import Node
        from lightkube.types import PatchType

        self._call(f"patch node {name}", lambda: self._client.patch(Node, name, body, patch_type=PatchType.MERGE))

    def close(self) -> None:
        self._client.close()

    def drain(self, decision: Decision) -> None:
        self._patch(decision.node, drain_patch(self._node(decision.node), decision))

    def resume(self, decision: Decision) -> None:
        self._patch(decision.node, resume_patch(self._node(decision.node)))
