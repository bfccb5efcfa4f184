"""JobReporter against a real ``mfumon serve`` on loopback: delivery, retries, drops, rank gating, job end."""

from __future__ import annotations

import logging
import platform
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mfumon.exporter.job.reporter import JobReporter, default_job_id, default_rank, default_world_size
from mfumon.exporter.job.reporter._env import sanitize_job_id
from tests.conftest import LiveServer, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One aggregator for the tests of this module that only add jobs of their own."""
    with start_server(tmp_path_factory.mktemp("serve")) as live:
        yield live


def _job(server: LiveServer, job_id: str) -> dict:
    response = httpx.get(f"{server.url}/v1/jobs/{job_id}")
    response.raise_for_status()
    return response.json()


def _steps(reporter: JobReporter, count: int, tokens: int, seconds: float = 0.01) -> None:
    reporter.step(tokens)  # warm-up: starts the clock
    for _ in range(count):
        time.sleep(seconds)
        reporter.step(tokens, step_seconds=seconds, comm_seconds=seconds / 4)


def test_reports_and_metadata_reach_the_aggregator(server: LiveServer) -> None:
    reporter = JobReporter(
        "rep-basic",
        url=server.url,
        model={"params": 1_000_000, "layers": 2, "heads": 4, "head_dim": 16, "seq_len": 128},
        num_gpus=4,
        gpu_model="h100-sxm",
        dtype="bf16",
        name="llm-pretrain",
        team="research",
        pool="a-pool",
        gpus_requested=8,
        interval_seconds=60,
        rank=0,
    )
    _steps(reporter, 5, tokens=4 * 128)
    assert reporter.flush(timeout_seconds=10)
    sent = reporter.last_report
    assert sent is not None and sent["tokens"] == 5 * 4 * 128 and sent["step"] == 6
    job = _job(server, "rep-basic")
    assert job["status"] == "running"
    assert (job["name"], job["team"], job["pool"], job["num_gpus"], job["gpus_requested"]) == (
        "llm-pretrain",
        "research",
        "a-pool",
        4,
        8,
    )
    assert job["model"]["params"] == 1_000_000 and job["model"]["seq_len"] == 128
    assert job["latest"]["tokens_per_second"] == pytest.approx(sent["tokens"] / sent["interval_seconds"])
    assert job["latest"]["comm_ratio"] == pytest.approx(0.25)
    assert reporter.last_response is not None and reporter.last_response["mfu"] is not None
    reporter.close(exit_code=0)
    job = _job(server, "rep-basic")
    assert (job["status"], job["exit_code"]) == ("ended", 0)
    assert reporter.stats().pending == 0 and reporter.stats().dropped == 0


def test_the_software_fingerprint_reaches_the_job_once_with_its_tags(server: LiveServer) -> None:
    """Issue 59: the reporter sends what this process runs (here: Python, and PyTorch if the test run imported it)
    and the user's tags once, with the job's registration; a bad tag is left out, never raised."""
    reporter = JobReporter(
        "rep-software",
        url=server.url,
        model={"params": 1_000_000},
        num_gpus=1,
        interval_seconds=60,
        rank=0,
        tags={"experiment": "lr-sweep-3", "bad key": "x"},
    )
    _steps(reporter, 2, tokens=128)
    assert reporter.flush(timeout_seconds=10)
    software = _job(server, "rep-software")["software"]
    assert software == reporter.software
    assert software["python"] == platform.python_version() and software["tag.experiment"] == "lr-sweep-3"
    assert not [key for key in software if "bad" in key]
    reporter.close(exit_code=0)


def test_background_thread_reports_without_flush(server: LiveServer) -> None:
    reporter = JobReporter("rep-thread", url=server.url, model={"params": 1e6}, num_gpus=1, interval_seconds=0.2)
    _steps(reporter, 3, tokens=100)
    deadline = time.monotonic() + 10
    while reporter.stats().sent < 2 and time.monotonic() < deadline:  # the PUT, then a report
        time.sleep(0.05)
    assert _job(server, "rep-thread")["reports_received"] >= 1
    reporter.close()


def test_other_ranks_get_a_silent_reporter(server: LiveServer) -> None:
    reporter = JobReporter("rep-rank1", url=server.url, model={"params": 1e6}, rank=1)
    assert not reporter.active
    _steps(reporter, 3, tokens=100)
    assert reporter.flush() and reporter.last_report is None
    reporter.close()
    assert httpx.get(f"{server.url}/v1/jobs/rep-rank1").status_code == 404


def test_context_manager_ends_the_job_with_the_failure(server: LiveServer) -> None:
    with pytest.raises(RuntimeError), JobReporter("rep-fail", url=server.url, model={"params": 1e6}) as rep:
        _steps(rep, 2, tokens=10)
        raise RuntimeError("loss is nan")
    job = _job(server, "rep-fail")
    assert (job["status"], job["exit_code"]) == ("ended", 1)


def test_exit_without_close_ends_the_job_at_exit(server: LiveServer, tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import time
        from mfumon.exporter.job.reporter import JobReporter
        reporter = JobReporter("rep-atexit", url={server.url!r}, model={{"params": 1e6}}, num_gpus=1)
        reporter.step(10)
        time.sleep(0.05)
        reporter.step(10)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60, cwd=Path(__file__).parents[3])
    job = _job(server, "rep-atexit")
    assert job["status"] == "ended" and job["reports_received"] == 1


def test_down_aggregator_never_raises_and_keeps_a_bounded_queue(
    caplog: pytest.LogCaptureFixture, held_port: int
) -> None:
    caplog.set_level(logging.WARNING, logger="mfumon.exporter.job.reporter")
    url = f"http://127.0.0.1:{held_port}"  # nothing listens there
    reporter = JobReporter("rep-down", url=url, model={"params": 1e6}, max_pending_reports=3, start=False)
    reporter.step(1)
    for _ in range(6):
        reporter.step(100, step_seconds=0.01)
        assert reporter.flush(timeout_seconds=5) is False
    stats = reporter.stats()
    assert stats.pending == 3 and stats.dropped == 5 and stats.sent == 0  # PUT, init event, 6 reports: 3 kept
    assert stats.failed_attempts == 6
    warnings = [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(warnings) == 6  # one line per round, not one per request
    reporter.close(timeout_seconds=1)


@pytest.mark.slow
def test_the_job_id_and_its_page_are_said_once_with_no_logging_set_up(server: LiveServer) -> None:
    """Like W&B's "View run at": one line on stderr, from the reporting rank only, seen without any configuration."""
    script = textwrap.dedent(
        f"""
        from mfumon.exporter.job.reporter import JobReporter
        for rank in (0, 1):
            reporter = JobReporter("rep-where", url={server.url + "/"!r}, model={{"params": 1e6}}, rank=rank)
            reporter.step(10)
            reporter.close()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[3]
    )
    assert done.returncode == 0, done.stderr
    page = f"{server.url}/ui/jobs/rep-where"
    assert done.stderr.splitlines() == [f"mfumon: reporting job rep-where, view it at {page}"]
    answer = httpx.get(page)
    assert answer.status_code == 200 and "rep-where" in answer.text  # the route the line names is the job's page


def test_page_urls_are_built_in_one_place() -> None:
    from mfumon.exporter.links import cluster_page_url, job_page_url

    assert cluster_page_url("http://agg:8000/") == "http://agg:8000/ui"
    assert job_page_url("http://agg:8000/mfumon/", "vm-255fa61104") == "http://agg:8000/mfumon/ui/jobs/vm-255fa61104"
    assert job_page_url("http://agg", "123_4.a:b@c+d") == "http://agg/ui/jobs/123_4.a:b@c+d"  # the id alphabet, as is
    assert job_page_url("http://agg", "a/b c") == "http://agg/ui/jobs/a%2Fb%20c"
    assert JobReporter("x:1", url="http://agg:8000/", rank=1).page_url == "http://agg:8000/ui/jobs/x:1"


def test_buffered_reports_are_sent_once_the_aggregator_is_back(tmp_path: Path, held_port: int) -> None:
    port = held_port
    reporter = JobReporter("rep-back", url=f"http://127.0.0.1:{port}", model={"params": 1e6}, num_gpus=2, start=False)
    sent = []
    for tokens in (50, 70):
        _steps(reporter, 2, tokens=tokens)
        assert reporter.flush(timeout_seconds=5) is False
        assert reporter.last_report is not None
        sent.append(reporter.last_report["tokens"] / reporter.last_report["interval_seconds"])
    with start_server(tmp_path, port=port) as live:
        assert reporter.flush(timeout_seconds=10)
        job = _job(live, "rep-back")
        assert job["reports_received"] == 2 and job["num_gpus"] == 2
        received = [h["tokens_per_second"] for h in sorted(job["history"], key=lambda h: h["received_at"])]
        assert received == pytest.approx(sent, rel=1e-9)  # in order, nothing lost
        reporter.close()
        assert _job(live, "rep-back")["status"] == "ended"


def test_rejected_requests_are_dropped_not_retried(server: LiveServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mfumon.exporter.job.reporter")
    reporter = JobReporter("rep-bad", url=server.url, start=False)  # no model: the aggregator refuses reports
    _steps(reporter, 2, tokens=10)
    assert reporter.flush(timeout_seconds=10)
    stats = reporter.stats()
    assert (stats.sent, stats.rejected, stats.pending) == (2, 1, 0)  # the PUT and init went through, the report not
    assert any("rejected" in r.getMessage() and "422" in r.getMessage() for r in caplog.records)
    reporter.close()


@pytest.mark.slow
def test_ingest_token_is_sent(tmp_path: Path) -> None:
    with start_server(tmp_path, env={"MFUMON_INGEST_TOKENS": "s3cret"}) as live:
        token_file = tmp_path / "token"
        token_file.write_text("s3cret\n")
        good = JobReporter("rep-auth", url=live.url, token_file=token_file, model={"params": 1e6}, start=False)
        bad = JobReporter("rep-noauth", url=live.url, token="wrong", model={"params": 1e6}, start=False)
        for reporter in (good, bad):
            _steps(reporter, 2, tokens=10)
            reporter.close(timeout_seconds=5)
        assert good.stats().rejected == 0 and _job(live, "rep-auth")["status"] == "ended"
        # PUT, init, report, end: all 401, kept for retry (the token may be fixed), never sent, counted
        assert bad.stats().auth_failures >= 1 and bad.stats().rejected == 0 and bad.stats().sent == 0


def test_job_id_rank_and_world_size_from_the_environment() -> None:
    assert default_job_id({"MFUMON_JOB_ID": "a", "SLURM_JOB_ID": "b"}) == "a"
    assert default_job_id({"SLURM_JOB_ID": "123", "SLURM_ARRAY_JOB_ID": "120", "SLURM_ARRAY_TASK_ID": "3"}) == "120_3"
    assert default_job_id({"TORCHELASTIC_RUN_ID": "none", "PBS_JOBID": "77.pbs01"}) == "77.pbs01"
    generated = default_job_id({})
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:@+\-]{0,127}", generated)
    assert generated != default_job_id({})
    assert sanitize_job_id("my job/1") == "my-job-1" and sanitize_job_id("_x") == "j_x"
    assert default_rank({"RANK": "3", "LOCAL_RANK": "1"}) == 3
    assert default_rank({"LOCAL_RANK": "1"}) == 1 and default_rank({}) == 0
    assert default_world_size({"WORLD_SIZE": "16"}) == 16 and default_world_size({}) is None


def test_defaults_read_from_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "8")
    reporter = JobReporter(url="http://127.0.0.1:9", start=False)
    assert (reporter.job_id, reporter.rank, reporter.active) == ("4242", 2, False)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("MFUMON_URL", "http://127.0.0.1:9/")
    reporter = JobReporter(model={"params": 1e6}, gpu_model="auto", start=False)
    assert reporter.active and reporter.url == "http://127.0.0.1:9"
    assert reporter.metadata["num_gpus"] == 8
    assert "gpu_model" not in reporter.metadata  # torch sees no GPU here: left to the exporters
    reporter.close(timeout_seconds=0.5)


def test_invalid_arguments_fail_fast() -> None:
    with pytest.raises(ValueError, match="kind"):
        JobReporter("x", kind="serving")
    with pytest.raises(ValueError, match="dtype"):
        JobReporter("x", dtype="int4")
    reporter = JobReporter("x", url="ftp://nowhere", start=False)  # a bad URL disables, never crashes
    assert not reporter.active


def test_lifecycle_events_are_sent_without_user_code(server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")  # Slurm requeued this job twice already
    reporter = JobReporter("rep-events", url=server.url, model={"params": 1e6}, num_gpus=2, interval_seconds=60)
    reporter.event("checkpoint_load", seconds=1.5, step=900)  # before the first step: not start-up time
    _steps(reporter, 3, tokens=100)
    reporter.event("checkpoint_save", seconds=2.5, step=1000)
    with reporter.timed("eval", step=1000):
        time.sleep(0.05)
    reporter.event("coffee_break")  # unknown: logged and dropped, never raised
    reporter.close(exit_code=3)
    events = httpx.get(f"{server.url}/v1/jobs/rep-events/events").json()["data"]
    assert [e["type"] for e in events] == ["restart", "checkpoint_load", "init", "checkpoint_save", "eval", "failure"]
    by_type = {e["type"]: e for e in events}
    from mfumon.exporter.job.reporter._env import process_start_time

    started = process_start_time()
    assert started is not None  # Linux
    startup = by_type["init"]["timestamp"] - started
    assert 0 <= by_type["init"]["seconds"] <= startup - 1.5 + 0.5  # the checkpoint load is left out
    assert by_type["eval"]["seconds"] >= 0.05 and by_type["eval"]["step"] == 1000
    assert by_type["failure"]["exit_code"] == 3
    job = _job(server, "rep-events")
    assert (job["status"], job["outcome"], job["exit_code"], job["restarts"], job["failures"]) == (
        "ended",
        "failure",
        3,
        1,
        1,
    )


def test_an_uncaught_exception_at_exit_is_a_failure(server: LiveServer) -> None:
    script = textwrap.dedent(
        f"""
        import time
        from mfumon.exporter.job.reporter import JobReporter
        reporter = JobReporter("rep-crash", url={server.url!r}, model={{"params": 1e6}}, num_gpus=1)
        reporter.step(10)
        time.sleep(0.05)
        reporter.step(10)
        raise RuntimeError("NCCL timeout")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], timeout=60, cwd=Path(__file__).parents[3])
    assert result.returncode == 1
    job = _job(server, "rep-crash")
    assert (job["status"], job["outcome"], job["exit_code"]) == ("ended", "failure", 1)
    types = [e["type"] for e in httpx.get(f"{server.url}/v1/jobs/rep-crash/events").json()["data"]]
    assert types == ["init", "failure"]
