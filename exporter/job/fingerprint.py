"""The job's software, collected once at start: what a regression across an upgrade is traced to (issue 59).

Python; PyTorch with the CUDA (or ROCm/HIP) it was built for, cuDNN and NCCL (RCCL on ROCm); the GPU driver (NVML,
else amdsmi); the frameworks this process has imported, with their versions; the container image where the
environment names it (NGC containers' ``NVIDIA_PYTORCH_VERSION``/``NVIDIA_BUILD_ID``, ``MFUMON_CONTAINER_IMAGE``) and
the container id from ``/proc/self/cgroup``; and the user's tags (``--tag key=value``). Every probe is guarded: a
library missing, NVML without a GPU, an unreadable file leaves that entry out. Nothing raises, and nothing is imported
that the job did not import already (frameworks are looked up in ``sys.modules``), so collecting costs the training
step nothing and can never stop it.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import platform
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

logger = logging.getLogger("mfumon.exporter.job")

#: Frameworks whose version is recorded when the job has imported them: module name -> distribution name.
FRAMEWORKS = {
    "transformers": "transformers",
    "accelerate": "accelerate",
    "peft": "peft",
    "trl": "trl",
    "deepspeed": "deepspeed",
    "lightning": "lightning",
    "pytorch_lightning": "pytorch-lightning",
    "megatron.core": "megatron-core",
    "nemo": "nemo-toolkit",
    "torchtitan": "torchtitan",
    "torchtune": "torchtune",
    "flash_attn": "flash-attn",
    "transformer_engine": "transformer-engine",
    "apex": "apex",
    "vllm": "vllm",
    "sglang": "sglang",
    "jax": "jax",
}
#: How many entries, and how long, a fingerprint may be (the aggregator enforces the same).
MAX_ENTRIES = 64
MAX_KEY = 64
MAX_VALUE = 256
TAG_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,59}$")
_CONTAINER_ID = re.compile(r"(?:docker|containerd|cri-containerd|crio|libpod)[-/:]([0-9a-f]{64})")


def parse_tag(text: str) -> tuple[str, str]:
    """``key=value`` -> (key, value); ``ValueError`` saying what a tag must look like."""
    key, sep, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if not sep or not TAG_KEY.match(key) or not value or len(value) > MAX_VALUE:
        raise ValueError(
            f"tag {text!r} is not key=value (a key of letters, digits, '_', '.', '-', starting with a letter or '_', "
            f"up to 60 characters; a value of 1 to {MAX_VALUE} characters)"
        )
    return key, value


def _torch(out: dict[str, str]) -> None:
    torch = sys.modules.get("torch")
    if torch is None:
        return
    out["pytorch"] = str(torch.__version__)
    version = getattr(torch, "version", None)
    if getattr(version, "cuda", None):
        out["cuda"] = str(version.cuda)  # type: ignore[union-attr]
    if getattr(version, "hip", None):
        out["rocm"] = str(version.hip)  # type: ignore[union-attr]
    with suppress(Exception):
        cudnn = torch.backends.cudnn.version()
        if cudnn:
            out["cudnn"] = str(cudnn)
    with suppress(Exception):
        nccl = torch.cuda.nccl.version()
        name = "rccl" if out.get("rocm") else "nccl"
        out[name] = ".".join(str(part) for part in nccl) if isinstance(nccl, tuple) else str(nccl)


def _driver(out: dict[str, str]) -> None:
    with suppress(Exception):
        import pynvml

        pynvml.nvmlInit()
        try:
            driver = pynvml.nvmlSystemGetDriverVersion()
            out["driver"] = driver.decode() if isinstance(driver, bytes) else str(driver)
        finally:
            pynvml.nvmlShutdown()
        return
    with suppress(Exception):
        import amdsmi

        amdsmi.amdsmi_init()
        try:
            handles = amdsmi.amdsmi_get_processor_handles()
            info = amdsmi.amdsmi_get_gpu_driver_info(handles[0])
            out["driver"] = str(info["driver_version"])
        finally:
            amdsmi.amdsmi_shut_down()


def _frameworks(out: dict[str, str]) -> None:
    for module, distribution in FRAMEWORKS.items():
        if module not in sys.modules:
            continue
        with suppress(Exception):
            out[distribution] = importlib.metadata.version(distribution)
            continue
        with suppress(Exception):
            out[distribution] = str(sys.modules[module].__version__)


_CUDA_SUFFIX = re.compile(r"\+cu(\d+)(\d)$")
_WHEELS = {"nccl": ("nvidia-nccl-cu12", "nvidia-nccl-cu11"), "cudnn": ("nvidia-cudnn-cu12", "nvidia-cudnn-cu11")}


def installed(out: dict[str, str]) -> None:
    """What is installed beside this process, for ``mfumon wrap``, which runs the training in a child and imports
    nothing of it: PyTorch (and the CUDA its wheel was built for, ``+cu124``), the NCCL and cuDNN wheels, and the
    frameworks, from the installed distributions' metadata."""
    with suppress(importlib.metadata.PackageNotFoundError):
        torch = importlib.metadata.version("torch")
        out["pytorch"] = torch
        found = _CUDA_SUFFIX.search(torch)
        if found:
            out["cuda"] = f"{found.group(1)}.{found.group(2)}"
    for name, wheels in _WHEELS.items():
        for wheel in wheels:
            with suppress(importlib.metadata.PackageNotFoundError):
                out[name] = importlib.metadata.version(wheel)
                break
    for distribution in FRAMEWORKS.values():
        with suppress(importlib.metadata.PackageNotFoundError):
            out[distribution] = importlib.metadata.version(distribution)


