"""Find serving engines running on this node from ``/proc``: their command line, listening ports and environment.

A process is a serving engine when its command line is one of:

- vLLM: ``vllm serve MODEL``, ``python -m vllm.entrypoints.openai.api_server --model MODEL`` (port 8000 by default);
- SGLang: ``python -m sglang.launch_server --model-path MODEL --enable-metrics`` (port 30000; metrics need the flag);
- TGI: ``text-generation-launcher --model-id MODEL`` (port 3000; its router serves ``/metrics`` there).

Its metrics URL is ``http://127.0.0.1:<port>/metrics``, once that port is among the process tree's listening sockets
(so an engine still loading weights is picked up on a later cycle). The job id comes from the process environment by
the same rules as GPU attribution (``MFUMON_JOB_ID``, ``SLURM_JOB_ID``, ...), so the report meets the GPUs exporters
attribute to that job; the model from the command line (a local path, or a repo id in the process's Hugging Face
cache); GPUs from the parallel sizes; the KV-cache and weight dtypes from ``--kv-cache-dtype`` and ``--quantization``.

Only processes in this agent's network namespace are reachable on 127.0.0.1: bare metal, Slurm, ``--network host``
containers. Reading another user's ``/proc/<pid>/environ`` and ``fd`` needs root or CAP_SYS_PTRACE (the agent's
usual privileges, see deploy/EXPORTER.md); without them the port comes from the command line and the job id from the
fallback ``<node>-<engine>-<port>``. Pods in their own network namespace are configured with ``--inference.url``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mfumon.exporter.node.attribution import job_id_from_environ, read_environ
from mfumon.exporter.node.inference.endpoints import InferenceEndpoint, describe_model

__all__ = ["ServingProcess", "discover_endpoints", "find_serving_processes", "listening_ports"]

logger = logging.getLogger(__name__)

_DEFAULT_PORTS = {"vllm": 8000, "sglang": 30000, "tgi": 3000}
#: engine -> flag spellings of (model, port, tensor parallel, pipeline parallel, data parallel, KV dtype, quantisation)
_FLAGS: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {
        "model": ("--model",),
        "port": ("--port",),
        "tp": ("--tensor-parallel-size", "-tp"),
        "pp": ("--pipeline-parallel-size", "-pp"),
        "dp": ("--data-parallel-size", "-dp"),
        "kv": ("--kv-cache-dtype",),
        "quant": ("--quantization", "-q"),
    },
    "sglang": {
        "model": ("--model-path", "--model"),
        "port": ("--port",),
        "tp": ("--tp-size", "--tensor-parallel-size", "--tp"),
        "pp": ("--pp-size", "--pipeline-parallel-size"),
        "dp": ("--dp-size", "--data-parallel-size", "--dp"),
        "kv": ("--kv-cache-dtype",),
        "quant": ("--quantization",),
    },
    "tgi": {
        "model": ("--model-id",),
        "port": ("--port", "-p"),
        "tp": ("--num-shard",),
        "pp": (),
        "dp": (),
        "kv": ("--kv-cache-dtype",),
        "quant": ("--quantize",),
    },
}
#: --quantization / --quantize values -> how the weights are stored
_QUANT_DTYPES = {
    "fp8": "fp8",
    "fbgemm_fp8": "fp8",
    "modelopt": "fp8",
    "awq": "int4",
    "awq_marlin": "int4",
    "gptq": "int4",
    "gptq_marlin": "int4",
    "marlin": "int4",
    "bitsandbytes": "int4",
    "bitsandbytes-nf4": "int4",
    "bitsandbytes-fp4": "fp4",
    "eetq": "int8",
    "exl2": "int4",
    "mxfp4": "fp4",
}


@dataclass(frozen=True)
class ServingProcess:
    """A serving engine's main process as its command line describes it."""

    pid: int
    engine: str
    argv: tuple[str, ...]

    def flag(self, name: str) -> str | None:
        """The value of one of the engine's spellings of flag ``name`` (``--port 8000`` or ``--port=8000``)."""
        spellings = _FLAGS[self.engine][name]
        for index, arg in enumerate(self.argv):
            for spelling in spellings:
                if arg == spelling and index + 1 < len(self.argv):
                    return self.argv[index + 1]
                if arg.startswith(spelling + "="):
                    return arg.split("=", 1)[1]
        return None

    @property
    def port(self) -> int:
        value = self.flag("port")
        return int(value) if value and value.isdigit() else _DEFAULT_PORTS[self.engine]

    @property
    def model(self) -> str | None:
        if self.engine == "vllm" and "serve" in self.argv:
            after = self.argv[self.argv.index("serve") + 1 :]
            if after and not after[0].startswith("-"):
                return after[0]
        return self.flag("model")

    @property
    def num_gpus(self) -> int:
        sizes = [self.flag(name) for name in ("tp", "pp", "dp")]
        product = 1
        for size in sizes:
            product *= int(size) if size and size.isdigit() else 1
        return product


