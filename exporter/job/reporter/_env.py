"""Defaults a job reporter takes from its environment: job id, rank, world size, GPU model, URL and token.

Launchers name these differently (torchrun, Slurm, Open MPI, PBS, LSF), so each lookup is an ordered list of
variables; the first one set wins.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import uuid
from collections.abc import Mapping

from mfumon.exporter import auth

logger = logging.getLogger(__name__)

DEFAULT_URL = "http://127.0.0.1:8000"

# torchrun sets TORCHELASTIC_RUN_ID to "none" when no --rdzv-id is given: that is not an id.
_JOB_ID_VARS = ("MFUMON_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "PBS_JOBID", "LSB_JOBID", "JOB_ID")
_RANK_VARS = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
_WORLD_SIZE_VARS = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE")
_ID_DISALLOWED = re.compile(r"[^A-Za-z0-9._:@+\-]")


def sanitize_job_id(raw: str) -> str:
    """Map an id onto the aggregator's alphabet (``[A-Za-z0-9._:@+-]``, at most 128 characters)."""
    cleaned = _ID_DISALLOWED.sub("-", raw.strip())[:128]
    if not cleaned or not cleaned[0].isalnum():
        cleaned = ("j" + cleaned)[:128]
    return cleaned


def default_job_id(env: Mapping[str, str] | None = None) -> str:
    """The job id from the scheduler's environment, else a generated ``<host>-<random>`` id."""
    env = os.environ if env is None else env
    array_job, array_task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    if array_job and array_task and not env.get("MFUMON_JOB_ID"):
        return sanitize_job_id(f"{array_job}_{array_task}")  # the id squeue shows for an array task
    for name in _JOB_ID_VARS:
        value = env.get(name, "").strip()
        if value and value.lower() != "none":
            return sanitize_job_id(value)
    host = socket.gethostname().split(".")[0] or "job"
    return sanitize_job_id(f"{host}-{uuid.uuid4().hex[:10]}")


def _first_int(env: Mapping[str, str], names: tuple[str, ...]) -> int | None:
    for name in names:
        value = env.get(name, "").strip()
        if value.lstrip("-").isdigit():
            return int(value)
    return None


def default_rank(env: Mapping[str, str] | None = None) -> int:
    """This process's global rank (``RANK``, else ``LOCAL_RANK``, else the launcher's); 0 when alone."""
    return _first_int(os.environ if env is None else env, _RANK_VARS) or 0


def default_world_size(env: Mapping[str, str] | None = None) -> int | None:
    """Processes (normally one per GPU) in the job, from ``WORLD_SIZE`` or the launcher; None if unknown."""
    size = _first_int(os.environ if env is None else env, _WORLD_SIZE_VARS)
    return size if size and size > 0 else None


def detect_gpu_model() -> str | None:
    """``torch.cuda.get_device_name()`` when torch is already imported and sees a GPU, else None.

    torch is not imported here on purpose: a process that has not loaded it (``mfumon wrap``) should not pay
    seconds of import time, and the aggregator can attribute the GPU model from node exporters instead.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if torch.cuda.is_available():
            return str(torch.cuda.get_device_name())
    except Exception as exc:  # a broken driver must not stop the training job
        logger.debug("cannot read the CUDA device name: %s", exc)
    return None


_RESTART_COUNT_VARS = ("SLURM_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT")


def restart_count(env: Mapping[str, str] | None = None) -> int:
    """How often the scheduler or launcher restarted this job (Slurm requeue, torchrun worker restarts); 0 if none."""
    env = os.environ if env is None else env
    return max((_first_int(env, (name,)) or 0) for name in _RESTART_COUNT_VARS)


def process_start_time() -> float | None:
    """Wall-clock time this process started (Linux ``/proc``), for the start-up time; None elsewhere."""
    try:
        with open("/proc/self/stat", "rb") as stat_file:
            stat = stat_file.read()
        ticks = int(stat[stat.rindex(b")") + 2 :].split()[19])  # field 22, starttime, in clock ticks since boot
        with open("/proc/stat", "rb") as boot_file:
            boot = next(int(line.split()[1]) for line in boot_file if line.startswith(b"btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def default_url(env: Mapping[str, str] | None = None) -> str:
    """The aggregator URL from ``MFUMON_URL``, else loopback port 8000."""
    env = os.environ if env is None else env
    return (env.get("MFUMON_URL") or DEFAULT_URL).rstrip("/")


def read_token(token_file: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """The ingest token from ``token_file`` (first line), else ``MFUMON_TOKEN_FILE``'s file, else ``MFUMON_TOKEN``;
    None when none is set (the same rule on every subcommand: :func:`mfumon.exporter.auth.read_token`)."""
    return auth.read_token(token_file, env)
