"""The simulated cluster of ``mfumon demo`` against a real aggregator: MFUs near their targets, attribution, pools."""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from typing import Any

import httpx
import pytest

from mfumon.exporter.demo import cli as demo
from mfumon.exporter.demo.simcluster import ClusterSpec, Lifecycle, default_cluster
from tests.conftest import LiveServer
from tests.utils.factories import metric_value


def test_job_sizes_give_the_target_mfu_with_the_dense_peaks() -> None:
    for job in default_cluster().jobs:
        m = job.model  # the model that runs (an over-claiming job reports another)
        attention = m.layers * m.heads * m.head_dim * m.seq_len
        # interface.md: training 6N + 12·L·H·Q·T, inference 2N + 4·L·H·Q·T; MFU = tokens/s x FLOPs/token / peak
        per_token = (6 * m.params + 12 * attention) if job.kind == "training" else (2 * m.params + 4 * attention)
        peak = (
            job.num_gpus
            * {
                "NVIDIA H100 80GB HBM3": 989e12,
                "NVIDIA A100-SXM4-80GB": 312e12,
                "AMD Instinct MI300X": 1307.4e12,
                "NVIDIA B200": 2250e12,
            }[job.gpu_model]
        )
        assert job.tokens_per_second(job.target_mfu) * per_token / peak == pytest.approx(job.target_mfu)


