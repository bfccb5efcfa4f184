"""What the software-regression recompute (issue 59) costs at fleet scale, against the interval it runs in.

    .venv/bin/python bench/regressions_scale.py [--jobs 20000] [--signatures 200] [--rounds 3]

The maintenance thread recomputes every ``REGRESSIONS_INTERVAL_SECONDS`` (300 s) over the last
``REGRESSIONS_WINDOW_DAYS`` (30 days): reads the window's training jobs that sent a fingerprint, turns each into a
:class:`~mfumon.api.regressions.analysis.JobRun` (its ledger's time-weighted MFU) and compares, per signature and
component, the jobs on each pair of consecutive versions. Here: ``--jobs`` jobs over 30 days in ``--signatures``
signatures, each fingerprint of 12 components of which four move during the month (PyTorch, NCCL, CUDA, the
driver) at their own dates, so every signature has several steps to compare. Best of ``--rounds``:

- **compare**: ``find_changes`` over the runs;
- **per job**: ``job_run`` for a stored row (its ledger and last outcome decoded), times the jobs;

and both as a share of the interval, the CPU the maintenance thread takes from the event loop (the GIL).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mfumon.api.accounting.ledger import Ledger
from mfumon.api.regressions.analysis import JobRun, find_changes
from mfumon.api.services.regressions import job_run

DAY = 86_400.0
MOVING = {  # component -> (versions, the days of the month they change on)
    "pytorch": (("2.5.1", "2.6.0", "2.7.0"), (9.0, 21.0)),
    "nccl": (("2.21.5", "2.23.4"), (14.0,)),
    "cuda": (("12.4", "12.6"), (6.0,)),
    "driver": (("550.127.05", "560.35.03"), (25.0,)),
}
FIXED = {f"lib{i}": "1.0" for i in range(8)}


def software_at(day: float) -> dict[str, str]:
    out = dict(FIXED)
    for component, (versions, days) in MOVING.items():
        out[component] = versions[sum(day >= d for d in days)]
    return out


def runs(jobs: int, signatures: int, rng: random.Random) -> list[JobRun]:
    out = []
    for j in range(jobs):
        day = rng.uniform(0.0, 30.0)
        nccl_cost = 0.94 if day >= 14.0 and j % signatures == 0 else 1.0  # one signature loses 6 % with NCCL
        out.append(
            JobRun(
                job_id=f"job-{j}",
                signature=f"training|model-{j % signatures}|h100-sxm|64|bf16",
                started_at=day * DAY,
                mfu=0.42 * nccl_cost * rng.gauss(1.0, 0.01),
                gpu_hours=rng.uniform(8.0, 512.0),
                software=software_at(day),
                step_seconds=rng.uniform(1.0, 4.0),
            )
        )
    return out


def stored_row(run: JobRun) -> SimpleNamespace:
    """A job row as ``job_run`` reads it: its fingerprint, its ledger and last outcome as stored JSON."""
    ledger = Ledger(
        gpu_seconds={"compute": run.gpu_hours * 3600 * 0.8, "comm_exposed": run.gpu_hours * 3600 * 0.1},
        mfu_seconds=run.mfu * 86_400,
        mfu_covered_seconds=86_400,
        recent_step_seconds=[2.0 + step * 0.001 for step in range(32)],
    )
    return SimpleNamespace(
        job_id=run.job_id,
        kind="training",
        software=dict(run.software),
        accounting=ledger.to_json(),
        latest={"signature": run.signature},
        started_at=run.started_at,
        created_at=run.started_at,
    )


def best(work: object, rounds: int) -> float:
    fastest = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        work()  # type: ignore[operator]
        fastest = min(fastest, time.process_time() - started)
    return fastest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--signatures", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(7)
    fleet = runs(args.jobs, args.signatures, rng)
    changes = find_changes(fleet)
    found = [c for c in changes if c.verdict == "regression"]
    assert any(c.component == "nccl" for c in found), "the planted NCCL regression was not found"
    compare = best(lambda: find_changes(fleet), args.rounds)
    rows = [stored_row(run) for run in fleet[:2000]]
    assert all(job_run(row) is not None for row in rows)  # type: ignore[arg-type]
    per_job = best(lambda: [job_run(row) for row in rows], args.rounds) / len(rows)  # type: ignore[arg-type]
    total = compare + per_job * args.jobs
    print(f"{args.jobs:,} jobs in {args.signatures} signatures over 30 days; {len(changes):,} comparisons, "
          f"{len(found)} regressions found; best of {args.rounds}")  # fmt: skip
    all_jobs = per_job * args.jobs
    print(f"find_changes: {compare * 1e3:.0f} ms; job_run: {per_job * 1e6:.0f} us a job, {all_jobs * 1e3:.0f} ms "
          f"for all; together {total:.2f} s every 300 s: {total / 300 * 100:.2f} % of one CPU")  # fmt: skip


if __name__ == "__main__":
    main()
