"""Settings of ``mfumon exporter``: environment (``MFUMON_*``) overridden by command-line flags.

One pydantic-settings class holds every option with its default; :func:`build_parser` declares the flags in the
exporter conventions (``--web.listen-address``, ``--dcgm.url``, ...) with no defaults of their own, and
:func:`load_settings` passes only the flags given, so a flag beats its environment variable, which beats the default.
"""

from __future__ import annotations

import argparse
import re
import socket
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from mfumon.exporter.errors import ConfigError
from mfumon.exporter.samples import sanitize_id

__all__ = ["Settings", "build_parser", "load_settings", "parse_size"]

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(text: str | int) -> int:
    """``"64MiB"``, ``"512k"``, ``"1G"`` or a plain number of bytes -> bytes (binary multiples)."""
    if isinstance(text, int):
        return text
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"not a size: {text!r} (try 64MiB)")
    unit = (match.group(2) or "").lower()[:1]
    return int(float(match.group(1)) * _UNITS[unit])


class Settings(BaseSettings):
    """Every exporter option; environment variables are ``MFUMON_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix="MFUMON_", extra="ignore", env_ignore_empty=True)

    URL: str = "http://127.0.0.1:8000"
    TOKEN: SecretStr | None = None
    TOKEN_FILE: Path | None = None
    INTERVAL: float = Field(10.0, gt=0, le=3600)
    NODE: str = Field(default_factory=socket.gethostname)
    POOL: str | None = None
    SOURCE: Literal["auto", "nvml", "dcgm", "sim"] = "auto"
    SPOOL_DIR: Path | None = None
    SPOOL_MAX_BYTES: int = Field(64 * 1024**2, gt=0)
    JOB_MAPPING_DIR: Path | None = None
    PROC_ROOT: Path = Path("/proc")
    # Kubernetes: the kubelet's pod-resources socket, read when it exists ("" turns it off).
    POD_RESOURCES_SOCKET: str = "/var/lib/kubelet/pod-resources/kubelet.sock"
    LISTEN_ADDRESS: str = ":9428"
    DCGM_URL: str = "http://127.0.0.1:9400/metrics"
    IB_ROOT: Path = Path("/sys/class/infiniband")
    IB_PORTS: str = "*"  # comma-separated shell patterns of "<device>:<port>" to read; "" reads none
    PUSH_TIMEOUT: float = Field(5.0, gt=0)
    BACKOFF_MAX: float = Field(30.0, gt=0)
    SIM_MODEL: str = "NVIDIA H100 80GB HBM3"
    SIM_GPUS: int = Field(8, ge=1, le=64)
    SIM_PROFILE: Literal["training", "comm_bound", "inference", "idle"] = "training"
    SIM_MFU: float = Field(0.4, ge=0, le=1)
    SIM_SEED: int = 0
    LOG_LEVEL: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # Serving engines (exporter/node/inference): endpoint specs separated by whitespace, and local discovery.
    INFERENCE_URLS: str = ""
    INFERENCE_DISCOVERY: Literal["local", "off"] = "local"
    INFERENCE_INTERVAL: float | None = Field(None, gt=0, le=3600)
    INFERENCE_TOKEN_FILE: Path | None = None
    # NCCL Inspector's dump directory (exporter/node/nccl_inspector): JSON lines or Prometheus textfiles; None: off.
    NCCL_INSPECTOR_DIR: Path | None = None

    @field_validator("SPOOL_MAX_BYTES", mode="before")
    @classmethod
    def _size(cls, value: object) -> object:
        return parse_size(value) if isinstance(value, str) else value

    @field_validator("LOG_LEVEL", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("NODE")
    @classmethod
    def _node_name(cls, value: str) -> str:
        clean = sanitize_id(value)
        if clean is None:
            raise ValueError(f"node name {value!r} has no usable characters")
        return clean

    @field_validator("URL")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"aggregator URL must start with http:// or https://, got {value!r}")
        return value.rstrip("/")

    def ib_patterns(self) -> tuple[str, ...]:
        return tuple(p.strip() for p in self.IB_PORTS.split(",") if p.strip())

    def token(self) -> str | None:
        """The ingest token: the token file wins over ``MFUMON_TOKEN``; ``ConfigError`` if the file is unreadable."""
        if self.TOKEN_FILE is not None:
            try:
                return self.TOKEN_FILE.read_text().strip() or None
            except OSError as exc:
                raise ConfigError(f"cannot read token file {self.TOKEN_FILE}: {exc}") from exc
        return self.TOKEN.get_secret_value() if self.TOKEN is not None else None

    def inference_token(self) -> str | None:
        """The token for inference reports: its own file (a token allowed to write jobs), else the ingest token."""
        if self.INFERENCE_TOKEN_FILE is None:
            return self.token()
        try:
            return self.INFERENCE_TOKEN_FILE.read_text().strip() or None
        except OSError as exc:
            raise ConfigError(f"cannot read inference token file {self.INFERENCE_TOKEN_FILE}: {exc}") from exc


#: flag -> Settings field
_FLAGS: dict[str, str] = {
    "web.listen_address": "LISTEN_ADDRESS",
    "url": "URL",
    "token_file": "TOKEN_FILE",
    "interval": "INTERVAL",
    "node": "NODE",
    "pool": "POOL",
    "source": "SOURCE",
    "spool_dir": "SPOOL_DIR",
    "spool_max_bytes": "SPOOL_MAX_BYTES",
    "job_mapping_dir": "JOB_MAPPING_DIR",
    "proc_root": "PROC_ROOT",
    "pod_resources_socket": "POD_RESOURCES_SOCKET",
    "dcgm.url": "DCGM_URL",
    "ib.root": "IB_ROOT",
    "ib.ports": "IB_PORTS",
    "push.timeout": "PUSH_TIMEOUT",
    "push.backoff_max": "BACKOFF_MAX",
    "sim.model": "SIM_MODEL",
    "sim.gpus": "SIM_GPUS",
    "sim.profile": "SIM_PROFILE",
    "sim.mfu": "SIM_MFU",
    "sim.seed": "SIM_SEED",
    "log.level": "LOG_LEVEL",  # the old spelling, kept as a hidden alias
    "log_level": "LOG_LEVEL",
    "inference.discovery": "INFERENCE_DISCOVERY",
    "inference.interval": "INFERENCE_INTERVAL",
    "inference.token_file": "INFERENCE_TOKEN_FILE",
    "nccl_inspector.dir": "NCCL_INSPECTOR_DIR",
}


def build_parser() -> argparse.ArgumentParser:
    """The ``mfumon exporter`` argument parser (defaults come from :class:`Settings`, shown in --help)."""
    p = argparse.ArgumentParser(
        prog="mfumon exporter",
        description="Read GPU counters on this node and push them to the mfu-monitor aggregator. "
        "Every flag has an environment variable MFUMON_<NAME> (e.g. MFUMON_URL, MFUMON_SPOOL_DIR).",
    )
    add = p.add_argument
    add("--url", help="aggregator base URL [MFUMON_URL, default http://127.0.0.1:8000]")
    add("--token-file", help="file holding the ingest bearer token [MFUMON_TOKEN_FILE; or MFUMON_TOKEN]")
    add("--interval", type=float, help="seconds between collections [MFUMON_INTERVAL, default 10]")
    add("--node", help="node name reported to the aggregator [MFUMON_NODE, default: hostname]")
    add("--pool", help="pool (partition, node group) this node belongs to [MFUMON_POOL]")
    add(
        "--source",
        choices=("auto", "nvml", "amdsmi", "dcgm", "sim"),
        help="counter source [MFUMON_SOURCE, default auto]",
    )
    add("--spool-dir", help="directory for undelivered batches [MFUMON_SPOOL_DIR; default: in memory]")
    add("--spool-max-bytes", help="spool bound, e.g. 64MiB; oldest batches dropped beyond [default 64MiB]")
    add("--job-mapping-dir", help="HPC job mapping dir (dcgm-exporter format) [MFUMON_JOB_MAPPING_DIR]")
    add("--proc-root", help="where /proc is mounted (a container may mount the host's elsewhere)")
    add(
        "--pod-resources-socket",
        help="kubelet pod-resources socket, read when it exists; '' turns it off [MFUMON_POD_RESOURCES_SOCKET]",
    )
    add("--web.listen-address", help="address for /metrics and /healthz, '' disables [default :9428]")
    add("--dcgm.url", help="dcgm-exporter metrics URL [default http://127.0.0.1:9400/metrics]")
    add("--ib.root", help="InfiniBand/RoCE sysfs class directory [MFUMON_IB_ROOT, default /sys/class/infiniband]")
    add("--ib.ports", help="ports to read, e.g. 'mlx5_*:1' (comma separated, '' for none) [default *]")
    add("--push.timeout", type=float, help="seconds per push request [default 5]")
    add("--push.backoff-max", type=float, help="longest retry backoff in seconds [default 30]")
    add("--sim.model", help="simulated GPU model (NVML name) [default 'NVIDIA H100 80GB HBM3']")
    add("--sim.gpus", type=int, help="simulated GPUs on this node [default 8]")
    add("--sim.profile", choices=("training", "comm_bound", "inference", "idle"), help="simulated workload")
    add("--sim.mfu", type=float, help="target MFU of the simulated workload [default 0.4]")
    add("--sim.seed", type=int, help="seed of the simulation [default 0]")
    add("--log-level", metavar="LEVEL", help="DEBUG, INFO, WARNING or ERROR [MFUMON_LOG_LEVEL, default INFO]")
    add("--log.level", help=argparse.SUPPRESS)  # deprecated spelling of --log-level; kept so nothing breaks
    add("--once", action="store_true", help="read the GPUs over one second, print that JSON body to stdout and exit")
    inference = p.add_argument_group("serving engines (vLLM, SGLang, TGI): MFU, MBU and queue of inference jobs")
    inference.add_argument(
        "--inference.url",
        action="append",
        metavar="URL[,job_id=ID,model=PATH|REPO,...]",
        help="a serving engine's metrics URL with key=value options, values may hold spaces (repeatable) "
        "[MFUMON_INFERENCE_URLS: one per line, or spaces before each URL]",
    )
    inference.add_argument(
        "--inference.discovery",
        choices=("local", "off"),
        help="find vLLM/SGLang/TGI processes on this node and read them [default local]",
    )
    inference.add_argument("--inference.interval", type=float, help="seconds between reads [default: --interval]")
    inference.add_argument(
        "--inference.token-file", help="token for inference reports, one allowed to write jobs [default: --token-file]"
    )
    inference.add_argument(
        "--inference.list", action="store_true", help="print the serving endpoints found and one reading each, exit"
    )
    inspector = p.add_argument_group("NCCL Inspector: collective time and bandwidth per job and communicator")
    inspector.add_argument(
        "--nccl-inspector.dir",
        metavar="DIR",
        help="NCCL Inspector's dump directory (NCCL_INSPECTOR_DUMP_DIR): <host>-pid<pid>.log JSON lines or "
        "nccl_inspector_metrics_<uuid>.prom textfiles; --once prints what it reads [MFUMON_NCCL_INSPECTOR_DIR]",
    )
    return p


def load_settings(args: argparse.Namespace) -> Settings:
    """Settings from the environment with the given flags on top; ``ConfigError`` with a readable message."""
    given = {field: getattr(args, flag) for flag, field in _FLAGS.items() if getattr(args, flag, None) is not None}
    if getattr(args, "inference.url", None):
        given["INFERENCE_URLS"] = "\n".join(getattr(args, "inference.url"))
    try:
        return Settings(**given)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors())
        raise ConfigError(problems) from exc
