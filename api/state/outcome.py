"""What a job's newest report produced, as one frozen record: built once by the report service, stored as the job
row's ``latest`` JSON, read back here and nowhere else.

Every reader (views, metrics, diagnosis, comparisons, baselines) takes attributes of :class:`ReportOutcome`; the JSON
keys live only in :meth:`ReportOutcome.as_json` and :meth:`ReportOutcome.from_json`. Rows written before a field
existed read it as None. An inference report's ``inference`` object keeps its whole JSON document for the API
(formulas, symbols, assumptions), beside the typed figures that metrics read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PHASE_NAMES = ("prefill", "decode")


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _count(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True, slots=True)
class PhaseOutcome:
    """One phase of an inference window: throughput, its share of the peak, and while the engine was in it."""

    tokens_per_second: float | None = None
    mfu: float | None = None
    active_mfu: float | None = None

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> PhaseOutcome:
        return cls(
            tokens_per_second=_number(stored.get("tokens_per_second")),
            mfu=_number(stored.get("mfu")),
            active_mfu=_number(stored.get("active_mfu")),
        )


@dataclass(frozen=True, slots=True)
class InferenceOutcome:
    """An inference report's phases, MBU and what they rest on; ``document`` is the JSON API's object as built."""

    phases: Mapping[str, PhaseOutcome]
    mbu: float | None = None
    memory_bytes_per_second: float | None = None
    peak_memory_bytes_per_second: float | None = None
    decode_step_weight_bytes: float | None = None
    decode_step_kv_cache_bytes: float | None = None
    batch_size: float | None = None
    context_tokens: float | None = None
    # the serving engine's own estimate (vLLM/SGLang --enable-mfu-metrics), beside ours
    engine_flops_per_second: float | None = None
    engine_mfu: float | None = None
    engine_mbu: float | None = None
    engine_estimator: str | None = None  # vllm | sglang: whose FLOPs convention
    document: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> InferenceOutcome:
        step_bytes = stored.get("decode_step_bytes") or {}
        return cls(
            phases={name: PhaseOutcome.from_json(values) for name, values in (stored.get("phases") or {}).items()},
            mbu=_number(stored.get("mbu")),
            memory_bytes_per_second=_number(stored.get("memory_bytes_per_second")),
            peak_memory_bytes_per_second=_number(stored.get("peak_memory_bytes_per_second")),
            decode_step_weight_bytes=_number(step_bytes.get("weights")),
            decode_step_kv_cache_bytes=_number(step_bytes.get("kv_cache")),
            batch_size=_number(stored.get("batch_size")),
            context_tokens=_number(stored.get("context_tokens")),
            engine_flops_per_second=_number(stored.get("engine_flops_per_second")),
            engine_mfu=_number(stored.get("engine_mfu")),
            engine_mbu=_number(stored.get("engine_mbu")),
            engine_estimator=stored.get("engine_estimator"),
            document=dict(stored),
        )

    def phase(self, name: str) -> PhaseOutcome:
        return self.phases.get(name) or PhaseOutcome()


@dataclass(frozen=True, slots=True)
class ServingOutcome:
    """A serving job over its goodput window as of its newest report (:mod:`mfumon.api.serving`); ``document`` is
    the JSON API's ``serving`` object as built."""

    goodput_ratio: float | None = None  # lower bound: at least this share met both targets
    goodput_upper_ratio: float | None = None
    goodput_requests_per_second: float | None = None
    goodput_reason: str | None = None
    ttft_target_seconds: float | None = None
    tpot_target_seconds: float | None = None
    objective_ratio: float | None = None
    requests_per_second: float | None = None
    preemptions_per_second: float | None = None
    latency: Mapping[str, float | None] = field(default_factory=dict)  # "ttft_p90" -> seconds, the newest interval
    document: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> ServingOutcome:
        slo = stored.get("slo") or {}
        good = stored.get("slo_goodput") or {}
        latency = stored.get("latency") or {}
        return cls(
            goodput_ratio=_number(good.get("ratio")),
            goodput_upper_ratio=_number(good.get("upper_ratio")),
            goodput_requests_per_second=_number(good.get("requests_per_second")),
            goodput_reason=good.get("reason"),
            ttft_target_seconds=_number(slo.get("ttft_seconds")),
            tpot_target_seconds=_number(slo.get("tpot_seconds")),
            objective_ratio=_number(slo.get("objective_ratio")),
            requests_per_second=_number(stored.get("requests_per_second")),
            preemptions_per_second=_number(stored.get("preemptions_per_second")),
            latency={str(k): _number(v) for k, v in latency.items()},
            document=dict(stored),
        )


