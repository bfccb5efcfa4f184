"""Kubernetes: GPU pods grouped into jobs, Kueue workloads still waiting for quota, and Kueue quotas.

:class:`ClusterWatcher` keeps a cache of Pods and Nodes (and, with Kueue, Workloads) by *list + watch* through
lightkube, relisting when a watch expires (410 Gone) or fails; ClusterQueues, LocalQueues and ResourceFlavors
are few and are listed at each snapshot. :func:`build_snapshot` turns the cached objects (plain API dicts) into a
snapshot, so the rules below are tested on recorded API responses:

- a pod asks for GPUs with ``nvidia.com/gpu`` or MIG resources ``nvidia.com/mig-<profile>`` (one device each):
  the larger of its containers' sum and any init container's request (limits when requests are absent);
- pods are grouped into jobs by :func:`mfumon.exporter.workloads.pod_job_id`; a job is *running* once any of its GPU
  pods is bound to a node (it holds those GPUs), *pending* while none is; each pod is one placement unit;
- queued since the pod's creation, unless it carries scheduling gates (Kueue's admission gate, or any other):
  then it is pending but not queued; started when its first pod was bound (``PodScheduled``);
- team = namespace (or ``--kube.team-label``); pool = the bound node's pool label (``--kube.pool-label``, default
  the usual node-pool labels), for a pending pod its node selector on that label;
- a Kueue Workload without an admission (its Job is suspended, so it has no pods yet) is a pending job of its owner,
  with the pods its podSets ask for; the first reason of its ``QuotaReserved`` condition is the pending reason;
- quotas: each ClusterQueue's ``nvidia.com/gpu`` nominal quota per flavor; the flavor's node label for the pool
  label names the pool (else the flavor's name); the team is the namespace when exactly one namespace's LocalQueues
  point at the ClusterQueue, else the ClusterQueue's name.
- pools (:func:`gpu_node_pools`): the nodes with GPUs by their pool label, and each Kueue ResourceFlavor named by
  its own name (no pool label among its node labels) over the GPU nodes that carry all its node labels; flavors
  may overlap node pools and each other, so a node may be in several pools.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from mfumon.exporter.scheduler.model import EndedJob, Pool, Quota, ScheduledJob, Snapshot
from mfumon.exporter.workloads import JOB_LABELS, pod_job_id

__all__ = ["POOL_LABELS", "ClusterWatcher", "build_snapshot", "gpu_node_pools", "pod_gpus"]

logger = logging.getLogger(__name__)

POOL_LABELS: tuple[str, ...] = (
    "mfumon.io/pool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
    "kubernetes.azure.com/agentpool",
    "nvidia.com/gpu.product",
)
GPU_RESOURCE = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
KUEUE_GROUP = "kueue.x-k8s.io"


def _quantity(value: Any) -> int:
    """An extended-resource quantity (whole numbers only: ``"8"``, ``8``)."""
    try:
        return int(str(value))
    except ValueError:
        return 0


def _container_gpus(container: Mapping[str, Any]) -> int:
    resources = container.get("resources") or {}
    wanted = resources.get("requests") or resources.get("limits") or {}
    limits = resources.get("limits") or {}
    total = 0
    for name in set(wanted) | set(limits):
        if name == GPU_RESOURCE or name.startswith(MIG_PREFIX):
            total += _quantity(wanted.get(name, limits.get(name, 0)))
    return total


def pod_gpus(spec: Mapping[str, Any]) -> int:
    """GPU devices a pod spec asks for: max(sum over containers, max over init containers)."""
    app = sum(_container_gpus(c) for c in spec.get("containers") or [])
    init = max((_container_gpus(c) for c in spec.get("initContainers") or []), default=0)
    return max(app, init)


def _timestamp(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def _pool_of(labels: Mapping[str, str] | None, pool_labels: Sequence[str]) -> str | None:
    return next((labels[k] for k in pool_labels if labels and labels.get(k)), None)


def _has_gpus(node: Mapping[str, Any]) -> bool:
    status = node.get("status") or {}
    resources = {**(status.get("capacity") or {}), **(status.get("allocatable") or {})}
    return any(
        (name == GPU_RESOURCE or name.startswith(MIG_PREFIX)) and _quantity(value) > 0
        for name, value in resources.items()
    )


def gpu_node_pools(
    nodes: Iterable[Mapping[str, Any]],
    flavors: Iterable[Mapping[str, Any]] = (),
    pool_labels: Sequence[str] = POOL_LABELS,
) -> list[Pool]:
    """The GPU nodes' pools: by pool label, and by Kueue ResourceFlavor where the flavor names no pool label."""
    labelled = {
        str((n.get("metadata") or {}).get("name")): (n.get("metadata") or {}).get("labels") or {}
        for n in nodes
        if _has_gpus(n) and (n.get("metadata") or {}).get("name")
    }
    members: dict[str, set[str]] = {}
    for name, labels in labelled.items():
        pool = _pool_of(labels, pool_labels)
        if pool:
            members.setdefault(pool, set()).add(name)
    for flavor in flavors:
        wanted = (flavor.get("spec") or {}).get("nodeLabels") or {}
        flavor_name = str((flavor.get("metadata") or {}).get("name") or "")
        if not wanted or not flavor_name or _pool_of(wanted, pool_labels):
            continue  # a flavor that names a pool label is that node pool (kueue_quotas names it so too)
        matching = {n for n, labels in labelled.items() if all(labels.get(k) == v for k, v in wanted.items())}
        members.setdefault(flavor_name, set()).update(matching)
    return [Pool(name=p, nodes=tuple(sorted(n))) for p, n in sorted(members.items())]