def test_simulated_cluster_shows_the_intended_picture(live_server: LiveServer) -> None:
    cluster = default_cluster(checkpoints=False)
    result = demo.run_simulation(live_server.url, duration_seconds=3.0, interval_seconds=0.5, cluster=cluster)
    # Every reporting job (9 of the 10 running ones) posts once a cycle, but the resilient one is still starting up
    # (its first 20 s); a loaded machine fits fewer cycles in 3 s.
    assert result.report_failures == 0 and result.cycles >= 2
    assert result.reports_posted == 9 * result.cycles
    assert result.batches_delivered >= 8 * 2
    with httpx.Client(base_url=live_server.url, timeout=5) as client:
        jobs = {j["job_id"]: j for j in client.get("/v1/jobs").json()["data"]}
        summary = client.get("/v1/cluster").json()
        pools = {p["name"]: p for p in summary["pools"]}
        nodes = {n["name"]: n for n in client.get("/v1/nodes").json()["data"]}
        metrics = client.get("/metrics").text
    # target, GPUs, tolerance: the simulated MFU wanders by design (training ±5 %, comm-bound ±12 %, inference ±15 %)
    targets = {
        "pretrain-llama3-8b": (0.45, 8, 0.1),
        "finetune-13b-commbound": (0.20, 4, 0.2),
        "serve-llama3-70b": (0.07, 4, 0.25),
        "pretrain-llama3-70b-b200": (0.36, 8, 0.1),
    }
    for job_id, (target, gpus, tolerance) in targets.items():
        job = jobs[job_id]
        assert job["status"] == "running"
        assert job["latest"]["mfu"] == pytest.approx(target, rel=tolerance)
        assert job["gpus_allocated"] == gpus  # from the exporters' job_id on each simulated GPU
    assert jobs["finetune-13b-commbound"]["latest"]["comm_ratio"] == pytest.approx(0.45)
    pending = jobs["pretrain-llama3-70b"]
    assert (pending["status"], pending["gpus_allocated"], pending["gpus_requested"]) == ("pending", 0, 8)

    # train-h100: 8 + 4 + 4 + 4 (the unwrapped job, which the scheduler runs) + 4 + 4 + 8 (the waterfall's jobs) + 24
    # (the three-node job) held of those + 8 (queued) requested.
    assert pools["train-h100"]["resource_satisfaction"] == pytest.approx(60 / 68)
    assert pools["infer-a100"]["resource_satisfaction"] == pytest.approx(1.0)
    # The simulated scheduler: two unreported sweeps leave 3 + 3 GPUs free, so the queued 4-GPU job fits nowhere.
    assert pools["research-h100"]["resource_satisfaction"] == pytest.approx(10 / 14)
    assert (jobs["sweep-lr-a"]["source"], jobs["sweep-lr-a"]["gpus_allocated"]) == ("demo-slurm", 5)
    assert jobs["pretrain-llama3-70b"]["source"] == "demo-slurm"
    with httpx.Client(base_url=live_server.url, timeout=5) as client:
        text = client.get("/metrics").text
    assert 'mfumon_pool_fragmented_gpus{pool="research-h100"} 4' in text
    assert 'mfumon_pool_largest_free_block_gpus{pool="research-h100"} 3' in text

    assert len(nodes) == 15 and all(len(n["gpus"]) == 8 for n in nodes.values())
    pools_seen = {n["pool"] for n in nodes.values()}
    assert pools_seen == {"train-h100", "infer-a100", "reserve-h100", "research-h100", "train-mi300x", "train-b200"}
    # The B200 job's MFU is against the B200's own dense bf16 peak; the node read through a current dcgm-exporter
    # (canonical names) sends what a directly read node sends, its tensor activity from cycle counters.
    assert jobs["pretrain-llama3-70b-b200"]["latest"]["device"] == "b200"
    # The vLLM-style engine's own MFU estimate sits beside ours, within the tolerance that would make a finding.
    serve = jobs["serve-chat-70b"]["latest"]
    assert serve["engine_mfu"] == pytest.approx(serve["mfu"], rel=0.1)
    dcgm_node = nodes["gpu-h100-06"]["gpus"]
    assert all(g["counters"]["tensor_active_exact"] == 1 for g in dcgm_node)
    assert all(g["hardware_estimate_source"] == "cycle_counters" for g in dcgm_node)
    assert {g["hardware_estimate_source"] for g in nodes["gpu-h100-01"]["gpus"]} == {"ratio_clock"}
    assert set(dcgm_node[0]["counters"]) >= {"sm_clock_hz", "memory_used_bytes", "energy_joules_total", "pcie_link_gen"}
    idle = [*nodes["gpu-h100-02"]["gpus"][4:7], *nodes["gpu-h100-03"]["gpus"]]
    assert all(g["job_id"] is None and g["counters"]["tensor_active"] == 0 and g["state"] == "idle" for g in idle)
    # The GPUs' tensor activity is consistent with their job's MFU: the pipe is ~1.15x busier than MFU, and this
    # job recomputes activations (8/6 of the model FLOPs executed).
    trained = [g for g in nodes["gpu-h100-01"]["gpus"]]
    pretrain = jobs["pretrain-llama3-8b"]
    mfu = pretrain["latest"]["mfu"]
    assert pretrain["latest"]["hfu"] == pytest.approx(mfu * 8 / 6)
    assert all(g["job_id"] == "pretrain-llama3-8b" for g in trained)
    assert all(g["counters"]["tensor_active"] / mfu == pytest.approx(1.15 * 8 / 6, rel=0.1) for g in trained)
    assert pretrain["accounting"]["verdict"] == "consistent"

    # Cluster truth: 120 GPUs, every one in a state; the over-claiming job is caught, the unwrapped one estimated.
    # The serving jobs' 11 GPUs are reporting once the exporter's first inference report for each has arrived; the
    # resilient job's 4 while it starts up are held by a job that has not reported yet.
    states = {s: summary[f"gpus_{s}"] for s in ("reporting", "unreported", "idle", "down")}
    # Idle: 3 in the busy pools, the 8 of reserve-h100, 3 + 3 the research sweeps leave; busy: 93 (one of them the
    # GPU two evaluation harnesses share: one GPU, in one state; 8 the MI300X job's, 8 the B200 job's, 24 the
    # three-node job's) + the sweeps' 10.
    assert (states["idle"], states["down"]) == (17, 0)
    assert 72 <= states["reporting"] <= 83 and states["reporting"] + states["unreported"] == 103
    assert sum(states.values()) == summary["gpus_known"] == 120
    assert summary["reported_coverage"] == pytest.approx(states["reporting"] / 103)
    # The AMD node: its job's MFU against the MI300X's own dense peak, and no hardware estimate to check it with.
    amd = jobs["pretrain-llama3-8b-mi300x"]
    assert (amd["latest"]["device"], amd["gpus_allocated"]) == ("mi300x", 8)
    assert amd["latest"]["mfu"] == pytest.approx(0.38, rel=0.1)  # its simulated target, above the alert bar
    assert amd["hardware_mfu"] is None and amd["accounting"]["message"].startswith("no hardware counter")
    assert all("tensor_active" not in g["counters"] for g in nodes["gpu-mi300x-01"]["gpus"])
    shared = nodes["gpu-a100-02"]["gpus"][7]
    assert (shared["job_id"], shared["state"]) == ("eval-harness-a", "unreported")  # the largest share; none reports
    assert metric_value(metrics, "mfumon_gpu_jobs", node="gpu-a100-02", gpu="7", uuid=shared["uuid"]) == 2
    assert metric_value(metrics, "mfumon_job_gpus_unreported", job_id="eval-harness-b") is not None
    over = jobs["finetune-7b-overclaim"]
    assert over["mfu_hardware_agreement"] == pytest.approx(1.63, rel=0.15)
    assert over["accounting"]["verdict"] == "over_claims"
    unwrapped = jobs["sweep-unwrapped-17"]  # the scheduler runs it; it never reports ...
    assert (unwrapped["status"], unwrapped["last_report_at"], unwrapped["accounting"]) == ("running", None, None)
    assert metric_value(metrics, "mfumon_job_gpus_unreported", job_id="sweep-unwrapped-17") == 4  # ... the GPUs tell
    assert metric_value(metrics, "mfumon_job_hardware_mfu_ratio", job_id="sweep-unwrapped-17") == pytest.approx(
        0.35 * 1.15, rel=0.15
    )
    stray = nodes["gpu-h100-02"]["gpus"][7]
    assert (stray["job_id"], stray["state"]) == (None, "unreported")


