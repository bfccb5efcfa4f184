"""The job-side profile agent: which ranks profile, one profile at a time, nothing raised into the step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mfumon.exporter.job.profile import ProfileAgent, ProfileRequest, _agent, sample_ranks

torch = pytest.importorskip("torch")


class _Channel:
    """The process-group store, as a dict."""

    def __init__(self) -> None:
        self.request: ProfileRequest | None = None

    def publish(self, request: ProfileRequest) -> None:
        self.request = request

    def read(self) -> ProfileRequest | None:
        return self.request


def _agent_for(rank: int, channel: _Channel, sent: list[dict[str, Any]], tmp_path: Path) -> ProfileAgent:
    return ProfileAgent(
        job_id="j", rank=rank, world_size=4, send=sent.append, trace_dir=tmp_path, channel=lambda: channel
    )


def _train(agent: ProfileAgent, steps: int) -> None:
    weights = torch.randn(64, 64)
    for _ in range(steps):
        weights = torch.tanh(weights @ weights)
        agent.on_step()


def test_rank_zero_passes_the_request_on_and_each_named_rank_profiles_once(tmp_path: Path) -> None:
    channel, sent = _Channel(), []
    zero, two, three = (_agent_for(r, channel, sent, tmp_path) for r in (0, 2, 3))
    request = ProfileRequest(id=5, steps=2, ranks=(0, 2))
    zero.offer(request)
    zero.offer(request)  # told again in the next answer: still one profile
    for peer in (two, three):
        peer.poll()
    assert channel.request == request and not three.busy  # rank 3 is not named
    for agent in (zero, two, three):
        _train(agent, 5)
        agent.wait()
    assert sorted((b["rank"], b["profile_id"]) for b in sent) == [(0, 5), (2, 5)]
    assert all([s["step"] for s in b["steps"]] == [1, 2] for b in sent)
    assert all(Path(b["trace_path"]).exists() for b in sent)
    assert zero.take_profiled_steps() == 3 and zero.take_profiled_steps() == 0  # warm-up + 2, counted once
    assert three.take_profiled_steps() == 0


def test_a_failing_profiler_never_reaches_the_training_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    monkeypatch.setattr(_agent, "Capture", broken)
    sent: list[dict[str, Any]] = []
    agent = _agent_for(0, _Channel(), sent, tmp_path)
    agent.offer(ProfileRequest(id=1, steps=3, ranks="all"))
    _train(agent, 3)  # raises nothing
    assert sent == [] and not agent.busy


def test_steps_are_capped(tmp_path: Path) -> None:
    sent: list[dict[str, Any]] = []
    agent = _agent_for(0, _Channel(), sent, tmp_path)
    agent.offer(ProfileRequest(id=1, steps=500, ranks="all"))
    _train(agent, _agent.MAX_STEPS + 3)
    agent.wait()
    assert len(sent[0]["steps"]) == _agent.MAX_STEPS


def test_an_oversized_trace_is_summarised_and_not_kept(tmp_path: Path) -> None:
    sent: list[dict[str, Any]] = []
    agent = _agent_for(0, _Channel(), sent, tmp_path)
    agent.max_trace_bytes = 10
    agent.offer(ProfileRequest(id=1, steps=1, ranks="all"))
    _train(agent, 3)
    agent.wait()
    assert sent[0]["trace_path"] is None and sent[0]["trace_bytes"] > 10 and list(tmp_path.iterdir()) == []


def test_sample_ranks() -> None:
    assert sample_ranks(4) == {0, 1, 2, 3}
    assert sample_ranks(1024) == {0, 146, 292, 438, 585, 731, 877, 1023}
    assert ProfileRequest.from_json({"id": 1, "steps": 2, "ranks": "sample"}).names(1023, 1024)  # type: ignore[union-attr]
    assert ProfileRequest.from_json({"id": "x"}) is None