def _exit_code(pod: Mapping[str, Any]) -> int | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode"):
            return int(terminated["exitCode"])
    return 0 if (pod.get("status") or {}).get("phase") == "Succeeded" else None


class _Job:
    """Pods of one job, collected before they become a :class:`ScheduledJob`."""

    def __init__(self, job_id: str, namespace: str, team: str | None) -> None:
        self.job_id, self.namespace, self.team = job_id, namespace, team
        self.units: dict[int, int] = {}
        self.requested = self.allocated = 0
        self.placement: dict[str, int] = {}
        self.created: list[float] = []
        self.bound: list[float] = []
        self.gated = False
        self.reason: str | None = None
        self.pool: str | None = None
        self.name: str | None = None
        self.finished: list[tuple[str, int | None]] = []
        self.restarts = 0

    def snapshot(self, now: float) -> ScheduledJob | None:
        if self.requested <= 0:
            return None
        running = self.allocated > 0
        submitted = min(self.created) if self.created else None
        return ScheduledJob(
            job_id=self.job_id,
            status="running" if running else "pending",
            gpus_requested=self.requested,
            units=sorted(self.units.items(), reverse=True),
            gpus_allocated=self.allocated if running else None,
            placement=dict(self.placement) if running else None,
            submitted_at=submitted,
            queued_at=None if self.gated or submitted is None or submitted > now else submitted,
            started_at=min(self.bound) if running and self.bound else None,
            pending_reason=None if running else self.reason,
            restarts=self.restarts,
            pool=self.pool,
            team=self.team,
            name=self.name,
        )


