"""A round of the loop against a scheduler and an aggregator in memory: dry run, acting, verifying, retrying with
backoff, reporting failures, the kill switch, and two copies at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from mfumon.exporter.scheduler.remediate.loop import KillSwitch, Remediator, Retry
from mfumon.exporter.scheduler.remediate.model import Policy, SchedulerNode
from tests.exporter.scheduler.remediate.fakes import FakeAggregator, FakeDriver

POLICY = Policy(drain_after_seconds=0, resume_after_seconds=60, max_pool_ratio=1.0, max_cluster_ratio=1.0)


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def cluster(*names: str) -> FakeDriver:
    return FakeDriver({n: SchedulerNode(n, pools=("train",), drained=False, ours=False) for n in names})


def remediator(
    driver: FakeDriver,
    aggregator: FakeAggregator,
    clock: Clock,
    *,
    act: bool = True,
    kill: KillSwitch | None = None,
    actor: str = "copy-a",
) -> Remediator:
    return Remediator(
        driver,
        aggregator.client(),
        policy=POLICY,
        act=act,
        kill_switch=kill or KillSwitch(environ={}),
        retry=Retry(attempts=3, backoff_seconds=2.0),
        clock=clock,
        sleep=clock.sleep,
        actor=actor,
    )


def outcomes(aggregator: FakeAggregator) -> list[tuple[str, str, str, str]]:
    return [(r["node"], r["action"], r["reason"], r["outcome"]) for r in aggregator.records]


def test_dry_run_records_what_it_would_do_and_touches_nothing() -> None:
    driver, aggregator, clock = cluster("n1"), FakeAggregator(), Clock()
    aggregator.fail("n1")
    remediator(driver, aggregator, clock, act=False).run_once()
    assert driver.commands == [] and not driver.nodes["n1"].drained
    assert outcomes(aggregator) == [("n1", "drain", "xid", "dry_run")]
    assert aggregator.records[0]["checks"] == ["xid"] and aggregator.records[0]["actor"] == "copy-a"


def test_drain_then_resume_once_healthy_for_the_configured_time() -> None:
    driver, aggregator, clock = cluster("n1", "n2"), FakeAggregator(), Clock()
    aggregator.fail("n1")
    loop = remediator(driver, aggregator, clock)
    loop.run_once()
    assert driver.nodes["n1"].drained and driver.nodes["n1"].ours and not driver.nodes["n2"].drained
    assert outcomes(aggregator) == [("n1", "drain", "xid", "done")] and aggregator.records[0]["attempts"] == 1
    aggregator.heal("n1")
    loop.run_once()  # healthy since now: not yet
    clock.now += 59
    loop.run_once()
    assert driver.nodes["n1"].drained
    clock.now += 1
    loop.run_once()
    assert not driver.nodes["n1"].drained
    assert outcomes(aggregator)[1:] == [("n1", "resume", "healthy", "done")]
    assert driver.commands == [("drain", "n1"), ("resume", "n1")]


def test_a_failing_command_is_retried_with_backoff_then_done() -> None:
    driver, aggregator, clock = cluster("n1"), FakeAggregator(), Clock()
    aggregator.fail("n1")
    driver.failures = 2
    remediator(driver, aggregator, clock).run_once()
    assert clock.slept == [2.0, 4.0] and driver.commands == [("drain", "n1")] * 3
    assert outcomes(aggregator) == [("n1", "drain", "xid", "done")] and aggregator.records[0]["attempts"] == 3


def test_a_command_that_keeps_failing_is_reported_failed_never_assumed_done() -> None:
    driver, aggregator, clock = cluster("n1"), FakeAggregator(), Clock()
    aggregator.fail("n1")
    driver.failures = 10
    loop = remediator(driver, aggregator, clock)
    loop.run_once()
    [record] = aggregator.records
    assert (record["outcome"], record["attempts"]) == ("failed", 3) and "slurm_update error" in record["detail"]
    driver.failures = 0  # the next round tries again: nothing was assumed
    loop.run_once()
    assert outcomes(aggregator)[-1] == ("n1", "drain", "xid", "done")


def test_a_command_without_effect_is_failed() -> None:
    driver, aggregator, clock = cluster("n1"), FakeAggregator(), Clock()
    aggregator.fail("n1")
    driver.no_effect = True
    remediator(driver, aggregator, clock).run_once()
    [record] = aggregator.records
    assert record["outcome"] == "failed" and "does not show its effect" in record["detail"]


def test_kill_switch_file_and_environment_stop_every_action(tmp_path: Path) -> None:
    driver, aggregator, clock = cluster("n1"), FakeAggregator(), Clock()
    aggregator.fail("n1")
    stop_file = tmp_path / "remediate.stop"
    stop_file.touch()
    remediator(driver, aggregator, clock, kill=KillSwitch(stop_file, environ={})).run_once()
    assert driver.commands == [] and outcomes(aggregator) == [("n1", "drain", "kill_switch", "withheld")]
    assert str(stop_file) in aggregator.records[0]["detail"]
    env_switch = KillSwitch(None, environ={"MFUMON_REMEDIATE_STOP": "1"})
    remediator(driver, aggregator, clock, kill=env_switch).run_once()
    assert driver.commands == [] and outcomes(aggregator)[-1][3] == "withheld"
    stop_file.unlink()
    assert KillSwitch(stop_file, environ={"MFUMON_REMEDIATE_STOP": "0"}).engaged() is None
    remediator(driver, aggregator, clock, kill=KillSwitch(stop_file, environ={})).run_once()
    assert driver.commands == [("drain", "n1")]


def test_kill_switch_stops_retries_at_once(tmp_path: Path) -> None:
    driver, aggregator, clock = cluster("n1"), FakeAggregator(), Clock()
    aggregator.fail("n1")
    stop_file = tmp_path / "stop"
    driver.failures = 10
    loop = remediator(driver, aggregator, clock, kill=KillSwitch(stop_file, environ={}))
    original = clock.sleep

    def sleep_then_stop(seconds: float) -> None:
        original(seconds)
        stop_file.touch()  # an operator pulls the switch during the backoff

    loop._sleep = sleep_then_stop
    loop.run_once()
    assert driver.commands == [("drain", "n1")]
    assert outcomes(aggregator) == [("n1", "drain", "kill_switch", "withheld")]


def test_a_person_draining_between_decision_and_action_wins() -> None:
    driver, aggregator, clock = cluster("n1"), FakeAggregator(), Clock()
    aggregator.fail("n1")

    def person() -> None:
        driver.nodes["n1"] = SchedulerNode("n1", ("train",), drained=True, ours=False, reason="RMA -- alice")

    loop = remediator(driver, aggregator, clock)
    driver.on_read = person  # right after the read the decision is made from; the read before acting sees it
    loop.run_once()
    assert driver.commands == [] and outcomes(aggregator) == [("n1", "drain", "not_ours", "withheld")]


def test_two_copies_at_once_act_once() -> None:
    """Copy B decides from a read taken before copy A drained; B reads again before acting and does nothing."""
    driver, aggregator, clock = cluster("n1"), FakeAggregator(), Clock()
    aggregator.fail("n1")
    copy_a = remediator(driver, aggregator, clock, actor="copy-a")
    copy_b = remediator(driver, aggregator, clock, actor="copy-b")
    driver.on_read = copy_a.run_once  # B's decision read returns, then A runs a whole round
    records_b = copy_b.run_once()
    assert driver.commands == [("drain", "n1")] and records_b == []
    assert [(r["actor"], r["outcome"]) for r in aggregator.records] == [("copy-a", "done")]
    copy_b.run_once()  # and later rounds of B agree: drained by us, still failing, nothing to do
    assert len(aggregator.records) == 1


def test_the_rate_limit_is_shared_through_the_audit() -> None:
    driver, aggregator, clock = cluster("n1", "n2", "n3"), FakeAggregator(), Clock()
    for name in ("n1", "n2", "n3"):
        aggregator.fail(name)
    policy = Policy(drain_after_seconds=0, max_actions=1, max_pool_ratio=1.0, max_cluster_ratio=1.0)
    copies = [remediator(driver, aggregator, clock, actor=a) for a in ("copy-a", "copy-b")]
    for copy in copies:
        copy.policy = policy
        copy.run_once()
    assert driver.commands == [("drain", "n1")]
    withheld = [("n2", "drain", "rate_limit", "withheld"), ("n3", "drain", "rate_limit", "withheld")]
    assert outcomes(aggregator)[-2:] == withheld


def test_no_evidence_no_action() -> None:
    driver, aggregator, clock = cluster("n1"), FakeAggregator(), Clock()
    driver.nodes["n1"] = SchedulerNode("n1", ("train",), drained=True, ours=True, reason="mfumon: xid")
    aggregator.heal("n1")
    loop = remediator(driver, aggregator, clock)
    loop.run_once()
    aggregator.down = True
    clock.now += 120
    assert loop.run_once() == [] and loop.failed_rounds == 1 and driver.commands == []  # cannot read: no resume
    aggregator.down = False
    loop.run_once()
    assert driver.commands == [("resume", "n1")]


def test_the_audit_is_kept_until_the_aggregator_takes_it() -> None:
    driver, aggregator, clock = cluster("n1"), FakeAggregator(), Clock()
    aggregator.fail("n1")
    aggregator.refuse_records = True
    loop = remediator(driver, aggregator, clock)
    [record] = loop.run_once()
    assert record.outcome == "done" and aggregator.records == []
    aggregator.refuse_records = False
    loop.run_once()
    assert outcomes(aggregator) == [("n1", "drain", "xid", "done")]


@pytest.mark.parametrize("value", ["", "0", "false", "no"])
def test_kill_switch_off_values(value: str) -> None:
    assert KillSwitch(None, environ={"MFUMON_REMEDIATE_STOP": value}).engaged() is None
