"""The pod-resources v1 messages (``api.proto`` beside this file), built from a descriptor written in Python.

No generated ``_pb2`` module: generated code pins the protobuf runtime to the version of the protoc that made it,
and GPU nodes install whatever protobuf their other software needs. The descriptor below is ``api.proto``
field for field (a test compiles the .proto with grpc_tools and compares).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_T = descriptor_pb2.FieldDescriptorProto
_FILE = "mfumon/podresources/v1/api.proto"


def _message(name: str, *fields: tuple[str, int, int, int, str]) -> descriptor_pb2.DescriptorProto:
    message = descriptor_pb2.DescriptorProto(name=name)
    for field_name, number, label, kind, type_name in fields:
        field = message.field.add(name=field_name, number=number, label=label, type=kind)
        if type_name:
            field.type_name = type_name
    return message


def file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    one, many = _T.LABEL_OPTIONAL, _T.LABEL_REPEATED
    string, int64, msg = _T.TYPE_STRING, _T.TYPE_INT64, _T.TYPE_MESSAGE
    proto = descriptor_pb2.FileDescriptorProto(name=_FILE, package="v1", syntax="proto3")
    proto.message_type.extend(
        [
            _message("ListPodResourcesRequest"),
            _message("ListPodResourcesResponse", ("pod_resources", 1, many, msg, ".v1.PodResources")),
            _message(
                "PodResources",
                ("name", 1, one, string, ""),
                ("namespace", 2, one, string, ""),
                ("containers", 3, many, msg, ".v1.ContainerResources"),
            ),
            _message(
                "ContainerResources",
                ("name", 1, one, string, ""),
                ("devices", 2, many, msg, ".v1.ContainerDevices"),
                ("cpu_ids", 3, many, int64, ""),
            ),
            _message(
                "ContainerDevices",
                ("resource_name", 1, one, string, ""),
                ("device_ids", 2, many, string, ""),
                ("topology", 3, one, msg, ".v1.TopologyInfo"),
            ),
            _message("TopologyInfo", ("nodes", 1, many, msg, ".v1.NUMANode")),
            _message("NUMANode", ("ID", 1, one, int64, "")),
        ]
    )
    service = proto.service.add(name="PodResourcesLister")
    service.method.add(
        name="List", input_type=".v1.ListPodResourcesRequest", output_type=".v1.ListPodResourcesResponse"
    )
    return proto


def _classes() -> dict[str, Any]:
    pool = descriptor_pool.DescriptorPool()  # a private pool: no clash with another copy of the same API
    pool.Add(file_descriptor())
    names = ("ListPodResourcesRequest", "ListPodResourcesResponse", "PodResources", "ContainerResources")
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"v1.{name}")) for name in names}


_CLASSES = _classes()
ListPodResourcesRequest = _CLASSES["ListPodResourcesRequest"]
ListPodResourcesResponse = _CLASSES["ListPodResourcesResponse"]
PodResources = _CLASSES["PodResources"]
ContainerResources = _CLASSES["ContainerResources"]
LIST_METHOD = "/v1.PodResourcesLister/List"