def build_snapshot(
    pods: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]] = (),
    workloads: Iterable[Mapping[str, Any]] = (),
    cluster_queues: Iterable[Mapping[str, Any]] = (),
    local_queues: Iterable[Mapping[str, Any]] = (),
    flavors: Iterable[Mapping[str, Any]] = (),
    *,
    now: float | None = None,
    pool_labels: Sequence[str] = POOL_LABELS,
    job_labels: Sequence[str] = JOB_LABELS,
    team_label: str | None = None,
    pools: bool = True,
) -> Snapshot:
    """A snapshot from API objects as dicts (``kubectl get -o json`` items); ``pools=False`` leaves pools to
    exporters' ``--pool``."""
    now = time.time() if now is None else now
    nodes = list(nodes)
    flavors = list(flavors)
    node_pools = {n["metadata"]["name"]: _pool_of((n.get("metadata") or {}).get("labels"), pool_labels) for n in nodes}
    jobs: dict[str, _Job] = {}
    for pod in pods:
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        gpus = pod_gpus(spec)
        if gpus <= 0 or meta.get("deletionTimestamp"):
            continue
        namespace, labels = meta.get("namespace", "default"), meta.get("labels") or {}
        job_id = pod_job_id(namespace, meta.get("name", ""), labels, meta.get("ownerReferences"), job_labels)
        if job_id is None:
            continue
        job = jobs.get(job_id)
        if job is None:
            team = labels.get(team_label) if team_label else None
            job = jobs[job_id] = _Job(job_id, namespace, team or namespace)
            job.name = job_id.split(":", 1)[-1]
        phase = status.get("phase")
        if phase in ("Succeeded", "Failed"):
            job.finished.append((str(phase), _exit_code(pod)))
            continue
        job.restarts = max(job.restarts, _quantity(labels.get("jobset.sigs.k8s.io/restart-attempt", 0)))
        job.requested += gpus
        job.units[gpus] = job.units.get(gpus, 0) + 1
        created = _timestamp(meta.get("creationTimestamp"))
        if created is not None:
            job.created.append(created)
        node = spec.get("nodeName")
        if node:
            job.allocated += gpus
            job.placement[node] = job.placement.get(node, 0) + gpus
            scheduled = _condition(pod, "PodScheduled")
            bound = _timestamp((scheduled or {}).get("lastTransitionTime")) or _timestamp(status.get("startTime"))
            if bound is not None:
                job.bound.append(bound)
            job.pool = job.pool or node_pools.get(node)
        else:
            job.gated = job.gated or bool(spec.get("schedulingGates"))
            scheduled = _condition(pod, "PodScheduled")
            job.reason = job.reason or ("SchedulingGated" if spec.get("schedulingGates") else None)
            job.reason = job.reason or (scheduled or {}).get("reason") or "Pending"
            job.pool = job.pool or _pool_of(spec.get("nodeSelector"), pool_labels)
    snapshot = Snapshot(kind="kubernetes", observed_at=now)
    for job in jobs.values():
        listed = job.snapshot(now)
        if listed is not None:
            snapshot.jobs.append(listed)
        elif job.finished:
            failed = [code for phase, code in job.finished if phase == "Failed"]
            state = "Failed" if failed else "Succeeded"
            snapshot.ended.append(EndedJob(job.job_id, state, failed[0] if failed else 0))
    listed_ids = {j.job_id for j in snapshot.jobs}
    for workload in workloads:
        pending = _pending_workload(workload, now, job_labels, pool_labels, flavors)
        if pending is not None and pending.job_id not in listed_ids:
            snapshot.jobs.append(pending)
            listed_ids.add(pending.job_id)
    snapshot.quotas = kueue_quotas(cluster_queues, local_queues, flavors, pool_labels)
    snapshot.pools = gpu_node_pools(nodes, flavors, pool_labels) if pools else None
    return snapshot


def _pending_workload(
    workload: Mapping[str, Any],
    now: float,
    job_labels: Sequence[str],
    pool_labels: Sequence[str],
    flavors: Iterable[Mapping[str, Any]],
) -> ScheduledJob | None:
    """A Kueue Workload not admitted yet: its Job is suspended and has no pods, so the workload is the request."""
    meta, spec, status = workload.get("metadata") or {}, workload.get("spec") or {}, workload.get("status") or {}
    if status.get("admission") or _condition(workload, "Finished"):
        return None
    owner = next(iter(meta.get("ownerReferences") or []), None)
    namespace = meta.get("namespace", "default")
    labels = meta.get("labels") or {}
    name = owner.get("name") if owner else meta.get("name", "")
    job_id = pod_job_id(namespace, str(name), labels, None, job_labels) if labels.get("mfumon.io/job-id") else None
    job_id = job_id or pod_job_id(namespace, str(name), {}, None, ())
    units: dict[int, int] = {}
    for pod_set in spec.get("podSets") or []:
        gpus = pod_gpus(((pod_set.get("template") or {}).get("spec")) or {})
        if gpus > 0:
            units[gpus] = units.get(gpus, 0) + int(pod_set.get("count", 1))
    requested = sum(g * n for g, n in units.items())
    if requested <= 0 or job_id is None:
        return None
    created = _timestamp(meta.get("creationTimestamp"))
    reserved = _condition(workload, "QuotaReserved")
    return ScheduledJob(
        job_id=job_id,
        status="pending",
        gpus_requested=requested,
        units=sorted(units.items(), reverse=True),
        submitted_at=created,
        queued_at=created if created is not None and created <= now else None,
        pending_reason=str((reserved or {}).get("reason") or "QuotaNotReserved"),
        team=namespace,
        name=str(name),
    )


