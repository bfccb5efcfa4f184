"""``mfumon profile``: asks the aggregator, waits for the summary, prints it; bad input is refused before asking."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from mfumon.exporter.job.profile import load_trace, summarize_trace
from mfumon.exporter.ops import profile_cli
from tests.conftest import LiveServer
from tests.utils.factories import report

TRACE = Path(__file__).parents[1] / "job" / "profile" / "fixtures" / "hta_nccl_parser_config_rank0.json.gz"


def test_asks_waits_and_prints(live_server: LiveServer, capsys: pytest.CaptureFixture[str]) -> None:
    httpx.post(f"{live_server.url}/v1/jobs/cli-job/reports", json=report()).raise_for_status()
    summary = summarize_trace(load_trace(TRACE), group_overrides={"0": "dp"}).to_json()

    def answer_as_the_job() -> None:  # what rank 0 would do once its report's answer names the profile
        for _ in range(100):
            listed = httpx.get(f"{live_server.url}/v1/jobs/cli-job/profiles").json()["data"]
            if listed:
                body = {**summary, "profile_id": listed[0]["id"], "rank": 0, "trace_path": "/scratch/rank0.json.gz"}
                httpx.post(f"{live_server.url}/v1/jobs/cli-job/profiles", json=body).raise_for_status()
                return
            time.sleep(0.1)

    job = threading.Thread(target=answer_as_the_job)
    job.start()
    code = profile_cli.main(["cli-job", "--steps", "3", "--ranks", "0", "--url", live_server.url, "--wait", "30"])
    job.join()
    out = capsys.readouterr().out
    assert code == 0, out
    exposed = summary["exposed_comm_seconds"] / summary["span_seconds"]
    assert f"exposed {exposed:.1%}" in out and "dp" in out and "rank 0 trace: /scratch/rank0.json.gz" in out
    assert out.count(f"job page: {live_server.url}/ui/jobs/cli-job\n") == 1  # the page the summary is about


@pytest.mark.parametrize("argv", [["j", "--steps", "0"], ["j", "--steps", "21"], ["j", "--ranks", "a,b"]])
def test_bad_options_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        profile_cli.main([*argv, "--url", "http://127.0.0.1:9"])
    assert exited.value.code == 2


def test_a_refused_request_says_why(live_server: LiveServer, capsys: pytest.CaptureFixture[str]) -> None:
    assert profile_cli.main(["ghost", "--url", live_server.url, "--no-wait"]) == 1
    assert "HTTP 404" in capsys.readouterr().err
