"""``mfumon exporter``: settings precedence, exit codes, and a real run against ``mfumon serve``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from mfumon.exporter.errors import ConfigError
from mfumon.exporter.node import agent
from mfumon.exporter.node.settings import build_parser, load_settings, parse_size
from tests.conftest import start_server


def _settings(argv: list[str]) -> object:
    return load_settings(build_parser().parse_args(argv))


def test_flags_beat_environment_beats_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = _settings([])
    assert defaults.INTERVAL == 10.0 and defaults.SOURCE == "auto" and defaults.URL == "http://127.0.0.1:8000"
    assert defaults.LISTEN_ADDRESS == ":9428" and defaults.SPOOL_DIR is None
    monkeypatch.setenv("MFUMON_INTERVAL", "3")
    monkeypatch.setenv("MFUMON_URL", "http://agg.example:8000/")
    monkeypatch.setenv("MFUMON_SPOOL_MAX_BYTES", "8MiB")
    monkeypatch.setenv("MFUMON_POOL", "train")
    from_env = _settings([])
    assert (from_env.INTERVAL, from_env.URL, from_env.SPOOL_MAX_BYTES, from_env.POOL) == (
        3.0,
        "http://agg.example:8000",
        8 * 1024**2,
        "train",
    )
    flags = _settings(["--interval", "7", "--web.listen-address", "127.0.0.1:0", "--spool-max-bytes", "512k"])
    assert (flags.INTERVAL, flags.LISTEN_ADDRESS, flags.SPOOL_MAX_BYTES, flags.POOL) == (
        7.0,
        "127.0.0.1:0",
        512 * 1024,
        "train",
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--interval", "0"], "INTERVAL"),
        (["--url", "agg:8000"], "http://"),
        (["--spool-max-bytes", "lots"], "not a size"),
        (["--node", "***"], "node name"),
    ],
)
def test_invalid_settings_fail_with_a_message(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _settings(argv)


def test_token_file_wins_over_token_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MFUMON_TOKEN", "from-env")
    assert _settings([]).token() == "from-env"
    (tmp_path / "token").write_text("from-file\n")
    assert _settings(["--token-file", str(tmp_path / "token")]).token() == "from-file"
    with pytest.raises(ConfigError, match="cannot read token file"):
        _settings(["--token-file", str(tmp_path / "missing")]).token()


def test_parse_size() -> None:
    assert [parse_size(s) for s in ("100", "1k", "64MiB", "2G", "1.5M")] == [
        100,
        1024,
        64 * 1024**2,
        2 * 1024**3,
        1572864,
    ]


def test_once_prints_one_batch(capsys: pytest.CaptureFixture[str]) -> None:
    rc = agent.main(["--source", "sim", "--sim.gpus", "2", "--node", "n-once", "--pool", "p1", "--once"])
    assert rc == 0
    body = json.loads(capsys.readouterr().out)
    assert body["node"] == "n-once" and body["pool"] == "p1"
    assert [g["index"] for g in body["gpus"]] == [0, 1]
    assert all(0 < g["tensor_active"] < 1 for g in body["gpus"])


def test_once_reads_over_an_interval_so_gpm_activity_is_present(
    fake_nvml: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    # A single GPM read has nothing to compare with: on a real H200, one read printed no tensor_active at all.
    fake_nvml.reset([fake_nvml.FakeGpu(uuid="GPU-0", gpm_values={2: 96.3, 5: 93.5})])
    assert agent.main(["--source", "nvml", "--node", "n-gpm", "--once"]) == 0
    gpu = json.loads(capsys.readouterr().out)["gpus"][0]
    assert (gpu["tensor_active"], gpu["sm_active"]) == (pytest.approx(0.935), pytest.approx(0.963))


def test_exit_codes(fake_nvml: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert agent.main(["--interval", "-1"]) == 2
    fake_nvml.reset([], init_error=fake_nvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    assert agent.main(["--source", "nvml", "--once"]) == 1
    assert "NVML could not be initialised" in capsys.readouterr().err


def test_exporter_process_pushes_and_serves_its_health(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("s3cret\n")
    with start_server(tmp_path, env={"MFUMON_INGEST_TOKENS": "s3cret"}) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MFUMON_")}
        env |= {"MFUMON_URL": server.url, "MFUMON_INTERVAL": "0.2"}
        cmd = [sys.executable, "-m", "mfumon", "exporter", "--source", "sim", "--sim.gpus", "4", "--node", "node-cli"]
        cmd += ["--token-file", str(tmp_path / "token"), "--spool-dir", str(tmp_path / "spool")]
        cmd += ["--web.listen-address", "127.0.0.1:0"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            assert proc.stdout is not None
            banner = b""
            while b"pushing to" not in banner:  # the banner names the port the kernel picked
                line = proc.stdout.readline()
                assert line, "the exporter exited before its banner"
                banner = line
            found = re.search(rb"self-metrics on http://127\.0\.0\.1:(\d+)/metrics", banner)
            assert found, banner
            metrics_port = int(found.group(1))
            deadline = time.monotonic() + 30
            node = None
            while time.monotonic() < deadline:
                response = httpx.get(f"{server.url}/v1/nodes/node-cli", timeout=2)
                if response.status_code == 200 and response.json()["samples_received"] >= 3:
                    node = response.json()
                    break
                time.sleep(0.1)
            assert node is not None, "the exporter's batches never arrived"
            assert len(node["gpus"]) == 4
            health = httpx.get(f"http://127.0.0.1:{metrics_port}/healthz", timeout=2)
            assert health.status_code == 200 and health.json()["source"] == "sim"
            text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2).text
            assert 'mfumon_exporter_push_total{outcome="success"}' in text
            assert "mfumon_exporter_collection_duration_seconds_bucket" in text
            assert "mfumon_exporter_spool_batches 0.0" in text
        finally:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out.decode()


def test_once_reads_the_infiniband_ports_of_the_host_with_the_nvml_source(
    fake_nvml: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_nvml.reset([fake_nvml.FakeGpu(uuid="GPU-0", gpm_supported=False)])
    tree = Path(__file__).parent / "fixtures" / "sysfs" / "class" / "infiniband"
    argv = ["--source", "nvml", "--node", "n-ib", "--once", "--ib.root", str(tree), "--ib.ports", "mlx5_*,mlx4_0:2"]
    assert agent.main(argv) == 0
    body = json.loads(capsys.readouterr().out)
    assert [(p["device"], p["port"]) for p in body["ib_ports"]] == [("mlx4_0", 2), ("mlx5_0", 1)]
    assert body["ib_ports"][1]["transmit_bytes_total"] == 2880761508848 * 4
    assert body["gpus"][0]["energy_joules_total"] == pytest.approx(2674.357)
    # A host without RDMA devices sends no ib_ports at all (not an empty list that would read as "all ports gone").
    fake_nvml.reset([fake_nvml.FakeGpu(uuid="GPU-0", gpm_supported=False)])
    assert agent.main(["--source", "nvml", "--once", "--ib.root", str(tree / "missing")]) == 0
    assert "ib_ports" not in json.loads(capsys.readouterr().out)


def test_a_failing_port_reader_costs_the_ports_not_the_gpus() -> None:
    from mfumon.exporter.node.pipeline import Agent
    from mfumon.exporter.node.push import Sender
    from mfumon.exporter.node.sources.sim import SimSource
    from mfumon.exporter.node.spool import MemorySpool

    class Broken:
        name = "broken"

        def collect(self) -> list[object]:
            raise OSError("sysfs went away")

    sender = Sender("http://127.0.0.1:9", MemorySpool(1024**2))
    node_agent = Agent(source=SimSource(node="n", count=2), sender=sender, node="n", ports=Broken())  # type: ignore[arg-type]
    batch = node_agent.collect_once()
    assert batch is not None and len(batch.gpus) == 2 and batch.ib_ports is None
    assert node_agent.metrics.collector_errors._value.get() == 1