@dataclass(frozen=True, slots=True)
class ReportOutcome:
    """A job's newest report and what the engine made of it: MFU (or the reason there is none), FLOPs, the step
    split, the workload signature, and an inference report's phases."""

    tokens_per_second: float | None = None
    mfu: float | None = None
    hfu: float | None = None
    reason: str | None = None
    flops_per_token: float | None = None
    model_flops_per_second: float | None = None
    peak_flops_per_second: float | None = None
    peak_flops_per_gpu: float | None = None
    device: str | None = None  # the peak table's key for the job's GPUs
    num_gpus: int | None = None
    step_seconds: float | None = None
    comm_ratio: float | None = None
    comm_source: str | None = None  # hooks | framework_timers | profile | inspector
    data_wait_ratio: float | None = None
    step: int | None = None
    signature: str | None = None  # the baseline signature (mfumon.api.services.baselines)
    inference: InferenceOutcome | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None
    serving: ServingOutcome | None = None  # inference jobs whose engine's histograms were read

    @property
    def mbu(self) -> float | None:
        return None if self.inference is None else self.inference.mbu

    @property
    def engine_mfu(self) -> float | None:
        """The serving engine's own MFU estimate over the same dense peak as ``mfu``."""
        return None if self.inference is None else self.inference.engine_mfu

    @property
    def engine_mbu(self) -> float | None:
        return None if self.inference is None else self.inference.engine_mbu

    @property
    def tokens_per_second_per_gpu(self) -> float | None:
        """Throughput per GPU as the MFU implies it (MFU x peak ÷ FLOPs per token), when all three are known."""
        if self.mfu is None or not self.peak_flops_per_gpu or not self.flops_per_token:
            return None
        return self.mfu * self.peak_flops_per_gpu / self.flops_per_token

    def as_json(self) -> dict[str, Any]:
        """The stored form, which is also the JSON API's ``latest`` object."""
        return {
            "tokens_per_second": self.tokens_per_second,
            "mfu": self.mfu,
            "hfu": self.hfu,
            "reason": self.reason,
            "flops_per_token": self.flops_per_token,
            "model_flops_per_second": self.model_flops_per_second,
            "peak_flops_per_second": self.peak_flops_per_second,
            "peak_flops_per_gpu": self.peak_flops_per_gpu,
            "device": self.device,
            "num_gpus": self.num_gpus,
            "step_seconds": self.step_seconds,
            "comm_ratio": self.comm_ratio,
            "comm_source": self.comm_source,
            "data_wait_ratio": self.data_wait_ratio,
            "step": self.step,
            "signature": self.signature,
            "mbu": self.mbu,
            "engine_mfu": self.engine_mfu,
            "engine_mbu": self.engine_mbu,
            "inference": None if self.inference is None else dict(self.inference.document),
            "requests_running": self.requests_running,
            "requests_waiting": self.requests_waiting,
            "kv_cache_usage": self.kv_cache_usage,
            "serving": None if self.serving is None else dict(self.serving.document),
        }

    @classmethod
    def from_json(cls, stored: Mapping[str, Any] | None) -> ReportOutcome | None:
        """The record a job row holds; None for a job that never reported."""
        if not stored:
            return None
        inference = stored.get("inference")
        serving = stored.get("serving")
        return cls(
            tokens_per_second=_number(stored.get("tokens_per_second")),
            mfu=_number(stored.get("mfu")),
            hfu=_number(stored.get("hfu")),
            reason=stored.get("reason"),
            flops_per_token=_number(stored.get("flops_per_token")),
            model_flops_per_second=_number(stored.get("model_flops_per_second")),
            peak_flops_per_second=_number(stored.get("peak_flops_per_second")),
            peak_flops_per_gpu=_number(stored.get("peak_flops_per_gpu")),
            device=stored.get("device"),
            num_gpus=_count(stored.get("num_gpus")),
            step_seconds=_number(stored.get("step_seconds")),
            comm_ratio=_number(stored.get("comm_ratio")),
            comm_source=stored.get("comm_source"),
            data_wait_ratio=_number(stored.get("data_wait_ratio")),
            step=_count(stored.get("step")),
            signature=stored.get("signature"),
            inference=InferenceOutcome.from_json(inference) if isinstance(inference, Mapping) else None,
            requests_running=_number(stored.get("requests_running")),
            requests_waiting=_number(stored.get("requests_waiting")),
            kv_cache_usage=_number(stored.get("kv_cache_usage")),
            serving=ServingOutcome.from_json(serving) if isinstance(serving, Mapping) else None,
        )