def test_simulated_cluster_shows_its_health_story(live_server: LiveServer) -> None:
    """A flapping link under the comm-bound job, a GPU waiting for a reset, an idle pool drawing power."""
    cluster = default_cluster(checkpoints=False)
    fast = {"gpu-h100-02": {"flapping_link_every_seconds": 1.5}, "gpu-a100-02": {"fault_after_seconds": 1.0}}
    cluster = dataclasses.replace(
        cluster, nodes=tuple(dataclasses.replace(n, **fast.get(n.name, {})) for n in cluster.nodes)
    )
    demo.run_simulation(live_server.url, duration_seconds=4.0, interval_seconds=0.5, cluster=cluster)
    with httpx.Client(base_url=live_server.url, timeout=5) as client:
        drain = {n["name"]: n["health"] for n in client.get("/v1/nodes", params={"drain": "true"}).json()["data"]}
        job = client.get("/v1/jobs/finetune-13b-commbound").json()
        metrics = client.get("/metrics").text
    assert set(drain) == {"gpu-h100-02", "gpu-a100-02"}
    assert "ib_link_flapping" in {r["check"] for r in drain["gpu-h100-02"]["reasons"]}
    for check in ("row_remap_pending", "row_remap_uncorrectable"):  # the remap waits, and its count just grew
        failing = [r for r in drain["gpu-a100-02"]["reasons"] if r["check"] == check]
        assert [r["gpu"] for r in failing] == [5], check
    # The comm-bound job's exposed communication has a named cause: its node's link.
    assert [n["node"] for n in job["health"]["unhealthy_nodes"]] == ["gpu-h100-02"]
    assert "ib_link_flapping" in job["health"]["unhealthy_nodes"][0]["failing"]
    assert metric_value(metrics, "mfumon_pool_idle_energy_joules_total", pool="reserve-h100") > 0
    assert metric_value(metrics, "mfumon_pool_idle_gpu_seconds_total", pool="reserve-h100") > 0
    assert metric_value(metrics, "mfumon_pool_gpu_faults_total", pool="infer-a100") == 1


