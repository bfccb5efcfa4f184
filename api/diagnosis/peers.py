"""A GPU against its peers: the clock and power straggler, a GPU that runs slower or draws less than the job's other
GPUs under the same load.

The job is the test load: its GPUs run the same kernels in lockstep, so under the same utilization they should run
at the same SM clock and draw about the same power. DCGM 4.5's diagnostic does the same check under its own load
(``dcgmi diag`` parameters ``clocks_tolerance_pcnt`` and ``power_tolerance_pcnt``: a GPU outside a percentage of the
system's mean is reported); here the reference is the peers' median, which one slow GPU cannot drag down, and the
peers are the job's GPUs that are busy (SM activity, else utilization, at least ``BUSY``) within ``LOAD_TOLERANCE``
of the GPU's own load, on the same model (the same max SM clock). With fewer than ``MIN_PEERS`` such peers there is
no reference and no finding.

Tolerances: a clock below ``CLOCK_TOLERANCE`` (0.85) of the peers' median, or a power draw below
``POWER_TOLERANCE`` (0.8) of theirs. GPUs of one model under one load sit within a few percent of each other's clock
(boost bins, chip-to-chip variation under the power cap); 15% less is a GPU held down (a lower power limit, locked
or application clocks, heat, a power brake) and costs a synchronous job 15% of every step. Power varies more from
chip to chip (leakage, temperature), hence the wider 20%: a GPU that draws a fifth less at the same load is doing
less work, or is capped. The load window is 10 percentage points: close enough that the load explains no such gap.
"""

from __future__ import annotations

from statistics import median

from mfumon.api.diagnosis.facts import Finding, GpuFacts, JobFacts
from mfumon.api.diagnosis.kinds import INFERENCE, TRAINING, RuleSpec, applies_to, busy_gpu_seconds

BUSY = 0.5
LOAD_TOLERANCE = 0.10
CLOCK_TOLERANCE = 0.85
POWER_TOLERANCE = 0.80
MIN_PEERS = 2
_NAMED = 8  # GPUs named at most in the evidence


_CHECK = (
    "these run below their peers at the same load: on the named node compare the GPU's limits with its neighbours' "
    "(nvidia-smi -q -d PERFORMANCE,POWER,CLOCK: a lower power limit (nvidia-smi -pl), locked or application clocks "
    "(nvidia-smi -rgc, -rac), clock-event reasons, temperature). A GPU that stays behind with nothing set: run dcgmi "
    "diag -r 3 on the node once it is empty, and "
)
_ADVICE = {
    TRAINING: "Every rank waits for the slowest GPU, and " + _CHECK + "exclude it from the job's next run (sbatch "
    "--exclude) until it passes.",
    INFERENCE: "A slow GPU slows every token of its replica (its tensor-parallel ranks wait for it at every layer), "
    "and " + _CHECK + "move the replica off it (sbatch --exclude, a cordoned Kubernetes node) until it passes.",
}


def _load(gpu: GpuFacts) -> float | None:
    return gpu.sm_active if gpu.sm_active is not None else gpu.utilization


def _ratio(value: float | None, peers: list[float | None]) -> tuple[float, float] | None:
    """``(value ÷ the peers' median, that median)``; None without the value or enough peers that report it."""
    known = [v for v in peers if v is not None]
    if value is None or len(known) < MIN_PEERS:
        return None
    middle = median(known)
    return (value / middle, middle) if middle > 0 else None


def _round(value: float, digits: int = 4) -> float:
    return round(value, digits)


@applies_to(TRAINING, INFERENCE)
def clock_power_stragglers(facts: JobFacts) -> Finding | None:
    """The job's busy GPUs whose SM clock or power sits well below their peers' under the same load.

    GPU-seconds at stake: a synchronous job runs at its slowest GPU's pace, so step time (a serving job: its
    prefill, decode and recompute time; its tensor-parallel ranks wait for the slowest at every layer) x the
    largest deficit (1 - the ratio) among them: the clock's where the clock shows it, else the power's (at one clock
    and load, less power is less switching, and the deficit is a lower bound on the work not done).
    """
    busy = [(g, load) for g in facts.gpus if (load := _load(g)) is not None and load >= BUSY]
    rows: list[tuple[float, GpuFacts, dict[str, object]]] = []
    for gpu, load in busy:
        peers = [
            p
            for p, other in busy
            if p is not gpu and abs(other - load) <= LOAD_TOLERANCE and p.max_sm_clock_hz == gpu.max_sm_clock_hz
        ]
        clock = _ratio(gpu.sm_clock_hz, [p.sm_clock_hz for p in peers])
        power = _ratio(gpu.power_watts, [p.power_watts for p in peers])
        slow = clock is not None and clock[0] < CLOCK_TOLERANCE
        starved = power is not None and power[0] < POWER_TOLERANCE
        if clock is not None and slow:
            deficit = 1.0 - clock[0]
        elif power is not None and starved:
            deficit = 1.0 - power[0]
        else:
            continue
        row: dict[str, object] = {"node": gpu.node, "gpu": gpu.index, "uuid": gpu.uuid, "load": _round(load)}
        if clock is not None:
            row["sm_clock_hz"], row["peers_median_sm_clock_hz"] = gpu.sm_clock_hz, _round(clock[1], 1)
            row["clock_ratio"] = _round(clock[0])
        if power is not None:
            row["power_watts"], row["peers_median_power_watts"] = gpu.power_watts, _round(power[1], 2)
            row["power_ratio"] = _round(power[0])
        row["below"] = [name for name, low in (("clock", slow), ("power", starved)) if low]
        row["peers"] = len(peers)
        row["because"] = list(gpu.throttle_reasons) or list(gpu.failing)
        rows.append((deficit, gpu, row))
    if not rows:
        return None
    rows.sort(key=lambda r: (-r[0], r[1].node, r[1].index))
    worst = rows[0][0]
    return Finding(
        "clock_power_straggler",
        busy_gpu_seconds(facts) * worst,
        {
            "stragglers": [row for _, _, row in rows[:_NAMED]],
            "straggling": len(rows),
            "busy_gpus": len(busy),
            "largest_deficit": _round(worst),
            "tolerances": {"clock": CLOCK_TOLERANCE, "power": POWER_TOLERANCE, "load": LOAD_TOLERANCE},
        },
        _ADVICE[INFERENCE if facts.kind == INFERENCE else TRAINING],
    )


PEER_RULES: tuple[RuleSpec, ...] = (clock_power_stragglers,)
