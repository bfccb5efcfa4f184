"""``mfumon wrap`` as users run it: a real child process, real signals, a real aggregator on loopback."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mfumon.exporter.job.wrap.cli import main
from tests.conftest import LiveServer, start_server

REPO = Path(__file__).parents[3]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with start_server(tmp_path_factory.mktemp("serve")) as live:
        yield live


def _wrap(*args: str, **kwargs: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "mfumon", "wrap", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        **kwargs,  # type: ignore[arg-type]
    )


def _status(*args: str) -> int:
    proc = _wrap(*args)
    proc.communicate(timeout=60)
    return proc.returncode


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "child.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_output_is_passed_through_byte_for_byte(server: LiveServer, tmp_path: Path) -> None:
    child = _script(
        tmp_path,
        r"""
        import os
        os.write(1, b"plain line\n\xff\xfe not utf-8\r\nprogress 10%\rprogress 20%\r")
        os.write(2, b"a warning on stderr\n")
        os.write(1, b"no newline at the end")
        """,
    )
    proc = _wrap("--url", server.url, "--job-id", "wrap-bytes", "--", sys.executable, child)
    out, err = proc.communicate(timeout=60)
    assert out == b"plain line\n\xff\xfe not utf-8\r\nprogress 10%\rprogress 20%\rno newline at the end"
    assert b"a warning on stderr\n" in err  # then wrap's own note: no throughput line was recognised
    assert proc.returncode == 0
    # Said once at start, by default (wrap shows WARNING and above): the job's id and its page.
    said = [line for line in err.decode().splitlines() if "view it at" in line]
    assert len(said) == 1, err.decode()
    assert said[0].endswith(f"mfumon: reporting job wrap-bytes, view it at {server.url}/ui/jobs/wrap-bytes")
    assert httpx.get(f"{server.url}/v1/jobs/wrap-bytes").json()["exit_code"] == 0


def test_exit_status_is_preserved(tmp_path: Path, held_port: int) -> None:
    url = f"http://127.0.0.1:{held_port}"  # reporting fails: the command's status must not change
    assert _status("-q", "--url", url, "--", sys.executable, "-c", "raise SystemExit(7)") == 7
    assert _status("-q", "--url", url, "--", sys.executable, "-c", "import os; os.kill(os.getpid(), 9)") == 137
    assert _status("-q", "--url", url, "--", str(tmp_path / "no-such-command")) == 127


def test_in_process_main_returns_the_status(held_port: int) -> None:
    url = f"http://127.0.0.1:{held_port}"
    assert main(["-q", "--url", url, "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    with pytest.raises(SystemExit):
        main(["--url", url])  # no command


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signals_are_forwarded_to_the_child(tmp_path: Path, signum: int, held_port: int) -> None:
    child = _script(
        tmp_path,
        """
        import signal, sys, time
        def handler(signum, frame):
            print(f"child got {signal.Signals(signum).name}", flush=True)
            sys.exit(40 + signum)
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, handler)
        print("ready", flush=True)
        time.sleep(60)
        """,
    )
    url = f"http://127.0.0.1:{held_port}"
    proc = _wrap("-q", "--url", url, "--", sys.executable, child)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    proc.send_signal(signum)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 40 + signum
    assert out == f"child got {signal.Signals(signum).name}\n".encode()


def test_reports_tokens_per_second_from_two_log_formats(tmp_path: Path) -> None:
    child = _script(
        tmp_path,
        """
        import sys, time
        megatron = (" [2025-04-13 23:41:12] iteration {i:8d}/    1000 | consumed samples:        51200 |"
                    " elapsed time per iteration (ms): 500.0 | throughput per GPU (TFLOP/s/GPU): 100.0 |"
                    " learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 2.345678E+00 |")
        timers = ["(min, max) time across ranks (ms):",
                  "    batch-generator ................................: (4.00, 6.00)",
                  "    all-grads-sync .................................: (90.00, 110.00)"]
        for i in (10, 20):
            print(megatron.format(i=i))
            print("\\n".join(timers))
        time.sleep(1.2)
        print("tokens per iteration will be: 8,192")
        for i in (30, 40):
            print(f"iter {i}: loss 2.3000, time 125.00ms, mfu 12.00%")
        time.sleep(1.2)
        sys.exit(3)
        """,
    )
    with start_server(tmp_path) as live:
        proc = _wrap(
            "--url", live.url, "--job-id", "wrap-e2e", "--interval", "0.3", "--num-gpus", "4",
            "--peak-flops-per-gpu", "1e15", "--", sys.executable, child, "--seq-length", "1024",
        )  # fmt: skip
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 3, err.decode()
        assert out.count(b"\n") == 11  # every child line passed through
        job = httpx.get(f"{live.url}/v1/jobs/wrap-e2e").json()
    assert (job["status"], job["exit_code"], job["num_gpus"]) == ("ended", 3, 4)
    history = sorted(job["history"], key=lambda h: h["received_at"])
    assert [h["tokens_per_second"] for h in history] == [16 * 1024 / 0.5, 8192 / 0.125]
    assert [h["step"] for h in history] == [20, 40]
    # Megatron's timers (--timing-log-level 1): exposed gradient sync and batch generation per 0.5 s iteration.
    assert (history[0]["comm_ratio"], history[0]["data_wait_ratio"]) == pytest.approx((0.1 / 0.5, 0.005 / 0.5))
    # No model was described: Megatron's own TFLOP/s gives FLOPs per token, so MFU is known for both formats.
    flops_per_token = 100e12 * 4 / (16 * 1024 / 0.5)
    assert job["model"]["flops_per_token"] == pytest.approx(flops_per_token)
    assert [h["mfu"] for h in history] == pytest.approx([0.1, 8192 / 0.125 * flops_per_token / 4e15])


def test_vllm_log_switches_the_job_to_inference(tmp_path: Path, server: LiveServer) -> None:
    child = _script(
        tmp_path,
        """
        for engine in (0, 1):
            print(f"INFO 05-01 12:00:00 [loggers.py:116] Engine {engine:03d}: Avg prompt throughput: 100.0 "
                  "tokens/s, Avg generation throughput: 50.0 tokens/s, Running: 8 reqs, Waiting: 0 reqs, "
                  "GPU KV cache usage: 4.2%, Prefix cache hit rate: 0.0%")
        """,
    )
    proc = _wrap(
        "--url", server.url, "--job-id", "wrap-vllm", "--params", "8e9", "--num-gpus", "2",
        "--gpu-model", "NVIDIA H100 80GB HBM3", "--", sys.executable, child,
    )  # fmt: skip
    proc.communicate(timeout=60)
    job = httpx.get(f"{server.url}/v1/jobs/wrap-vllm").json()
    assert job["kind"] == "inference"
    assert job["history"][0]["tokens_per_second"] == 300.0  # two engines, added up
    assert job["history"][0]["mfu"] == pytest.approx(300.0 * 2 * 8e9 / (2 * 989e12))


# -- never silent ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--params", "seven"], "argument --params: 'seven' is not a parameter count; write it like 8030261248"),
        (["--num-gpus", "eight"], "argument --num-gpus: 'eight' is not a whole number >= 1"),
        (["--interval", "-5"], "argument --interval: '-5' is not a number > 0"),
        (["--model", "no/such/config.json"], "--model 'no/such/config.json': no such file or folder"),
        (["--model", '{"params": 7e9'], "is not valid JSON"),
        (["--model", '{"parameters": 7e9}'], "has a field mfumon does not know"),
        (["--pattern", r"tps=(\d+)"], "needs a named group that says what its number is"),
    ],
)
def test_argument_errors_speak_the_users_words(args: list[str], said: str) -> None:
    proc = _wrap(*args, "--", sys.executable, "-c", "pass")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert said in err.decode()
    assert "invalid" not in err.decode()  # never argparse's "invalid _count value"


def test_params_are_read_the_way_people_write_them() -> None:
    from mfumon.exporter.job.wrap.cli import build_parser

    parser = build_parser()
    for text, value in (("8030261248", 8030261248), ("8.03e9", 8_030_000_000), ("8B", 8_000_000_000),
                        ("1.3b", 1_300_000_000), ("125M", 125_000_000), ("8,030,261,248", 8030261248)):  # fmt: skip
        assert parser.parse_args(["--params", text]).params == value


def test_a_missing_sequence_length_is_said_once_with_the_flag(tmp_path: Path, held_port: int) -> None:
    line = (REPO / "tests/exporter/job/fixtures/logs/deepspeed.log").read_text().splitlines()[0]
    child = _script(tmp_path, f"for _ in range(5):\n    print({line!r})\n")
    url = f"http://127.0.0.1:{held_port}"
    proc = _wrap("--url", url, "--params", "7e9", "--num-gpus", "8", "--", sys.executable, child)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out.count(b"\n") == 5
    messages = [m for m in err.decode().splitlines() if "DeepSpeed throughput timer lines seen" in m]
    assert len(messages) == 1, err.decode()
    assert "the sequence length: pass --seq-len N" in messages[0]


def test_output_without_any_throughput_line_is_said_at_the_end(tmp_path: Path, held_port: int) -> None:
    url = f"http://127.0.0.1:{held_port}"
    proc = _wrap("--url", url, "--params", "7e9", "--", sys.executable, "-c", "print('hello'); print('world')")
    _, err = proc.communicate(timeout=60)
    assert "no throughput line recognised in 2 line(s) of output" in err.decode()
    assert "--pattern" in err.decode()


def test_verbose_logs_every_report_and_the_aggregators_answer(tmp_path: Path, server: LiveServer) -> None:
    child = _script(
        tmp_path,
        """
        import time
        for i in (10, 20, 30):
            print(f" iteration {i:8d}/    1000 | elapsed time per iteration (ms): 500.0 | global batch size:    16 |")
            time.sleep(0.8)
        """,
    )
    proc = _wrap(
        "-v", "--url", server.url, "--job-id", "wrap-verbose", "--interval", "0.3", "--num-gpus", "4",
        "--params", "1e9", "--seq-len", "1024", "--", sys.executable, child,
    )  # fmt: skip
    _, err = proc.communicate(timeout=60)
    sent = [line for line in err.decode().splitlines() if "report sent: 32,768 tokens/s" in line]
    job = httpx.get(f"{server.url}/v1/jobs/wrap-verbose").json()
    assert len(sent) == job["reports_received"] >= 2, err.decode()
    # No GPU model and no exporter attributes the job: the aggregator answers MFU null with its reason.
    assert all("-> MFU null: gpu_model unknown" in line for line in sent), sent
    assert "0.500 s/step" in sent[0]
