"""Counter sources: where a node's GPU samples come from.

- ``nvml``: the NVIDIA driver's NVML library through pynvml (the default when it loads); GPM metrics on Hopper+.
- ``amdsmi``: AMD Instinct GPUs through ROCm's ``amdsmi`` library (``auto`` tries it after NVML).
- ``dcgm``: a local dcgm-exporter's ``/metrics`` text, mapped onto our counters.
- ``sim``: simulated GPUs with workload profiles, for demos and tests without hardware.

Each source has ``name``, ``error_count`` (per-device read failures so far, for the self-metrics), ``collect()``
returning one :class:`~mfumon.exporter.samples.GpuSample` per device, and ``close()``. A source that reads the node's
driver and firmware (NVML, amdsmi, sim; issue 59) also has ``software()``, returning the
:class:`~mfumon.exporter.samples.SoftwareEntry` tuple it read at enumeration, which every batch carries.
"""

from __future__ import annotations

import logging
from typing import Protocol

from mfumon.exporter.errors import ConfigError, DeviceError, SourceUnavailable
from mfumon.exporter.node.attribution import JobResolver
from mfumon.exporter.samples import GpuSample

__all__ = ["SOURCE_KINDS", "Source", "open_source"]

logger = logging.getLogger(__name__)

SOURCE_KINDS: tuple[str, ...] = ("auto", "nvml", "amdsmi", "dcgm", "sim")


class Source(Protocol):
    """What the agent needs from a counter source."""

    name: str
    error_count: int

    def collect(self) -> list[GpuSample]: ...

    def close(self) -> None: ...


def open_source(
    kind: str,
    *,
    node: str,
    resolver: JobResolver | None = None,
    dcgm_url: str = "http://127.0.0.1:9400/metrics",
    sim_model: str = "NVIDIA H100 80GB HBM3",
    sim_gpus: int = 8,
    sim_profile: str = "training",
    sim_mfu: float = 0.4,
    sim_seed: int = 0,
) -> Source:
    """Open the source ``kind``; ``auto`` tries NVML, then amdsmi, then a local dcgm-exporter.

    Raises:
        SourceUnavailable: the requested source (or, for ``auto``, every candidate) cannot be opened.
        ConfigError: ``kind`` is not one of :data:`SOURCE_KINDS`.
    """
    if kind not in SOURCE_KINDS:
        raise ConfigError(f"unknown source {kind!r} (choose from {', '.join(SOURCE_KINDS)})")
    if kind in ("nvml", "auto"):
        from mfumon.exporter.node.sources.nvml import NvmlSource
        from mfumon.exporter.node.sources.nvml_api import NvmlApi

        try:
            api = NvmlApi.load()
            try:
                return NvmlSource(api, resolver)
            except DeviceError as exc:  # NVML initialised but cannot even enumerate the GPUs
                api.shutdown()
                raise SourceUnavailable(f"NVML cannot enumerate the GPUs: {exc}") from exc
        except SourceUnavailable as exc:
            if kind == "nvml":
                raise
            logger.info("NVML unavailable (%s); trying amdsmi", exc)
    if kind in ("amdsmi", "auto"):
        from mfumon.exporter.node.sources.amdsmi import AmdSmiSource
        from mfumon.exporter.node.sources.amdsmi_api import AmdSmiApi

        try:
            amd = AmdSmiApi.load()
            try:
                devices = amd.devices()
            except DeviceError as exc:
                amd.shutdown()
                raise SourceUnavailable(f"amdsmi cannot enumerate the GPUs: {exc}") from exc
            if devices or kind == "amdsmi":
                return AmdSmiSource(amd, resolver)
            amd.shutdown()  # ROCm installed but no AMD GPU: not this node's source
            raise SourceUnavailable("amdsmi finds no AMD GPU")
        except SourceUnavailable as exc:
            if kind == "amdsmi":
                raise
            logger.info("amdsmi unavailable (%s); trying dcgm-exporter at %s", exc, dcgm_url)
    if kind in ("dcgm", "auto"):
        from mfumon.exporter.node.sources.dcgm import DcgmSource

        source = DcgmSource(dcgm_url, resolver)
        try:
            source.probe()
        except SourceUnavailable as exc:
            source.close()
            if kind == "dcgm":
                raise SourceUnavailable(
                    f"{exc}: start dcgm-exporter there, or point --dcgm.url (MFUMON_DCGM_URL) at it"
                ) from exc
            raise SourceUnavailable(
                f"no GPU source found: NVML and amdsmi did not load and no dcgm-exporter answers at {dcgm_url} "
                "(use --source sim for a simulated node)"
            ) from None
        return source
    from mfumon.exporter.node.sources.sim import SimSource, SimWorkload

    workload = SimWorkload(profile=sim_profile, target_mfu=sim_mfu)
    return SimSource(node=node, model=sim_model, count=sim_gpus, seed=sim_seed, workload=workload)
