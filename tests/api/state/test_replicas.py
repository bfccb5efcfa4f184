"""Two ``mfumon serve`` replicas on one PostgreSQL describe the same cluster whichever one a push reached."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.conftest import POSTGRES_URL_ENV, LiveServer, start_server
from tests.utils.factories import metric_samples, metric_value, node_sample, report
from tests.utils.waiting import eventually


@pytest.fixture
def shared_postgres() -> Iterator[str]:
    url = os.environ.get(POSTGRES_URL_ENV)
    if not url:
        if os.environ.get("CI"):
            pytest.fail(f"{POSTGRES_URL_ENV} must be set in CI")
        pytest.skip(f"{POSTGRES_URL_ENV} not set")
    admin = url.rsplit("/", 1)[0] + "/postgres"
    name = f"mfumon_replicas_{uuid.uuid4().hex[:8]}"
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield admin.rsplit("/", 1)[0] + "/" + name
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()


def test_push_to_one_replica_read_from_the_other(shared_postgres: str, tmp_path: Path) -> None:
    env = {"MFUMON_REFRESH_INTERVAL_SECONDS": "0.5"}
    with (
        start_server(
            tmp_path / "a" if (tmp_path / "a").mkdir() is None else tmp_path,
            env=env,
            database_url=shared_postgres,
        ) as a,
        start_server(
            tmp_path / "b" if (tmp_path / "b").mkdir() is None else tmp_path,
            env=env,
            database_url=shared_postgres,
        ) as b,
    ):
        assert httpx.post(f"{a.url}/v1/nodes/node-7/samples", json=node_sample(8, job_id="rep")).status_code == 200
        result = httpx.post(f"{a.url}/v1/jobs/rep/reports", json=report(team="infra")).json()
        assert result["mfu"] is not None

        def replica_b_sees_it() -> str | None:
            # The report is stored before it is answered; the push within SAMPLE_FLUSH_SECONDS.
            body = httpx.get(f"{b.url}/metrics").text
            job = metric_value(body, "mfumon_job_mfu_ratio", job_id="rep")
            gpu = metric_value(body, "mfumon_gpu_info", node="node-7", job_id="rep", gpu="7")
            return body if job is not None and gpu is not None else None

        text_b = eventually(replica_b_sees_it)
        assert text_b, "replica b never showed the job pushed to replica a"
        assert metric_value(text_b, "mfumon_job_mfu_ratio", job_id="rep") == pytest.approx(result["mfu"])
        assert metric_value(text_b, "mfumon_gpu_info", node="node-7", job_id="rep", gpu="7") == 1
        node = httpx.get(f"{b.url}/v1/nodes/node-7").json()
        assert len(node["gpus"]) == 8
        assert httpx.get(f"{b.url}/v1/jobs/rep").json()["latest"]["mfu"] == pytest.approx(result["mfu"])
        summary_a = httpx.get(f"{a.url}/v1/cluster").json()
        summary_b = httpx.get(f"{b.url}/v1/cluster").json()
        assert summary_a["mfu"] == pytest.approx(summary_b["mfu"])

        # Ending the job on b removes its report series from a too; while the exporter still attributes GPUs to it,
        # those GPUs are unreported (the hardware says they are busy) ...
        assert httpx.post(f"{b.url}/v1/jobs/rep/end").status_code == 200

        def replica_a_dropped_its_mfu() -> str | None:
            body = httpx.get(f"{a.url}/metrics").text
            return body if metric_value(body, "mfumon_job_mfu_ratio", job_id="rep") is None else None

        ended = eventually(replica_a_dropped_its_mfu)
        assert ended, "replica a kept the ended job's MFU"
        assert metric_value(ended, "mfumon_job_gpus_unreported", job_id="rep") == 8
        assert metric_value(ended, "mfumon_cluster_gpus", state="unreported") == 8
        # ... and once the exporter stops attributing them, nothing of the job is left on either replica.
        assert (
            httpx.post(f"{b.url}/v1/nodes/node-7/samples", json=node_sample(8, compute_processes=0)).status_code == 200
        )
        for replica in (a, b):
            gone = eventually(lambda r=replica: 'job_id="rep"' not in httpx.get(f"{r.url}/metrics").text)
            assert gone, f"{replica.url} kept series of job rep"


def test_a_replica_that_got_no_push_shows_the_same_cluster_truth(shared_postgres: str, tmp_path: Path) -> None:
    """GPU states, unverified GPUs, hardware estimates and the cross-check all rest on what every replica reads."""
    env = {"MFUMON_REFRESH_INTERVAL_SECONDS": "0.5"}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        start_server(tmp_path / "a", env=env, database_url=shared_postgres) as a,
        start_server(tmp_path / "b", env=env, database_url=shared_postgres) as b,
    ):
        clocks = {"sm_clock_hz": 1485e6, "max_sm_clock_hz": 1980e6}  # x 0.75
        busy = node_sample(4, job_id="wrapped", tensor_active=0.5, **clocks)
        busy["gpus"] += node_sample(4, job_id="bare", tensor_active=0.4, **clocks)["gpus"][:4]
        for i, g in enumerate(busy["gpus"]):
            g["index"], g["uuid"] = i, f"GPU-busy-{i}"
        idle = node_sample(8, pool="infer", compute_processes=0, utilization=0.0)
        for g in idle["gpus"]:
            g["uuid"] = g["uuid"].replace("GPU-", "GPU-idle-")
        assert httpx.post(f"{a.url}/v1/nodes/busy/samples", json=busy).status_code == 200
        assert httpx.post(f"{a.url}/v1/nodes/free/samples", json=idle).status_code == 200
        result = httpx.post(f"{a.url}/v1/jobs/wrapped/reports", json=report(num_gpus=6)).json()

        def cluster_of(server: LiveServer) -> dict | None:  # type: ignore[type-arg]
            body = httpx.get(f"{server.url}/v1/cluster").json()
            return body if body["gpus_known"] == 16 and body["gpus_reporting"] == 4 else None

        on_a, on_b = cluster_of(a), eventually(lambda: cluster_of(b))
        assert on_a and on_b, "replica b never loaded the cluster pushed to replica a"
        for key in ("gpus_reporting", "gpus_unreported", "gpus_idle", "gpus_down", "gpus_unverified"):
            assert on_a[key] == on_b[key], key
        assert (on_b["gpus_reporting"], on_b["gpus_unreported"], on_b["gpus_idle"], on_b["gpus_unverified"]) == (
            4,
            4,
            8,
            2,
        )
        for key in ("mfu", "reported_coverage", "estimated_flops_per_second"):
            assert on_b[key] == pytest.approx(on_a[key]), key
        text_b = httpx.get(f"{b.url}/metrics").text
        assert metric_value(text_b, "mfumon_pool_gpus", pool="infer", state="idle") == 8
        assert metric_value(text_b, "mfumon_job_hardware_mfu_ratio", job_id="bare") == pytest.approx(0.3)
        assert metric_value(text_b, "mfumon_job_gpus_unreported", job_id="bare") == 4
        assert metric_value(text_b, "mfumon_job_mfu_hardware_agreement_ratio", job_id="wrapped") == pytest.approx(
            result["mfu"] / 0.375
        )
        job_b = httpx.get(f"{b.url}/v1/jobs/wrapped").json()
        assert (job_b["gpus_reported"], job_b["gpus_attributed"], job_b["gpus_unverified"]) == (6, 4, 2)
        assert job_b["accounting"]["verdict"] in {"consistent", "over_claims", "under_claims"}


# -- durable counters (issue 11) -----------------------------------------------------------------------------

STEP = {"step_seconds": 2.0, "data_wait_seconds": 0.5, "comm_seconds": 0.3}
DURABLE = ("_gpu_seconds_total", "_flops_total", "mfumon_job_ends_total", "mfumon_job_events_total")


def _durable(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    samples = metric_samples(httpx.get(f"{url}/metrics").text)
    return {
        key: value
        for key, value in samples.items()
        if any(part in key[0] for part in DURABLE) and not key[0].startswith("mfumon_job_gpu")
    }


def test_replicas_export_the_same_durable_counters(shared_postgres: str, tmp_path: Path) -> None:
    env = {"MFUMON_REFRESH_INTERVAL_SECONDS": "0.5"}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        start_server(tmp_path / "a", env=env, database_url=shared_postgres) as a,
        start_server(tmp_path / "b", env=env, database_url=shared_postgres) as b,
    ):
        errors: list[str] = []

        def work(url: str, job_id: str) -> None:
            for i in range(6):
                body = {**report(pool="h100", team="llm", num_gpus=2), **STEP}
                for response in (
                    httpx.post(f"{url}/v1/jobs/{job_id}/reports", json=body),
                    httpx.post(f"{url}/v1/jobs/{job_id}/events", json={"type": "eval", "seconds": 0.01 * i}),
                ):
                    if response.status_code != 200:
                        errors.append(response.text)
            httpx.post(f"{url}/v1/jobs/{job_id}/end", json={"exit_code": 0})

        # Writers on both replicas at once, some on the same job and so the same counter shard.
        threads = [
            threading.Thread(target=work, args=(url, f"job-{i % 3}")) for i, url in enumerate([a.url, b.url] * 3)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []

        def same() -> dict | None:
            seen_a, seen_b = _durable(a.url), _durable(b.url)
            return seen_a if seen_a and seen_a == seen_b else None

        agreed = eventually(same)
        assert agreed, "the replicas never agreed on the durable counters"
        ends = sum(v for (name, _), v in agreed.items() if name == "mfumon_job_ends_total")
        events = {dict(lbls)["type"]: v for (name, lbls), v in agreed.items() if name == "mfumon_job_events_total"}
        # A report reaching a job another thread just ended reopens it (a counted restart) and it is ended again:
        # each job ends once, plus once per reopening, whichever replica took which write.
        assert ends == 3 + events.get("restart", 0)
        assert events["eval"] == 36
        # Whatever the interleaving, the cluster's waterfall is the sum of the jobs' (each bill counted once).
        jobs = [httpx.get(f"{a.url}/v1/jobs/job-{i}").json() for i in range(3)]
        for category in ("compute", "data_wait", "comm_exposed", "eval", "stalled"):
            parts = sum(row["gpu_seconds"] for job in jobs for row in job["waterfall"] if row["category"] == category)
            cluster = agreed.get(("mfumon_cluster_gpu_seconds_total", frozenset({("category", category)})), 0.0)
            assert cluster == pytest.approx(parts, rel=1e-9, abs=1e-9), category

    # A replica started later reads the same values from the database.
    (tmp_path / "c").mkdir()
    with start_server(tmp_path / "c", env=env, database_url=shared_postgres) as c:
        assert _durable(c.url) == agreed


def test_a_replica_started_later_serves_the_whole_cluster_as_soon_as_it_is_ready(
    shared_postgres: str, tmp_path: Path
) -> None:
    """It listens, loads, and only then opens its port: its first answer already has every node, job and count."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with start_server(tmp_path / "a", database_url=shared_postgres) as a, httpx.Client(base_url=a.url) as client:
        for n in range(30):
            body = node_sample(2, job_id=f"late-{n % 3}")
            for g in body["gpus"]:
                g["uuid"] = f"GPU-late-{n}-{g['index']}"
            assert client.post(f"/v1/nodes/late-{n}/samples", json=body).status_code == 200
        for j in range(3):
            assert client.post(f"/v1/jobs/late-{j}/reports", json=report()).status_code == 200
        assert client.post("/v1/jobs/late-2/end", json={"exit_code": 0}).status_code == 200
        assert eventually(lambda: metric_value(client.get("/metrics").text, "mfumon_sample_queue_nodes") == 0)
        whole = client.get("/v1/cluster").json()
        with start_server(tmp_path / "b", database_url=shared_postgres) as b:
            assert httpx.get(f"{b.url}/readyz").status_code == 200
            summary = httpx.get(f"{b.url}/v1/cluster").json()  # no waiting: ready means loaded
            assert (summary["nodes"], summary["gpus_known"], summary["jobs_running"]) == (30, 60, 2)
            assert summary["mfu"] == pytest.approx(whole["mfu"])
            text_b = httpx.get(f"{b.url}/metrics").text
            ended = metric_value(text_b, "mfumon_job_ends_total", kind="training", outcome="success")
            assert ended == 1  # a durable counter, written by a path that knows nothing of notifications
            # And it follows what a writes from now on, by notification.
            assert client.post("/v1/jobs/late-1/end", json={"exit_code": 1}).status_code == 200

            def failures_on_b() -> float | None:
                return metric_value(httpx.get(f"{b.url}/metrics").text, "mfumon_job_ends_total", outcome="failure")

            assert eventually(lambda: failures_on_b() == 1, timeout_seconds=30)
