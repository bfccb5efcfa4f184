"""GPU -> pod -> job from the kubelet pod-resources API: a real gRPC server on a unix socket, the NVML source on top."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2

from mfumon.exporter.node.attribution import JobResolver
from mfumon.exporter.node.podresources import DeviceJobs, PodOwners, PodResourcesClient, device_keys
from mfumon.exporter.node.podresources import messages as pb
from mfumon.exporter.node.sources.nvml import NvmlSource
from mfumon.exporter.node.sources.nvml_api import NvmlApi

PODS = Path(__file__).parents[1] / "scheduler" / "fixtures" / "kubernetes" / "pods.json"
PROTO = Path(__file__).parents[3] / "exporter" / "node" / "podresources" / "api.proto"


class Kubelet:
    """What the kubelet's ``List`` answers: (namespace, pod, container, resource, device ids)."""

    def __init__(self) -> None:
        self.pods: list[tuple[str, str, str, str, list[str]]] = []
        self.calls = 0

    def list(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.calls += 1
        response = pb.ListPodResourcesResponse()
        for namespace, pod, container, resource, ids in self.pods:
            entry = response.pod_resources.add(name=pod, namespace=namespace)
            devices = entry.containers.add(name=container).devices.add(resource_name=resource)
            devices.device_ids.extend(ids)
            devices.topology.nodes.add(ID=0)
        return response


@pytest.fixture
def kubelet(tmp_path: Path) -> Iterator[tuple[Kubelet, str]]:
    state = Kubelet()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler = grpc.unary_unary_rpc_method_handler(
        state.list,
        request_deserializer=pb.ListPodResourcesRequest.FromString,
        response_serializer=pb.ListPodResourcesResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("v1.PodResourcesLister", {"List": handler}),))
    socket = tmp_path / "pod-resources" / "kubelet.sock"
    socket.parent.mkdir()
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    try:
        yield state, str(socket)
    finally:
        server.stop(grace=None)


def _recorded_pod(namespace: str, name: str) -> dict[str, Any] | None:
    """The API server's answer for one pod, from the recorded PodList."""
    for item in json.loads(PODS.read_text())["items"]:
        if (item["metadata"]["namespace"], item["metadata"]["name"]) == (namespace, name):
            return item  # type: ignore[no-any-return]
    return None


def test_list_over_the_unix_socket(kubelet: tuple[Kubelet, str]) -> None:
    state, socket = kubelet
    state.pods = [
        ("team-a", "llm-0", "main", "nvidia.com/gpu", ["GPU-0", "GPU-1"]),
        ("serving", "vllm-1", "vllm", "nvidia.com/mig-3g.40gb", ["MIG-aaaa"]),
        ("infra", "nic", "agent", "rdma/hca", ["mlx5_0"]),  # not a GPU: left out
    ]
    client = PodResourcesClient(socket)
    try:
        listed = client.list()
    finally:
        client.close()
    assert [(d.namespace, d.pod, d.resource, d.device_ids) for d in listed] == [
        ("team-a", "llm-0", "nvidia.com/gpu", ("GPU-0", "GPU-1")),
        ("serving", "vllm-1", "nvidia.com/mig-3g.40gb", ("MIG-aaaa",)),
    ]


def test_device_id_forms() -> None:
    assert device_keys("GPU-8b1c") == ["uuid:GPU-8b1c"] and device_keys("GPU-8b1c::3") == ["uuid:GPU-8b1c"]
    assert device_keys("MIG-5f0e") == ["uuid:MIG-5f0e"]
    assert device_keys("MIG-GPU-8b1c/1/0") == ["migof:GPU-8b1c/1"]
    assert device_keys("3") == ["gpu:3"] and device_keys("nvidia3") == ["gpu:3"]
    assert device_keys("nvidia0/gi2") == ["gpu:0.2"] and device_keys("nvidia0/gi2/vgpu1") == ["gpu:0.2"]
    assert device_keys("weird") == []


def _source(fake: ModuleType, gpus: list[object], resolver: JobResolver) -> NvmlSource:
    fake.reset(gpus)  # type: ignore[attr-defined]
    return NvmlSource(NvmlApi.load(), xid_poll_ms=20, resolver=resolver)


