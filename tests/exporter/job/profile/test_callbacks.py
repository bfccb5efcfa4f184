"""The framework callbacks on ranks other than 0: they report nothing but drive a profile agent for that rank."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mfumon.exporter.job.profile import ProfileRequest


def _hf_step(callback: object, rank: int) -> None:
    args = SimpleNamespace(process_index=rank, world_size=4)
    state = SimpleNamespace(is_world_process_zero=rank == 0)
    callback.on_step_begin(args, state, None)  # type: ignore[attr-defined]
    callback.on_step_end(args, state, None)  # type: ignore[attr-defined]


def test_hugging_face_callback_profiles_other_ranks() -> None:
    pytest.importorskip("transformers")
    from mfumon.exporter.job.integrations.hf import MfumonTrainerCallback

    callback = MfumonTrainerCallback(job_id="hf-peer", url="http://127.0.0.1:9", interval_seconds=60)
    _hf_step(callback, rank=2)
    reporter = callback.reporter
    assert reporter is not None and not reporter.active and reporter.rank == 2
    agent = reporter._profiler
    assert agent is not None and (agent.rank, agent.world_size) == (2, 4)
    agent._accept(ProfileRequest(id=1, steps=1, ranks=(2,)))  # as if read from the process-group store
    assert agent.busy
    _hf_step(callback, rank=2)  # the step that starts the profiler
    reporter.close()


def test_lightning_callback_profiles_other_ranks() -> None:
    pytest.importorskip("lightning")
    from mfumon.exporter.job.integrations.lightning import MfumonLightningCallback

    callback = MfumonLightningCallback(job_id="pl-peer", url="http://127.0.0.1:9", interval_seconds=60)
    trainer = SimpleNamespace(is_global_zero=False, global_rank=3, world_size=4)
    callback.on_train_batch_start(trainer, None, None, 0)
    callback.on_train_batch_end(trainer, None, None, None, 0)
    reporter = callback.reporter
    assert reporter is not None and not reporter.active and reporter._profiler is not None
    assert reporter._profiler.rank == 3
    reporter.close()