def kueue_quotas(
    cluster_queues: Iterable[Mapping[str, Any]],
    local_queues: Iterable[Mapping[str, Any]],
    flavors: Iterable[Mapping[str, Any]],
    pool_labels: Sequence[str] = POOL_LABELS,
) -> list[Quota]:
    """GPU nominal quotas per ClusterQueue and flavor, named by team and pool."""
    flavor_pool = {
        f["metadata"]["name"]: _pool_of((f.get("spec") or {}).get("nodeLabels"), pool_labels) or f["metadata"]["name"]
        for f in flavors
    }
    users: dict[str, set[str]] = {}
    for queue in local_queues:
        target = (queue.get("spec") or {}).get("clusterQueue")
        if target:
            users.setdefault(target, set()).add((queue.get("metadata") or {}).get("namespace", "default"))
    totals: dict[tuple[str, str], int] = {}
    for queue in cluster_queues:
        name = queue["metadata"]["name"]
        namespaces = users.get(name, set())
        team = next(iter(namespaces)) if len(namespaces) == 1 else name
        for group in (queue.get("spec") or {}).get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for resource in flavor.get("resources") or []:
                    if resource.get("name") == GPU_RESOURCE or str(resource.get("name", "")).startswith(MIG_PREFIX):
                        pool = flavor_pool.get(flavor.get("name", ""), flavor.get("name", ""))
                        key = (team, pool)
                        totals[key] = totals.get(key, 0) + _quantity(resource.get("nominalQuota", 0))
    return [Quota(team=t, pool=p, gpus=g) for (t, p), g in sorted(totals.items())]


class _Informer(threading.Thread):
    """List, then watch from the list's resourceVersion; relist after a 410 Gone or any failure."""

    def __init__(self, name: str, lister: Callable[[], Any], watcher: Callable[[str], Iterable[tuple[str, Any]]]):
        super().__init__(name=f"mfumon-watch-{name}", daemon=True)
        self._lister, self._watcher = lister, watcher
        self._items: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.synced = threading.Event()
        self.relists = 0
        self.error: str | None = None

    @staticmethod
    def _key(obj: Mapping[str, Any]) -> str:
        meta = obj.get("metadata") or {}
        return str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")

    def run(self) -> None:
        backoff = 1.0
        while not self._stopping.is_set():
            try:
                listing = self._lister()
                items = {self._key(d): d for d in (_as_dict(o) for o in listing)}
                version = listing.resourceVersion
                with self._lock:
                    self._items = items
                self.relists += 1
                self.error = None
                self.synced.set()
                backoff = 1.0
                for kind, obj in self._watcher(version):
                    if self._stopping.is_set():
                        return
                    data = _as_dict(obj)
                    with self._lock:
                        if kind == "DELETED":
                            self._items.pop(self._key(data), None)
                        else:
                            self._items[self._key(data)] = data
            except Exception as exc:  # expired watch (410), API server restart, network: relist
                self.error = f"{type(exc).__name__}: {exc}"
                logger.info("watch %s ended (%s); listing again", self.name, self.error)
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    def items(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._items.values())

    def stop(self) -> None:
        self._stopping.set()


def _as_dict(obj: Any) -> dict[str, Any]:
    return obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)