def test_simulated_cluster_shows_where_the_gpu_hours_go(live_server: LiveServer) -> None:
    """The resilient job starts, saves, fails once and restarts; the data-bound job and the straggler are diagnosed."""
    cluster = default_cluster(checkpoints=False)
    # Steps 1.0-3.4, saves 3.4-4.0, steps 4.0-6.0 and fails: two seconds of progress lost, wide enough for a report
    # to land in it however slowly a loaded machine runs the simulation's cycles; back at 7.0, stepping from 8.0.
    quick = Lifecycle(
        init_seconds=1.0, checkpoint_every_seconds=3.0, checkpoint_seconds=0.6, fail_at_seconds=6.0, down_seconds=1.0
    )
    # Without the simulated NCCL Inspector dumps (other tests read them): four nodes writing files every cycle slow
    # a loaded machine's cycles enough to miss the seconds between a save and the failure.
    resilient_id = "pretrain-3b-resilient"
    jobs = tuple(
        dataclasses.replace(j, lifecycle=quick if j.job_id == resilient_id else j.lifecycle, collectives=None)
        for j in cluster.jobs
    )
    demo.run_simulation(
        live_server.url, duration_seconds=10.0, interval_seconds=0.25, cluster=dataclasses.replace(cluster, jobs=jobs)
    )
    with httpx.Client(base_url=live_server.url, timeout=5) as client:
        resilient = client.get("/v1/jobs/pretrain-3b-resilient").json()
        events = [e["type"] for e in client.get("/v1/jobs/pretrain-3b-resilient/events").json()["data"]]
        data_bound = client.get("/v1/jobs/finetune-8b-databound/diagnosis").json()
        straggler = client.get("/v1/jobs/pretrain-13b-straggler/diagnosis").json()
        metrics = client.get("/metrics").text
    assert (resilient["status"], resilient["restarts"], resilient["failures"]) == ("running", 1, 1)
    assert events[0] == "init" and "checkpoint_save" in events
    assert events[events.index("failure") :][:3] == ["failure", "restart", "init"]
    parts = {row["category"]: row["gpu_seconds"] for row in resilient["waterfall"]}
    assert all(parts[c] > 0 for c in ("init", "checkpoint", "stalled", "lost", "compute")), parts

    assert data_bound["findings"][0]["cause"] == "data_loading"
    assert data_bound["findings"][0]["evidence"]["share_of_step_time"] == pytest.approx(0.35)

    causes = {f["cause"]: f for f in straggler["findings"]}
    slowest = causes["stragglers"]["evidence"]["slowest_gpus"][0]
    assert (slowest["node"], slowest["gpu"], slowest["role"]) == ("gpu-h100-06", 5, "sets the pace")
    assert (slowest["verdict"], slowest["because"]) == ("slow rank", ["thermal"])  # its failing health check
    (hot,) = causes["throttling"]["evidence"]["throttled_gpus"]
    assert (hot["node"], hot["gpu"], hot["clock_ratio"]) == ("gpu-h100-06", 5, pytest.approx(0.6))
    spread = metric_value(metrics, "mfumon_job_gpu_tensor_active_spread_ratio", job_id="pretrain-13b-straggler")
    assert spread == pytest.approx(0.4, abs=0.05)  # the hot GPU's tensor pipes busy 1 / 0.6 as long


THREE_NODE_JOB = "pretrain-llama3-70b-3node"


def _three_node_run(url: str) -> tuple[str, dict[str, Any]]:
    """The demo's three-node job alone on its nodes, its step shortened to 0.5 s so that every 0.5 s push of each node
    carries every group's records (the same rounds, more often); /metrics and its diagnosis after 4 s."""
    cluster = default_cluster(checkpoints=False)
    (job,) = [j for j in cluster.jobs if j.job_id == THREE_NODE_JOB]
    names = {name for name, _ in job.placement}
    alone = ClusterSpec(
        nodes=tuple(n for n in cluster.nodes if n.name in names), jobs=(dataclasses.replace(job, step_seconds=0.5),)
    )
    demo.run_simulation(url, duration_seconds=4.0, interval_seconds=0.5, cluster=alone)
    with httpx.Client(base_url=url, timeout=5) as client:
        return client.get("/metrics").text, client.get(f"/v1/jobs/{THREE_NODE_JOB}/diagnosis").json()


