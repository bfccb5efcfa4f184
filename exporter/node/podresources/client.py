"""Read the kubelet's pod-resources socket and map this node's GPUs to the pods (and jobs) that hold them.

Device ids as the NVIDIA device plugin and GKE report them, all understood:
- ``GPU-<uuid>`` (``DEVICE_ID_STRATEGY=uuid``, the default) and ``MIG-<uuid>`` (a MIG device, mixed/single strategy);
- ``MIG-GPU-<uuid>/<gi>/<ci>`` (older drivers' MIG ids): the MIG instance ``<gi>`` of that GPU;
- ``0`` (``DEVICE_ID_STRATEGY=index``), ``nvidia0`` and ``nvidia0/gi1[/vgpu2]`` (GKE): GPU index, MIG instance;
- a ``::<n>`` suffix (time-slicing replicas) is dropped: every replica of a GPU maps to that GPU.

The job of a pod is :func:`mfumon.exporter.workloads.pod_job_id` on its labels and owners, read from the API server when
this node agent has a service account allowed to ``get`` pods, else ``<namespace>:<pod>``.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mfumon.exporter.workloads import pod_job_id

__all__ = ["DEFAULT_SOCKET", "ContainerDevices", "DeviceJobs", "PodOwners", "PodResourcesClient", "device_keys"]

logger = logging.getLogger(__name__)

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
_GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/mig-", "amd.com/gpu")
#: The AMD device plugin (ROCm/k8s-device-plugin) names a GPU by its PCI address, ``0000:03:00.0``, and a time-sliced
#: replica ``0000:03:00.0-slice-2`` (internal/pkg/plugin/timeslice.go).
_PCI_ADDRESS = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True, slots=True)
class ContainerDevices:
    """One container's devices of one resource."""

    namespace: str
    pod: str
    container: str
    resource: str
    device_ids: tuple[str, ...]


class PodResourcesClient:
    """``v1.PodResourcesLister/List`` over the kubelet's unix socket (gRPC)."""

    def __init__(self, socket_path: str = DEFAULT_SOCKET, timeout_seconds: float = 5.0) -> None:
        import grpc

        from mfumon.exporter.node.podresources import messages

        self._messages = messages
        self._channel = grpc.insecure_channel(f"unix://{socket_path}")
        self._list = self._channel.unary_unary(
            messages.LIST_METHOD,
            request_serializer=messages.ListPodResourcesRequest.SerializeToString,
            response_deserializer=messages.ListPodResourcesResponse.FromString,
        )
        self._timeout_seconds = timeout_seconds

    def list(self) -> list[ContainerDevices]:
        response = self._list(self._messages.ListPodResourcesRequest(), timeout=self._timeout_seconds)
        return [
            ContainerDevices(pod.namespace, pod.name, container.name, device.resource_name, tuple(device.device_ids))
            for pod in response.pod_resources
            for container in pod.containers
            for device in container.devices
            if device.resource_name.startswith(_GPU_RESOURCES)
        ]

    def close(self) -> None:
        self._channel.close()


def device_keys(device_id: str) -> list[str]:
    """Lookup keys for one device id: ``uuid:<UUID>``, ``gpu:<index>``, ``gpu:<index>.<gi>`` or ``bdf:<address>``."""
    base = device_id.split("::", 1)[0].strip()
    address = base.rsplit("-slice-", 1)[0]
    if _PCI_ADDRESS.match(address):
        return [f"bdf:{address.lower()}"]
    if base.startswith("MIG-GPU-"):  # MIG-GPU-<uuid>/<gi>/<ci>
        parent, _, rest = base[len("MIG-") :].partition("/")
        gi = rest.split("/", 1)[0]
        return [f"migof:{parent}/{gi}"] if gi.isdigit() else []
    if base.startswith(("GPU-", "MIG-")):
        return [f"uuid:{base}"]
    if base.startswith("nvidia"):
        index, _, rest = base[len("nvidia") :].partition("/")
        if not index.isdigit():
            return []
        if rest.startswith("gi") and rest[2:].split("/", 1)[0].isdigit():
            return [f"gpu:{index}.{rest[2:].split('/', 1)[0]}"]
        return [f"gpu:{index}"]
    return [f"gpu:{base}"] if base.isdigit() else []


