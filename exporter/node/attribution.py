"""Which job a GPU belongs to: from its compute processes' environment, or from a scheduler mapping directory.

Precedence, first match wins (documented in the README and ``deploy/EXPORTER.md``):

1. ``MFUMON_JOB_ID`` in the environment of any compute process on the GPU: the user said so explicitly, and it is
   the id ``mfumon wrap`` reports under.
2. Kubernetes: the pod that the kubelet's pod-resources API says holds the GPU (by UUID, index or MIG instance),
   as its job (:mod:`mfumon.exporter.node.podresources`); it needs no process and no ``hostPID``.
3. The HPC job-mapping directory (``--job-mapping-dir``), the format dcgm-exporter's ``--hpc-job-mapping-dir`` reads:
   one file per GPU named by its index (``0``) or ``GPU.GI`` for a MIG instance (``2.1``), one job id per line,
   written by a Slurm prolog and removed by the epilog. The first non-empty line is used.
4. A scheduler's job id in a compute process's environment, in this order: ``SLURM_JOB_ID`` (an array task is
   ``<SLURM_ARRAY_JOB_ID>_<SLURM_ARRAY_TASK_ID>``, the id squeue and the job reporter use), ``PBS_JOBID``,
   ``LSB_JOBID`` (with ``_<LSB_JOBINDEX>`` for array elements), ``FLUX_JOB_ID``, ``COBALT_JOBID``, and ``JOB_ID``
   (Grid Engine; only together with ``SGE_ROOT`` or ``SGE_CELL``, since ``JOB_ID`` is a common name).

When several processes share a GPU, the one holding the most GPU memory decides ``job_id``; when they belong to two
or more jobs, the source also sends each job's share (:mod:`mfumon.exporter.node.sharing`, from each process's own
job, :meth:`JobResolver.process_job`). Reading ``/proc/<pid>/environ``
of another user's process needs root (or CAP_SYS_PTRACE), and in a container the host PID namespace (``hostPID``),
because NVML reports host PIDs. An unreadable or vanished process is skipped, never an error.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mfumon.exporter.samples import sanitize_id

__all__ = ["JOB_ID_ENV_VARS", "GpuProcess", "JobResolver", "job_id_from_environ", "read_environ"]

logger = logging.getLogger(__name__)

#: Scheduler variables checked after ``MFUMON_JOB_ID`` and the mapping directory, in order.
JOB_ID_ENV_VARS: tuple[str, ...] = (
    "SLURM_JOB_ID",
    "PBS_JOBID",
    "LSB_JOBID",
    "FLUX_JOB_ID",
    "COBALT_JOBID",
    "JOB_ID",
)
_EXPLICIT_VAR = "MFUMON_JOB_ID"
_SGE_MARKERS = ("SGE_ROOT", "SGE_CELL")
_CACHE_MAX = 4096


class DeviceOwners(Protocol):
    """Which job holds a device, as a device manager says (:class:`mfumon.exporter.node.podresources.DeviceJobs`)."""

    def job_for(
        self, uuid: str | None, gpu_key: str, parent_uuid: str | None = None, bdf: str | None = None
    ) -> str | None: ...


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A compute process NVML lists on a GPU."""

    pid: int
    used_memory_bytes: int | None = None