def test_simulated_links_across_nodes_are_judged_against_the_ports(live_server: LiveServer) -> None:
    """Issue 61 across nodes: the pipeline's links between nodes against the weaker end's ports per GPU (two 400 Gb/s
    ports over 8 GPUs: 12.5 GB/s), 88 % of it between the healthy nodes, ~44 % where one end is the slow node: judged
    (32 MiB messages) and not slow_link's (below 25 %)."""
    metrics, diagnosis = _three_node_run(live_server.url)
    ratios = {
        pair: metric_value(
            metrics, "mfumon_job_link_expected_ratio", job_id=THREE_NODE_JOB, node=pair[0], peer_node=pair[1]
        )
        for pair in (("gpu-h100-07", "gpu-h100-08"), ("gpu-h100-07", "gpu-h100-09"), ("gpu-h100-08", "gpu-h100-09"))
    }
    healthy = metric_value(
        metrics,
        "mfumon_job_link_bus_bandwidth_bytes_per_second",
        job_id=THREE_NODE_JOB,
        node="gpu-h100-07",
        peer_node="gpu-h100-09",
    )
    assert healthy is not None and healthy == pytest.approx(11e9, rel=0.05)
    assert ratios[("gpu-h100-07", "gpu-h100-09")] == pytest.approx(healthy / 12.5e9, rel=1e-6)
    assert ratios[("gpu-h100-07", "gpu-h100-08")] == pytest.approx(0.44, rel=0.08)
    assert ratios[("gpu-h100-08", "gpu-h100-09")] == pytest.approx(0.44, rel=0.08)
    assert "slow_link" not in {f["cause"] for f in diagnosis["findings"]}


def test_simulated_slow_node_is_named(live_server: LiveServer) -> None:
    """gpu-h100-08's collectives across nodes run at a third of the other nodes' bandwidth: slow_collective_node."""
    _metrics, diagnosis = _three_node_run(live_server.url)
    causes = {f["cause"]: f for f in diagnosis["findings"]}
    evidence = causes["slow_collective_node"]["evidence"]
    assert evidence["node"] == "gpu-h100-08" and evidence["group"] in {"dp", "pp"}
    assert evidence["bus_bandwidth_bytes_per_second"] < 0.4 * evidence["others_median_bytes_per_second"]
    assert "slow_rank" not in causes and "slow_link" not in causes