def engine_of(argv: Sequence[str]) -> str | None:
    """Which engine's main process a command line starts, if any."""
    for index, arg in enumerate(argv[:3]):
        name = os.path.basename(arg)
        if name in ("vllm", "sglang") and argv[index + 1 : index + 2] == ("serve",):
            return name  # `vllm serve MODEL`, `sglang serve` (not `vllm bench serve`)
    if any(arg.startswith("vllm.entrypoints.") and arg.endswith("api_server") for arg in argv[:4]):
        return "vllm"
    if "sglang.launch_server" in argv[:4]:
        return "sglang"
    if argv and os.path.basename(argv[0]) == "text-generation-launcher":
        return "tgi"
    return None


def find_serving_processes(proc_root: Path) -> list[ServingProcess]:
    """Every serving engine main process under ``proc_root``, by pid."""
    found = []
    for entry in proc_root.iterdir() if proc_root.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        argv = tuple(part.decode(errors="replace") for part in raw.split(b"\0") if part)
        engine = engine_of(argv)
        if engine is not None:
            found.append(ServingProcess(int(entry.name), engine, argv))
    return sorted(found, key=lambda process: process.pid)


def listening_ports(proc_root: Path, pid: int) -> set[int] | None:
    """TCP ports the process and its children listen on, or None when its sockets cannot be read."""
    pids = [pid, *_children(proc_root, pid)]
    inodes: set[str] = set()
    readable = False
    for member in pids:
        try:
            fds = list((proc_root / str(member) / "fd").iterdir())
        except OSError:
            continue
        readable = True
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    if not readable:
        return None
    ports: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc_root / str(pid) / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and fields[9] in inodes:  # 0A = TCP_LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def _children(proc_root: Path, pid: int) -> list[int]:
    children: list[int] = []
    for task in (proc_root / str(pid) / "task").glob("*/children"):
        try:
            children += [int(child) for child in task.read_text().split()]
        except (OSError, ValueError):
            continue
    return children


def same_network_namespace(proc_root: Path, pid: int) -> bool:
    """False when the process sits in another network namespace (127.0.0.1 is not its loopback)."""
    try:
        return os.readlink(proc_root / str(pid) / "ns" / "net") == os.readlink(proc_root / "self" / "ns" / "net")
    except OSError:
        return True  # cannot tell: try it


def discover_endpoints(proc_root: Path, node: str) -> list[InferenceEndpoint]:
    """An endpoint per serving engine on this node that listens on its port in our network namespace."""
    endpoints = []
    for process in find_serving_processes(proc_root):
        port = process.port
        ports = listening_ports(proc_root, process.pid)
        if ports is not None and port not in ports:
            logger.debug("%s (pid %d) does not listen on %d yet", process.engine, process.pid, port)
            continue
        if not same_network_namespace(proc_root, process.pid):
            logger.debug(
                "%s (pid %d) is in another network namespace: configure --inference.url", process.engine, process.pid
            )
            continue
        endpoints.append(_endpoint(proc_root, process, port, node))
    return endpoints


def _endpoint(proc_root: Path, process: ServingProcess, port: int, node: str) -> InferenceEndpoint:
    env = read_environ(proc_root, process.pid)
    job_id = job_id_from_environ(env) if env else None
    model, weight_dtype = (None, None)
    if process.model:
        model, weight_dtype = describe_model(process.model, env or {})
    quant = process.flag("quant")
    kv_dtype = process.flag("kv")
    return InferenceEndpoint(
        url=f"http://127.0.0.1:{port}/metrics",
        job_id=job_id or f"{node}-{process.engine}-{port}",
        engine=process.engine,
        model=model,
        weight_dtype=_QUANT_DTYPES.get(quant or "", weight_dtype),
        kv_cache_dtype="fp8" if kv_dtype and kv_dtype.startswith("fp8") else None,
        num_gpus=process.num_gpus if job_id is None else None,  # an attributed job's GPUs come from the exporters
        origin=f"process {process.pid}",
    )
