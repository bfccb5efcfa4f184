"""The framework callbacks on ranks other than 0: they report nothing but drive a profile agent for that rank."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from mfumon.exporter.job.profile import ProfileAgent, ProfileRequest


def _hf_step(callback: object, rank: int) -> None:
    args = SimpleNamespace(process_index=rank, world_size=4)
    state = SimpleNamespace(is_world_process_zero=rank == 0)
    callback.on_step_begin(args, state, None)  # type: ignore[attr-defined]
    callback.on_step_end(args, state, None)  # type: ignore[attr-defined]


@pytest.fixture
def job_store() -> Iterator[None]:
    """A one-process gloo group: its store carries a request from rank 0's agent to the other ranks' agents."""
    dist = pytest.importorskip("torch.distributed")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_hugging_face_callback_profiles_other_ranks(job_store: None) -> None:
    pytest.importorskip("transformers")
    from mfumon.exporter.job.integrations.hf import MfumonTrainerCallback

    callback = MfumonTrainerCallback(job_id="hf-peer", url="http://127.0.0.1:9", interval_seconds=60)
    _hf_step(callback, rank=2)
    reporter = callback.reporter
    assert reporter is not None and not reporter.active and reporter.rank == 2
    agent = reporter.profiler
    assert agent is not None and (agent.rank, agent.world_size) == (2, 4)
    zero = ProfileAgent(job_id="hf-peer", rank=0, world_size=4, send=lambda body: None)
    zero.offer(ProfileRequest(id=1, steps=1, ranks=(2,)))  # rank 0 passes it on through the process-group store
    agent.poll()
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
    assert reporter is not None and not reporter.active and reporter.profiler is not None
    assert reporter.profiler.rank == 3
    reporter.close()
