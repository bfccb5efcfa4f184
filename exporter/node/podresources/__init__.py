"""The kubelet pod-resources gRPC API (v1): which pod and container hold which devices on this node."""

from mfumon.exporter.node.podresources.client import (
    DEFAULT_SOCKET,
    ContainerDevices,
    DeviceJobs,
    PodOwners,
    PodResourcesClient,
    device_keys,
)

__all__ = ["DEFAULT_SOCKET", "ContainerDevices", "DeviceJobs", "PodOwners", "PodResourcesClient", "device_keys"]