def test_nvml_gpus_are_attributed_to_the_pods_jobs(
    kubelet: tuple[Kubelet, str], fake_nvml: ModuleType, proc_root: Callable[..., Path]
) -> None:
    state, socket = kubelet
    state.pods = [
        ("team-a", "llm-pretrain-workers-0-0-q8z2k", "main", "nvidia.com/gpu", ["GPU-0", "GPU-1"]),
        ("serving", "vllm-7d9f8b6c5d-abcde", "vllm", "nvidia.com/mig-3g.40gb", ["MIG-aaaa"]),
        ("team-b", "finetune-master-0", "pytorch", "nvidia.com/gpu", ["nvidia3"]),  # GKE's id form
        ("team-z", "no-such-pod", "main", "nvidia.com/gpu", ["GPU-4::1"]),  # time-sliced replica
    ]
    root = proc_root(100, {"MFUMON_JOB_ID": "explicit-run"})
    proc_root(200, {"SLURM_JOB_ID": "9"})
    client = PodResourcesClient(socket)
    devices = DeviceJobs(client.list, PodOwners(_recorded_pod))
    gpus = [
        fake_nvml.FakeGpu(uuid="GPU-0", processes=[(200, 1024)]),  # pod-resources beats a scheduler variable
        fake_nvml.FakeGpu(uuid="GPU-1", processes=[(100, 1024)]),  # MFUMON_JOB_ID beats everything
        fake_nvml.FakeGpu(uuid="GPU-2", mig=[fake_nvml.FakeMig("MIG-aaaa", "3g.40gb", 1)]),
        fake_nvml.FakeGpu(uuid="GPU-3"),
        fake_nvml.FakeGpu(uuid="GPU-4"),
        fake_nvml.FakeGpu(uuid="GPU-5"),
    ]
    source = _source(fake_nvml, gpus, JobResolver(root, devices=devices))
    try:
        samples = source.collect()
    finally:
        source.close()
        client.close()
    assert [(s.uuid, s.job_id) for s in samples] == [
        ("GPU-0", "team-a:llm-pretrain"),  # the JobSet, from the pod's labels
        ("GPU-1", "explicit-run"),
        ("MIG-aaaa", "serving:vllm"),  # the Deployment behind the ReplicaSet
        ("GPU-3", "team-b:finetune"),
        ("GPU-4", "team-z:no-such-pod"),  # the API server does not know it: the pod name
        ("GPU-5", None),
    ]


def test_a_failing_kubelet_attributes_nothing_and_recovers(kubelet: tuple[Kubelet, str], tmp_path: Path) -> None:
    state, socket = kubelet
    state.pods = [("ns", "p", "c", "nvidia.com/gpu", ["GPU-0"])]
    broken = PodResourcesClient(str(tmp_path / "nothing-here.sock"), timeout_seconds=0.5)
    devices = DeviceJobs(broken.list, max_age_seconds=0.0)
    assert devices.job_for("GPU-0", "0") is None
    good = PodResourcesClient(socket)
    devices = DeviceJobs(good.list, max_age_seconds=0.0)
    assert devices.job_for("GPU-0", "0") == "ns:p"
    broken.close()
    good.close()


def test_descriptor_matches_the_proto_file(tmp_path: Path) -> None:
    out = tmp_path / "api.desc"
    done = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO.parent}", f"--descriptor_set_out={out}", PROTO.name],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    compiled = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    built = pb.file_descriptor()

    def shape(proto: descriptor_pb2.FileDescriptorProto) -> Any:
        messages = {
            m.name: [(f.name, f.number, f.label, f.type, f.type_name) for f in m.field] for m in proto.message_type
        }
        methods = [(s.name, m.name, m.input_type, m.output_type) for s in proto.service for m in s.method]
        return proto.package, messages, methods

    assert shape(built) == shape(compiled)


def test_refresh_is_throttled(kubelet: tuple[Kubelet, str]) -> None:
    state, socket = kubelet
    client = PodResourcesClient(socket)
    devices = DeviceJobs(client.list, max_age_seconds=60.0)
    for index in range(8):
        devices.job_for(f"GPU-{index}", str(index))
    client.close()
    assert state.calls == 1  # one List per collection cycle, not one per GPU
