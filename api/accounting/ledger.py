"""The waste waterfall of one job: allocated GPU-seconds split into categories, FLOPs alongside.

Time is cut into *tiles* on the aggregator's clock: each report closes the tile since the previous report (the
first report's tile is the interval it covers; the end closes the last). A tile of ``D`` seconds on ``G`` GPUs is
``G x D`` allocated GPU-seconds, split in this order:

1. **events** (``init``, ``checkpoint``, ``eval``; a ``failure``'s seconds are ``stalled``): an event's seconds
   count once. Events before the job's first report (start-up, a checkpoint load) extend its allocation back in
   time; later ones are *prepaid*: billed now, and taken out of the tile they fall in (only the part after the
   previous report, which already placed the time before it).
2. **stalled**: a report with zero tokens (the job is stuck) stalls its whole tile; otherwise time beyond 1.5 x
   the interval the report covers (the job said nothing for a while) is stalled.
3. **lost**: after a failure, the step time that redoes work lost since the last checkpoint. At the failure the
   job owes the GPU-seconds of step time since its last ``checkpoint_save`` (all of it, without one); that debt is
   charged as ``lost`` as the restarted job trains again, before anything else counts as progress.
4. the rest is **step time**, split by the report's mean step composition: ``data_wait``, ``comm_exposed``,
   ``bubble`` (each its seconds ÷ ``step_seconds``, scaled down together if they exceed the step) and ``compute``.

Every tile's parts are computed as fractions of its ``G x D`` with ``compute`` as the remainder, so the
categories add up to the allocated GPU-seconds exactly (up to float rounding), whatever the inputs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

BADPUT: tuple[str, ...] = ("init", "checkpoint", "eval", "lost", "stalled")
STEP_CATEGORIES: tuple[str, ...] = ("data_wait", "comm_exposed", "bubble", "compute")
CATEGORIES: tuple[str, ...] = BADPUT + STEP_CATEGORIES
#: GPU states the exporters report that no job's waterfall covers (cluster and pool level only).
CLUSTER_CATEGORIES: tuple[str, ...] = (*CATEGORIES, "idle", "unreported")

EVENT_CATEGORY: dict[str, str] = {
    "init": "init",
    "restart": "init",
    "checkpoint_save": "checkpoint",
    "checkpoint_load": "checkpoint",
    "eval": "eval",
    "failure": "stalled",
}

#: Time beyond this multiple of the interval a report covers is a gap in reporting: stalled, not step time.
GAP_TOLERANCE = 1.5
_RECENT_STEPS = 10


@dataclass(frozen=True, slots=True)
class StepSplit:
    """A report's mean step composition: the exposed parts of ``step_seconds`` (all optional)."""

    step_seconds: float | None = None
    data_wait_seconds: float | None = None
    comm_seconds: float | None = None
    bubble_seconds: float | None = None

    def fractions(self) -> dict[str, float]:
        """Shares of step time per non-compute step category; together at most 1."""
        if not self.step_seconds:
            return {}
        parts = {
            "data_wait": self.data_wait_seconds or 0.0,
            "comm_exposed": self.comm_seconds or 0.0,
            "bubble": self.bubble_seconds or 0.0,
        }
        denominator = max(self.step_seconds, sum(parts.values()))
        return {name: value / denominator for name, value in parts.items() if value > 0}


@dataclass(slots=True)
class Bill:
    """What one write adds to the job's ledger and to its pool, team and cluster counters."""

    gpu_seconds: dict[str, float] = field(default_factory=dict)
    model_flops: float = 0.0  # useful model FLOPs (work redone after a failure excluded)
    peak_flops: float = 0.0  # dense peak FLOP/s x allocated seconds: what the GPUs could have done
    compute_peak_flops: float = 0.0  # the same over compute time only

    def add(self, category: str, gpu_seconds: float) -> None:
        if gpu_seconds > 0:
            self.gpu_seconds[category] = self.gpu_seconds.get(category, 0.0) + gpu_seconds

    @property
    def total(self) -> float:
        return sum(self.gpu_seconds.values())

    def __bool__(self) -> bool:
        return bool(self.gpu_seconds) or self.model_flops > 0