class ClusterWatcher:
    """Pods, Nodes and (with Kueue) Workloads kept by list + watch; snapshots built from the cache."""

    def __init__(
        self,
        client: Any,
        *,
        pool_labels: Sequence[str] | None = None,
        job_labels: Sequence[str] | None = None,
        team_label: str | None = None,
        kueue: str = "auto",
        watch_timeout_seconds: int = 300,
        pools: bool = True,
    ) -> None:
        from lightkube.resources.core_v1 import Node, Pod

        self._client = client
        self._pool_labels = tuple(pool_labels or POOL_LABELS)
        self._job_labels = tuple(job_labels or JOB_LABELS)
        self._team_label = team_label
        self._pools = pools
        self._kueue = self._kueue_resources() if kueue != "off" else None
        if kueue == "on" and self._kueue is None:
            raise RuntimeError("Kueue was asked for (--kube.kueue on) but its API is not served")

        def informer(name: str, resource: Any, namespaced: bool) -> _Informer:
            scope = {"namespace": "*"} if namespaced else {}
            return _Informer(
                name,
                lambda: client.list(resource, **scope),
                lambda version: client.watch(
                    resource, resource_version=version, server_timeout=watch_timeout_seconds, **scope
                ),
            )

        self._informers = {"pods": informer("pods", Pod, True), "nodes": informer("nodes", Node, False)}
        if self._kueue is not None:
            self._informers["workloads"] = informer("workloads", self._kueue["Workload"], True)

    @classmethod
    def from_environment(cls, **options: Any) -> ClusterWatcher:
        """In a pod: the service account; elsewhere: ``$KUBECONFIG`` or ``~/.kube/config``."""
        from lightkube import Client

        return cls(Client(), **options)

    def _kueue_resources(self) -> dict[str, Any] | None:
        from lightkube.generic_resource import create_global_resource, create_namespaced_resource

        resources = {
            "Workload": create_namespaced_resource(KUEUE_GROUP, "v1beta1", "Workload", "workloads"),
            "LocalQueue": create_namespaced_resource(KUEUE_GROUP, "v1beta1", "LocalQueue", "localqueues"),
            "ClusterQueue": create_global_resource(KUEUE_GROUP, "v1beta1", "ClusterQueue", "clusterqueues"),
            "ResourceFlavor": create_global_resource(KUEUE_GROUP, "v1beta1", "ResourceFlavor", "resourceflavors"),
        }
        try:
            list(self._client.list(resources["ClusterQueue"]))
        except Exception as exc:  # 404: Kueue's CRDs are not installed
            logger.info("Kueue not found (%s): pods only", exc)
            return None
        return resources

    def start(self, timeout_seconds: float = 60.0) -> None:
        for informer in self._informers.values():
            informer.start()
        deadline = time.monotonic() + timeout_seconds
        for name, informer in self._informers.items():
            if not informer.synced.wait(max(0.0, deadline - time.monotonic())):
                raise RuntimeError(f"could not list {name}: {informer.error}")

    def stop(self) -> None:
        for informer in self._informers.values():
            informer.stop()

    def snapshot(self) -> Snapshot:
        if any(not informer.synced.is_set() for informer in self._informers.values()):
            raise RuntimeError("the watch cache is not synced yet")
        queues: dict[str, list[dict[str, Any]]] = {"ClusterQueue": [], "LocalQueue": [], "ResourceFlavor": []}
        if self._kueue is not None:
            for kind in queues:
                scope = {"namespace": "*"} if kind == "LocalQueue" else {}
                queues[kind] = [_as_dict(o) for o in self._client.list(self._kueue[kind], **scope)]
        workloads = self._informers["workloads"].items() if "workloads" in self._informers else []
        return build_snapshot(
            self._informers["pods"].items(),
            self._informers["nodes"].items(),
            workloads,
            queues["ClusterQueue"],
            queues["LocalQueue"],
            queues["ResourceFlavor"],
            pool_labels=self._pool_labels,
            job_labels=self._job_labels,
            team_label=self._team_label,
            pools=self._pools,
        )
