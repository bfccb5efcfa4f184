"""``mfumon remediate --source slurm --act`` against a real one-node Slurm, fed by a real ``mfumon exporter``.

The exporter reads a stand-in dcgm-exporter (``--source dcgm``) whose GPU 3 reports XID 79 (fallen off the bus,
a reset needed) when told to, pushes to a real aggregator, and the loop reads the drain list and acts through
``scontrol``: a drain a person made is left alone; ours shows in ``sinfo`` with our reason, keeps new jobs off the
node, and is resumed once the node has passed every check for ``--resume-after`` seconds.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer, start_server, stop_process
from tests.exporter.scheduler.slurm_cluster import SlurmCluster, slurm_cluster

pytestmark = pytest.mark.slow

RESUME_AFTER_SECONDS = 8


class FakeDcgm:
    """dcgm-exporter's ``/metrics`` for eight H100s; ``xid`` is GPU 3's last XID."""

    def __init__(self) -> None:
        self.xid = 0

    def text(self) -> str:
        lines = []
        for field, value in (
            ("DCGM_FI_DEV_GPU_UTIL", 0),
            ("DCGM_FI_DEV_POWER_USAGE", 70.0),
            ("DCGM_FI_DEV_XID_ERRORS", 0),
        ):
            lines.append(f"# TYPE {field} gauge")
            for gpu in range(8):
                labels = (
                    f'gpu="{gpu}",UUID="GPU-0000000{gpu}-aaaa-bbbb-cccc-dddddddddddd",modelName="NVIDIA H100 80GB HBM3"'
                )
                shown = self.xid if field == "DCGM_FI_DEV_XID_ERRORS" and gpu == 3 else value
                lines.append(f"{field}{{{labels}}} {shown}")
        return "\n".join(lines) + "\n"


@pytest.fixture
def dcgm() -> Iterator[tuple[FakeDcgm, str]]:
    fake = FakeDcgm()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = fake.text().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield fake, f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def _wait_for(check: Callable[[], Any], what: str, timeout_seconds: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout_seconds
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"never got to: {what}")
        time.sleep(0.3)
    return value


def _sinfo(slurm: SlurmCluster) -> tuple[str, str]:
    """(state, reason) of the node as ``sinfo`` shows it to an operator."""
    state, reason = slurm.run("sinfo", "-h", "-N", "-n", slurm.node, "-o", "%T|%E").strip().split("|", 1)
    return state, reason


def _remediations(server: LiveServer, **params: str) -> list[dict[str, Any]]:
    return httpx.get(f"{server.url}/v1/remediations", params=params).json()["data"]  # type: ignore[no-any-return]


def _node_health(server: LiveServer, node: str) -> dict[str, Any] | None:
    response = httpx.get(f"{server.url}/v1/nodes/{node}")
    return response.json().get("health") if response.status_code == 200 else None


def test_drain_and_resume_through_real_slurm(tmp_path: Path, dcgm: tuple[FakeDcgm, str]) -> None:
    fake, dcgm_url = dcgm
    with slurm_cluster() as slurm, start_server(tmp_path) as server, contextlib.ExitStack() as logs:
        exporter_args = ["--node", slurm.node, "--pool", "train", "--source", "dcgm", "--dcgm.url", dcgm_url]
        exporter = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mfumon",
                "exporter",
                "--url",
                server.url,
                *exporter_args,
                "--interval",
                "1",
                "--web.listen-address",
                "",
            ],
            stdout=subprocess.DEVNULL,
            stderr=logs.enter_context((tmp_path / "exporter.log").open("wb")),
        )
        remediate = None
        try:
            _wait_for(lambda: (_node_health(server, slurm.node) or {}).get("healthy"), "the node healthy")
            # A person drains the node (for a reason of their own); then its GPU 3 falls off the bus.
            slurm.run("scontrol", "update", f"NodeName={slurm.node}", "State=DRAIN", "Reason=bad fan -- alice")
            rails = ["--drain-after", "2", "--resume-after", str(RESUME_AFTER_SECONDS), "--budget.pool-ratio", "1"]
            rails += ["--budget.cluster-ratio", "1", "--kill-file", str(tmp_path / "stop"), "--interval", "1"]
            remediate = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "mfumon",
                    "remediate",
                    "--source",
                    "slurm",
                    "--act",
                    "--url",
                    server.url,
                    *rails,
                ],
                env=slurm.env,
                stdout=subprocess.DEVNULL,
                stderr=logs.enter_context((tmp_path / "remediate.log").open("wb")),
            )
            fake.xid = 79
            injected_at = time.monotonic()
            _wait_for(lambda: (_node_health(server, slurm.node) or {}).get("drain"), "the node on the drain list")
            withheld = _wait_for(lambda: _remediations(server, outcome="withheld"), "the person's drain withheld")
            withheld_at = time.monotonic()
            assert (withheld[0]["action"], withheld[0]["reason"], withheld[0]["checks"]) == (
                "drain",
                "not_ours",
                ["xid"],
            )
            assert _sinfo(slurm) == ("drained", "bad fan -- alice")  # left alone

            # The person resumes it; the loop drains it with our reason, in sinfo for everyone to see.
            slurm.run("scontrol", "update", f"NodeName={slurm.node}", "State=RESUME")
            released_at = time.monotonic()
            _wait_for(lambda: _sinfo(slurm)[1].startswith("mfumon:"), "drained by the loop")
            drained_at = time.monotonic()
            state, reason = _sinfo(slurm)
            assert state in ("drained", "draining") and reason == "mfumon: xid (GPU 3)"
            [drain] = _remediations(server, outcome="done")
            assert (drain["action"], drain["reason"], drain["pools"], drain["scheduler"]) == (
                "drain",
                "xid",
                ["train"],
                "slurm",
            )

            # New jobs do not start on it: a one-GPU job pends once Slurm has looked at it.
            job = slurm.sbatch("--gres=gpu:1", "--wrap=sleep 600")
            queue = lambda: slurm.run("squeue", "-h", "-j", job, "-o", "%T|%r").strip()  # noqa: E731
            _wait_for(lambda: queue() and not queue().endswith("|None"), "the job looked at by the scheduler")
            assert queue().startswith("PENDING|")

            # The GPU is reset (XID cleared): after RESUME_AFTER_SECONDS of passing every check the node comes back.
            fake.xid = 0
            _wait_for(lambda: (_node_health(server, slurm.node) or {}).get("healthy"), "the node healthy again")
            healthy_at = time.monotonic()
            _wait_for(lambda: not _sinfo(slurm)[0].startswith("drain"), "resumed")
            resumed_at = time.monotonic()
            [resume] = _remediations(server, action="resume")
            assert (resume["outcome"], resume["reason"]) == ("done", "healthy")
            healthy_for = float(resume["detail"].split(" for ")[1].split()[0])
            assert healthy_for >= RESUME_AFTER_SECONDS
            _wait_for(lambda: queue().startswith("RUNNING|"), "the pending job started on the resumed node")
            assert not any(r["outcome"] == "failed" for r in _remediations(server, limit="100"))
            print(
                f"\nslurm figures: XID injected -> on the drain list and withheld (a person's drain) "
                f"{withheld_at - injected_at:.1f} s; the person's resume -> drained by the loop in sinfo "
                f"{drained_at - released_at:.1f} s (drain-after 2 s, failing since the XID); healthy -> resumed "
                f"{resumed_at - healthy_at:.1f} s (resume-after {RESUME_AFTER_SECONDS} s; the loop saw "
                f"{healthy_for:.0f} s healthy); audit: {len(_remediations(server, limit='100'))} rows"
            )
        finally:
            for process in (remediate, exporter):
                if process is not None:
                    stop_process(process)  # type: ignore[arg-type]