def read_environ(proc_root: Path, pid: int) -> dict[str, str] | None:
    """The environment of ``pid`` under ``proc_root``, or ``None`` when it cannot be read."""
    try:
        raw = (proc_root / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def job_id_from_environ(env: dict[str, str], *, explicit_only: bool = False) -> str | None:
    """The job id a process environment names (rules 1 and 3 of the module docstring)."""
    explicit = sanitize_id(env.get(_EXPLICIT_VAR))
    if explicit or explicit_only:
        return explicit
    for var in JOB_ID_ENV_VARS:
        value = env.get(var)
        if not value:
            continue
        if var == "JOB_ID" and not any(marker in env for marker in _SGE_MARKERS):
            continue
        if var == "LSB_JOBID" and env.get("LSB_JOBINDEX", "0") not in ("", "0"):
            value = f"{value}_{env['LSB_JOBINDEX']}"
        if var == "SLURM_JOB_ID" and env.get("SLURM_ARRAY_JOB_ID") and env.get("SLURM_ARRAY_TASK_ID"):
            value = f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"  # as squeue shows it
        job_id = sanitize_id(value)
        if job_id:
            return job_id
    return None


class JobResolver:
    """Maps a GPU (its index key and compute processes) to a job id.

    Args:
        proc_root: where ``<pid>/environ`` and ``<pid>/stat`` live; injectable so tests use a fixture tree.
        mapping_dir: the HPC job-mapping directory, or ``None``.
    """

    def __init__(
        self,
        proc_root: str | os.PathLike[str] = "/proc",
        mapping_dir: str | None = None,
        devices: DeviceOwners | None = None,
    ) -> None:
        self._proc_root = Path(proc_root)
        self._devices = devices
        self._mapping_dir = Path(mapping_dir) if mapping_dir else None
        self._env_cache: dict[tuple[int, str], tuple[str | None, str | None]] = {}
        self._warned_mapping = False

    def resolve(
        self,
        gpu_key: str,
        processes: Sequence[GpuProcess] = (),
        uuid: str | None = None,
        parent_uuid: str | None = None,
        bdf: str | None = None,
    ) -> str | None:
        """The job on the GPU whose mapping-file name is ``gpu_key`` (``"0"`` or ``"2.1"``), or ``None``; ``bdf``
        (PCI address) is how the Kubernetes AMD device plugin names a GPU."""
        ordered = sorted(processes, key=lambda p: (-(p.used_memory_bytes or 0), p.pid))
        ids = [self._process_ids(p.pid) for p in ordered]
        for explicit, _ in ids:
            if explicit:
                return explicit
        if self._devices is not None:
            held = self._devices.job_for(uuid, gpu_key, parent_uuid, bdf)
            if held:
                return held
        mapped = self.mapped_job(gpu_key)
        if mapped:
            return mapped
        for _, scheduler in ids:
            if scheduler:
                return scheduler
        return None

    def process_job(self, pid: int) -> str | None:
        """The job one process belongs to by its environment (``MFUMON_JOB_ID``, else a scheduler's id): what
        splits a GPU that several jobs share (:mod:`mfumon.exporter.node.sharing`)."""
        explicit, scheduler = self._process_ids(pid)
        return explicit or scheduler

    def mapped_job(self, gpu_key: str) -> str | None:
        """The first job id in the mapping file for ``gpu_key``, if the directory is configured and has one."""
        if self._mapping_dir is None:
            return None
        try:
            text = (self._mapping_dir / gpu_key).read_text(errors="replace")
        except FileNotFoundError:
            return None
        except OSError as exc:
            if not self._warned_mapping:
                logger.warning("cannot read job mapping %s: %s", self._mapping_dir / gpu_key, exc)
                self._warned_mapping = True
            return None
        for line in text.splitlines():
            job_id = sanitize_id(line)
            if job_id:
                return job_id
        return None

    def _process_ids(self, pid: int) -> tuple[str | None, str | None]:
        """``(explicit MFUMON_JOB_ID, scheduler id)`` of one process, cached by (pid, start time) when known."""
        start = self._start_time(pid)
        key = (pid, start or "")
        cached = self._env_cache.get(key) if start else None
        if cached is not None:
            return cached
        env = read_environ(self._proc_root, pid)
        if env is None:
            return (None, None)
        explicit = job_id_from_environ(env, explicit_only=True)
        result = (explicit, None) if explicit else (None, job_id_from_environ(env))
        if start:
            if len(self._env_cache) >= _CACHE_MAX:
                self._env_cache.clear()
            self._env_cache[key] = result
        return result

    def _start_time(self, pid: int) -> str | None:
        """Field 22 of ``/proc/<pid>/stat`` (start time in ticks): tells a reused PID from the old process."""
        try:
            stat = (self._proc_root / str(pid) / "stat").read_text(errors="replace")
        except OSError:
            return None
        # The command name (field 2) is in parentheses and may contain spaces: split after the last ')'.
        rest = stat.rpartition(")")[2].split()
        return rest[19] if len(rest) > 19 else ""