class PodOwners:
    """A pod's labels and owner references from the API server (service account credentials), cached."""

    def __init__(self, fetch: Callable[[str, str], Mapping[str, Any] | None], ttl_seconds: float = 600.0) -> None:
        self._fetch = fetch
        self._ttl_seconds = ttl_seconds
        self._cache: dict[tuple[str, str], tuple[float, str]] = {}
        self._warned = False

    @classmethod
    def in_cluster(cls, root: Path = _SERVICE_ACCOUNT) -> PodOwners | None:
        """From the pod's service account, or None outside a cluster (or without a mounted token)."""
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host or not (root / "token").is_file():
            return None
        import httpx

        context = ssl.create_default_context(cafile=str(root / "ca.crt")) if (root / "ca.crt").is_file() else True
        base = f"https://{host}:{port}"

        def fetch(namespace: str, name: str) -> Mapping[str, Any] | None:
            token = (root / "token").read_text().strip()  # projected tokens rotate: read each time
            response = httpx.get(
                f"{base}/api/v1/namespaces/{namespace}/pods/{name}",
                headers={"Authorization": f"Bearer {token}"},
                verify=context,
                timeout=5.0,
            )
            if response.status_code == 404:
                return None
            response.raise_for_status()
            return response.json()  # type: ignore[no-any-return]

        return cls(fetch)

    def job_id(self, namespace: str, pod: str) -> str | None:
        now = time.monotonic()
        cached = self._cache.get((namespace, pod))
        if cached is not None and now - cached[0] < self._ttl_seconds:
            return cached[1]
        try:
            obj = self._fetch(namespace, pod)
        except Exception as exc:  # no RBAC, API server away: the pod name still names something
            if not self._warned:
                logger.warning(
                    "cannot read pod %s/%s from the API server (%s): using the pod name", namespace, pod, exc
                )
                self._warned = True
            return pod_job_id(namespace, pod)
        meta = (obj or {}).get("metadata") or {}
        job = pod_job_id(namespace, pod, meta.get("labels"), meta.get("ownerReferences"))
        if job is not None:
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[(namespace, pod)] = (now, job)
        return job


class DeviceJobs:
    """GPU -> job from pod-resources, refreshed at most every ``max_age_s``; used by :class:`JobResolver`."""

    def __init__(
        self,
        lister: Callable[[], Iterable[ContainerDevices]],
        owners: PodOwners | None = None,
        max_age_seconds: float = 5.0,
    ) -> None:
        self._lister = lister
        self._owners = owners
        self._max_age_seconds = max_age_seconds
        self._jobs: dict[str, str] = {}
        self._pods: dict[str, tuple[str, str]] = {}
        self._read_at = -1e9
        self._lock = threading.Lock()
        self._failing = False

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._read_at < self._max_age_seconds:
            return
        self._read_at = now
        try:
            devices = list(self._lister())
        except Exception as exc:  # kubelet restarting, socket gone: keep nothing rather than stale pods
            if not self._failing:
                logger.warning("pod-resources List failed: %s", exc)
                self._failing = True
            self._jobs, self._pods = {}, {}
            return
        if self._failing:
            logger.info("pod-resources answers again")
            self._failing = False
        jobs: dict[str, str] = {}
        pods: dict[str, tuple[str, str]] = {}
        for entry in devices:
            owner = self._owners.job_id(entry.namespace, entry.pod) if self._owners else None
            job = owner or pod_job_id(entry.namespace, entry.pod)
            for device_id in entry.device_ids:
                for key in device_keys(device_id):
                    pods[key] = (entry.namespace, entry.pod)
                    if job:
                        jobs[key] = job
        self._jobs, self._pods = jobs, pods

    def job_for(
        self, uuid: str | None, gpu_key: str, parent_uuid: str | None = None, bdf: str | None = None
    ) -> str | None:
        """The job holding the GPU with this UUID (or index key ``0`` / MIG key ``2.1``, or PCI address), if a pod
        holds it."""
        with self._lock:
            self._refresh()
            keys = [f"uuid:{uuid}"] if uuid else []
            if bdf:
                keys.append(f"bdf:{bdf.lower()}")
            keys.append(f"gpu:{gpu_key}")
            if parent_uuid and "." in gpu_key:
                keys.append(f"migof:{parent_uuid}/{gpu_key.split('.', 1)[1]}")
            return next((self._jobs[k] for k in keys if k in self._jobs), None)