@dataclass(slots=True)
class Ledger:
    """One job's accounting state, stored as JSON on its row (``jobs.accounting``)."""

    gpu_seconds: dict[str, float] = field(default_factory=dict)
    model_flops: float = 0.0
    peak_flops: float = 0.0
    compute_peak_flops: float = 0.0
    mfu_seconds: float = 0.0  # Σ reported MFU x seconds it covers: the time-weighted MFU's numerator
    mfu_covered_seconds: float = 0.0
    accounted_until: float | None = None  # aggregator time up to which the job's time is split; None: not yet
    prepaid_seconds: float = 0.0  # event seconds billed ahead of the tile that contains them
    pending_seconds: dict[str, float] = field(default_factory=dict)  # event seconds waiting for a GPU count
    progress_since_checkpoint: float = 0.0  # GPU-seconds of step time a failure now would throw away
    lost_debt: float = 0.0  # GPU-seconds of lost progress still to be redone (charged as ``lost``)
    gpus: float | None = None  # the GPU count of the last report (GPU-equivalents: a shared GPU counts its share)
    peak_flops_per_gpu: float | None = None
    recent_step_seconds: list[float] = field(default_factory=list)
    max_gap_seconds: float = 600.0  # silence counted as stalled at most this long (the job TTL, set by reports)
    # A serving job's GPU-seconds by serving category, but for ``down``, which is the rest (mfumon.api.serving).
    serving_gpu_seconds: dict[str, float] = field(default_factory=dict)

    # -- storage --------------------------------------------------------------------------------------------

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Ledger:
        data = data or {}
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    # -- what the job says ----------------------------------------------------------------------------------

    def event(self, category: str, seconds: float | None, now: float) -> None:
        """An event's seconds, billed with the next report (when the GPU count is known)."""
        if not seconds or seconds <= 0:
            return
        if self.accounted_until is not None:
            available = max(0.0, now - self.accounted_until - self.prepaid_seconds)
            seconds = min(seconds, available)
            self.prepaid_seconds += seconds
        if seconds > 0:
            self.pending_seconds[category] = self.pending_seconds.get(category, 0.0) + seconds

    def checkpoint_saved(self) -> None:
        self.progress_since_checkpoint = 0.0

    def failed(self) -> None:
        """The attempt failed: the progress since the last checkpoint is lost and will be redone."""
        self.lost_debt += self.progress_since_checkpoint
        self.progress_since_checkpoint = 0.0

    def report(
        self,
        now: float,
        *,
        gpus: float,
        covered_seconds: float | None,
        stalled: bool,
        split: StepSplit,
        model_flops_per_second: float | None,
        peak_flops_per_gpu: float | None,
        mfu: float | None,
        max_gap_seconds: float,
    ) -> Bill:
        """Close the tile since the previous report; ``covered_seconds`` is the interval the report measured."""
        self.gpus = gpus
        self.max_gap_seconds = max_gap_seconds
        if peak_flops_per_gpu:
            self.peak_flops_per_gpu = peak_flops_per_gpu
        if self.accounted_until is None:
            tile = covered_seconds or 0.0
        else:
            tile = min(max(0.0, now - self.accounted_until), max_gap_seconds)
        self.accounted_until = now
        bill = self._bill_pending()
        absorbed = min(tile, self.prepaid_seconds)
        self.prepaid_seconds -= absorbed
        rest = tile - absorbed
        if stalled:
            bill.add("stalled", gpus * rest)
            self._add_peak(bill, gpus * rest)
            return self._post(bill)
        gap = max(0.0, rest - GAP_TOLERANCE * covered_seconds) if covered_seconds else 0.0
        bill.add("stalled", gpus * gap)
        stepping = gpus * (rest - gap)
        lost = min(self.lost_debt, stepping)
        self.lost_debt -= lost
        bill.add("lost", lost)
        progress = stepping - lost
        fractions = split.fractions()
        for category, fraction in fractions.items():
            bill.add(category, progress * fraction)
        compute = progress * (1.0 - sum(fractions.values()))
        bill.add("compute", compute)
        self.progress_since_checkpoint += stepping
        self._add_peak(bill, gpus * tile - gpus * absorbed, compute=compute)
        ran_seconds = covered_seconds if covered_seconds else rest  # without covered_seconds there is no gap
        if model_flops_per_second and self.peak_flops_per_gpu and stepping > 0:
            bill.model_flops += model_flops_per_second * ran_seconds * (progress / stepping)
        if mfu is not None:  # ran_seconds >= 0: a report covering no time adds nothing
            self.mfu_seconds += mfu * ran_seconds
            self.mfu_covered_seconds += ran_seconds
        if split.step_seconds:
            self.recent_step_seconds = [*self.recent_step_seconds, split.step_seconds][-_RECENT_STEPS:]
        return self._post(bill)

    def close(self, now: float, *, gpus: float | None, max_gap_seconds: float | None = None) -> Bill:
        """The attempt ended (an end, an expiry, a restart): bill what is pending, and the silence since the last
        report as stalled (at most ``max_gap_seconds``, by default the cap the last report set)."""
        if max_gap_seconds is None:
            max_gap_seconds = self.max_gap_seconds
        if gpus:
            self.gpus = self.gpus or gpus
        bill = self._bill_pending()
        if self.accounted_until is not None and self.gpus:
            tile = min(max(0.0, now - self.accounted_until), max_gap_seconds)
            absorbed = min(tile, self.prepaid_seconds)
            bill.add("stalled", self.gpus * (tile - absorbed))
            self._add_peak(bill, self.gpus * (tile - absorbed))
        self.accounted_until = None
        self.prepaid_seconds = 0.0
        return self._post(bill)

    # -- internals ------------------------------------------------------------------------------------------

    def _bill_pending(self) -> Bill:
        bill = Bill()
        if not self.gpus or not self.pending_seconds:
            return bill
        for category, seconds in self.pending_seconds.items():
            bill.add(category, self.gpus * seconds)
            self._add_peak(bill, self.gpus * seconds)
        self.pending_seconds = {}
        return bill

    def _add_peak(self, bill: Bill, gpu_seconds: float, *, compute: float = 0.0) -> None:
        if self.peak_flops_per_gpu:
            bill.peak_flops += self.peak_flops_per_gpu * gpu_seconds
            bill.compute_peak_flops += self.peak_flops_per_gpu * compute

    def _post(self, bill: Bill) -> Bill:
        for category, value in bill.gpu_seconds.items():
            self.gpu_seconds[category] = self.gpu_seconds.get(category, 0.0) + value
        self.model_flops += bill.model_flops
        self.peak_flops += bill.peak_flops
        self.compute_peak_flops += bill.compute_peak_flops
        return bill

    def add_serving(self, split: dict[str, float]) -> None:
        """A serving report's tile, split by serving category (idle, prefill, decode, recompute, busy)."""
        for category, value in split.items():
            self.serving_gpu_seconds[category] = self.serving_gpu_seconds.get(category, 0.0) + value

    # -- what it adds up to ---------------------------------------------------------------------------------

    @property
    def total_gpu_seconds(self) -> float:
        return sum(self.gpu_seconds.values())

    @property
    def goodput(self) -> float | None:
        """Productive step time ÷ allocated time (step time that redid lost work excluded)."""
        total = self.total_gpu_seconds
        if total <= 0:
            return None
        return sum(self.gpu_seconds.get(c, 0.0) for c in STEP_CATEGORIES) / total

    @property
    def lifetime_mfu(self) -> float | None:
        """Useful model FLOPs ÷ what the GPUs could have done over the job's whole allocated time."""
        return self.model_flops / self.peak_flops if self.peak_flops > 0 else None

    @property
    def compute_mfu(self) -> float | None:
        """Model FLOPs ÷ peak over compute time only: how good the compute is, once the waste is taken out."""
        return self.model_flops / self.compute_peak_flops if self.compute_peak_flops > 0 else None

    @property
    def time_weighted_mfu(self) -> float | None:
        """The reported MFU averaged over the time the reports cover."""
        return self.mfu_seconds / self.mfu_covered_seconds if self.mfu_covered_seconds > 0 else None

    @property
    def step_time_deviation(self) -> float | None:
        """Mean absolute deviation of the recent per-report step times from their median, ÷ the median."""
        steps = sorted(self.recent_step_seconds)
        if len(steps) < 3:
            return None
        mid = len(steps) // 2
        median = steps[mid] if len(steps) % 2 else (steps[mid - 1] + steps[mid]) / 2
        if median <= 0:
            return None
        return sum(abs(s - median) for s in steps) / len(steps) / median

    def waterfall(self) -> list[tuple[str, float]]:
        return [(c, self.gpu_seconds.get(c, 0.0)) for c in CATEGORIES]