def test_demo_command_starts_the_aggregator_and_stops(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    rc = demo.main(["--port", "0", "--duration", "1.5", "--interval", "0.5", "--data-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    found = re.search(r"aggregator at http://127\.0\.0\.1:(\d+) ", out)
    assert found, out  # port 0: the banner names the port the server bound
    port = int(found.group(1))
    first_address = re.search(r"http://\S+", out)
    assert first_address and first_address.group(0) == f"http://127.0.0.1:{port}/ui"  # the pages come first
    for path in ("/metrics", "/docs", "/v1/cluster"):
        assert f"http://127.0.0.1:{port}{path}" in out
    assert "stopped after" in out
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)  # the aggregator went down with the demo


def test_serving_engines_are_read_through_their_metrics(live_server: LiveServer) -> None:
    """The demo's vLLM- and TGI-style endpoints, read by the real inference collector, give the intended picture."""
    cluster = default_cluster(checkpoints=False)
    demo.run_simulation(live_server.url, duration_seconds=6.0, interval_seconds=0.5, cluster=cluster)
    with httpx.Client(base_url=live_server.url, timeout=5) as client:
        jobs = {j["job_id"]: j for j in client.get("/v1/jobs").json()["data"]}
    for job in cluster.serving:
        served = jobs[job.job_id]
        assert served["kind"] == "inference" and served["gpus_allocated"] == job.num_gpus
        assert served["team"] == job.team  # the endpoint's options reach the job
        assert served["latest"]["mbu"] == pytest.approx(job.target_mbu, rel=0.35)
    chat = jobs["serve-chat-70b"]["latest"]
    assert chat["inference"]["batch_size"] == pytest.approx(32, rel=0.1)
    assert chat["inference"]["context_tokens"] == pytest.approx(1000, rel=0.1)  # prompt 800 + half of 400
    code = jobs["serve-code-8b"]["latest"]
    assert code["requests_waiting"] > 0 and code["kv_cache_usage"] < 0.2  # badly batched: a queue, room to spare
    rag = jobs["serve-rag-32b"]["latest"]
    assert rag["kv_cache_usage"] == pytest.approx(0.97) and rag["requests_waiting"] > 0
    assert rag["inference"]["phases"]["prefill"]["active_mfu"] == pytest.approx(0.15, rel=0.05)
    assert jobs["serve-llama3-70b"]["latest"]["mbu"] is None  # the hand-reporting job sends no phase split


def test_demo_on_a_busy_port_fails_at_once(
    live_server: LiveServer, tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 10 #9: the demo used to print its banner and push its cluster into whatever listened on the port."""
    rc = demo.main(["--port", str(live_server.port), "--duration", "60", "--data-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 1
    assert "aggregator at" not in out and "stopped after" not in out  # no banner, no simulation
    assert f"could not start on 127.0.0.1:{live_server.port}" in err and "Address already in use" in err
    assert "--port" in err
    with httpx.Client(base_url=live_server.url, timeout=5) as client:
        assert client.get("/v1/jobs").json()["count"] == 0  # nothing was sent to the server already there
        assert client.get("/v1/nodes").json()["count"] == 0


def test_simulated_profile_gives_the_profile_panels_data(live_server: LiveServer) -> None:
    """The demo asks its comm-bound job for a profile and answers the request its report answers carry."""
    # The request rides one report's answer and the profile the next ones: the simulation runs until the profile
    # is back and one more report has followed it, not for a fixed time (3 s once left it "requested" on a loaded
    # machine). The deadline only bounds a broken run.
    stop = threading.Event()
    runner = threading.Thread(
        target=demo.run_simulation,
        args=(live_server.url,),
        kwargs={"duration_seconds": 120.0, "interval_seconds": 0.5, "stop_event": stop, "cluster": default_cluster()},
    )
    runner.start()
    with httpx.Client(base_url=live_server.url, timeout=5) as client:
        try:
            done: list[dict[str, Any]] = []
            while runner.is_alive() and not done:
                time.sleep(0.25)
                profiles = client.get("/v1/jobs/finetune-13b-commbound/profiles").json()["data"]
                done = [p for p in profiles if p["status"] == "done"]
            after = client.get("/v1/jobs/finetune-13b-commbound").json()["reports_received"]
            while (
                runner.is_alive() and client.get("/v1/jobs/finetune-13b-commbound").json()["reports_received"] <= after
            ):
                time.sleep(0.25)
        finally:
            stop.set()
            runner.join()
        profile = done[0]
        job = client.get("/v1/jobs/finetune-13b-commbound").json()
        findings = {f["cause"] for f in client.get("/v1/jobs/finetune-13b-commbound/diagnosis").json()["findings"]}
        metrics = client.get("/metrics").text
    assert profile["status"] == "done" and profile["ranks_reported"] == [0, 1, 2, 3]
    assert profile["requested_by"] == "anonymous" and profile["delivered_at"] is not None  # through the report path
    assert profile["exposed_comm_ratio"] == pytest.approx(0.45)
    assert job["latest"]["comm_source"] == "profile"
    assert {"exposed_tp_communication", "exposed_dp_communication"} <= findings
    assert (
        'mfumon_job_profile_exposed_comm_ratio{job_id="finetune-13b-commbound",kind="training",group="tp"} 0.3'
        in metrics
    )
