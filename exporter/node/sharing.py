"""Which share of a GPU each job gets when several jobs' processes run on it (time-slicing, MPS, fractions).

The share of a job is its processes' part of the GPU's busy time, measured the best way the device allows:

1. ``process_utilization``: NVML's per-process utilization samples since the previous cycle
   (``nvmlDeviceGetProcessUtilization``: each sample is one process's SM utilization over a short window), summed
   per job. Time-sliced processes take turns on the SMs, so their utilizations add up to the GPU's.
2. ``accounting``: the per-process GPU utilization of NVML accounting (``nvidia-smi -am 1``), a lifetime average;
   used when there are no samples in the window (or all of them are zero).
3. ``equal_split``: every job gets the same share, when neither answers (stated in the sample, never silent).

Processes without a job id (a monitoring agent, a shell) take no share: the jobs' shares add up to 1. A MIG instance
is never split: it is an isolated slice, attributed whole as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mfumon.exporter.samples import JobShare

__all__ = ["split_gpu"]


def split_gpu(
    jobs_by_pid: Mapping[int, str],
    measures: list[tuple[str, Callable[[], Mapping[int, float] | None]]],
    prefer: str | None = None,
) -> tuple[JobShare, ...] | None:
    """The jobs' shares of one GPU, largest first (ties: ``prefer``, the job the attribution rules name, then by
    id); ``None`` when fewer than two jobs run on it.

    ``measures``: ``(method, read)`` in order of preference; ``read`` returns busy weights per pid, or ``None``
    when the method cannot answer. The first whose weights over the jobs' processes add up to more than 0 wins.
    """
    jobs = sorted(set(jobs_by_pid.values()))
    if len(jobs) < 2:
        return None
    for method, read in measures:
        weights = read()
        if not weights:
            continue
        per_job = dict.fromkeys(jobs, 0.0)
        for pid, weight in weights.items():
            job = jobs_by_pid.get(pid)
            if job is not None and weight > 0:
                per_job[job] += weight
        total = sum(per_job.values())
        if total > 0:
            return _ordered({job: value / total for job, value in per_job.items()}, method, prefer)
    return _ordered(dict.fromkeys(jobs, 1.0 / len(jobs)), "equal_split", prefer)


def _ordered(shares: dict[str, float], method: str, prefer: str | None) -> tuple[JobShare, ...]:
    return tuple(
        JobShare(job_id=job, share=share, method=method)
        for job, share in sorted(shares.items(), key=lambda item: (-item[1], item[0] != prefer, item[0]))
    )