def _container(out: dict[str, str], environ: Mapping[str, str], cgroup: Path) -> None:
    image = environ.get("MFUMON_CONTAINER_IMAGE")
    if image:
        out["container_image"] = image
    elif environ.get("NVIDIA_PYTORCH_VERSION"):  # NGC's PyTorch containers: nvcr.io/nvidia/pytorch:<version>-py3
        out["container_image"] = f"nvcr.io/nvidia/pytorch:{environ['NVIDIA_PYTORCH_VERSION']}-py3"
    if environ.get("NVIDIA_BUILD_ID"):
        out["container_build"] = environ["NVIDIA_BUILD_ID"]
    with suppress(OSError):
        found = _CONTAINER_ID.search(cgroup.read_text(errors="replace"))
        if found:
            out["container_id"] = found.group(1)[:12]


#: The probes of a reporter inside the training process (what it imported), and of ``mfumon wrap`` (what is installed).
IMPORTED: tuple[Callable[[dict[str, str]], None], ...] = (_torch, _driver, _frameworks)
INSTALLED: tuple[Callable[[dict[str, str]], None], ...] = (installed, _driver)


def collect(
    tags: Iterable[tuple[str, str]] = (),
    *,
    environ: Mapping[str, str] | None = None,
    cgroup: Path = Path("/proc/self/cgroup"),
    probes: Iterable[Callable[[dict[str, str]], None]] = IMPORTED,
) -> dict[str, str]:
    """The fingerprint: component -> version (strings), the user's tags as ``tag.<key>``. Never raises."""
    out: dict[str, str] = {"python": platform.python_version()}
    for probe in probes:
        try:
            probe(out)
        except Exception as exc:  # a probe is best effort: the job must run whatever a library does
            logger.debug("mfumon: software probe %s failed: %s", getattr(probe, "__name__", probe), exc)
    try:
        _container(out, os.environ if environ is None else environ, cgroup)
    except Exception as exc:
        logger.debug("mfumon: container probe failed: %s", exc)
    for key, value in tags:
        out[f"tag.{key}"] = value
    return bounded(out)


def bounded(fingerprint: Mapping[str, Any]) -> dict[str, str]:
    """At most `MAX_ENTRIES` entries, keys and values cut to their limits: what the aggregator accepts."""
    out: dict[str, str] = {}
    for key, value in list(fingerprint.items())[:MAX_ENTRIES]:
        out[str(key)[:MAX_KEY]] = str(value)[:MAX_VALUE]
    return out
