"""100,000 GPUs scraped by a real Prometheus: sharded scrapes and the project's rules, measured in one run.

    .venv/bin/python bench/fleet_scrape.py --out bench/results/cpu-2026-12-03-fleet
    .venv/bin/python bench/fleet_scrape.py --gpus 10000 --seconds 120     # a smaller cluster

One ``mfumon serve`` (or ``--replicas`` of them on ``--postgres-url``, as docs/operators/scale.md documents) holds
``--gpus`` simulated GPUs (nodes of 8, jobs of 32, every node pushed once first, then the load generator of
``bench/loadgen.py`` pushes every node every ``--push-interval`` seconds, open loop, for ``--seconds``). A real
``prometheus`` scrapes ``/metrics?shard=I&shards=N`` as N targets of the job ``mfumon-aggregator`` (the config
docs/operators/scale.md shows) every ``--scrape-interval`` seconds, with deploy/prometheus/rules loaded and evaluated
at the same interval, and an external ``cluster`` label. Then it reads from Prometheus itself: each shard's
``scrape_duration_seconds`` (max and mean over the run) against its interval, samples per scrape, samples refused
(out of order, duplicate timestamps, out of bounds, over a limit), every rule group's
``prometheus_rule_group_last_duration_seconds`` (max over the run) against its interval, missed iterations and
failed evaluations, head series; and from the aggregator its refused pushes. Writes report.md and results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from aggregator_scale import GPUS_PER_JOB, GPUS_PER_NODE, Databases, fill, mfumon, push_targets  # noqa: E402
from loadgen import LoadResult, run_load  # noqa: E402

from tests.conftest import stop_process, wait_for_listening  # noqa: E402

_PROMETHEUS_LISTENING = re.compile(r'msg="Listening on"[^\n]*? address=(127\.0\.0\.1:\d+)')
_INGEST_OUTCOMES = re.compile(r'^mfumon_ingest_requests_total\{[^}]*outcome="([^"]+)"[^}]*\} (\S+)$', re.M)
REFUSED_SAMPLES = (
    "prometheus_target_scrapes_sample_out_of_order_total",
    "prometheus_target_scrapes_sample_duplicate_timestamp_total",
    "prometheus_target_scrapes_sample_out_of_bounds_total",
    "prometheus_target_scrapes_exceeded_sample_limit_total",
    "prometheus_target_scrapes_exceeded_body_size_limit_total",
)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def prometheus_config(urls: list[str], shards: int, interval: int, rules: Path) -> dict[str, Any]:
    """The documented sharded scrape (one job, one target per shard and replica) with the shipped rules."""
    static = [
        {"targets": [u.removeprefix("http://")], "labels": {"__param_shard": str(i), "__param_shards": str(shards)}}
        for i in range(shards)
        for u in urls[i % len(urls) : i % len(urls) + 1]  # shard i on replica i mod R: replicas share the work
    ]
    return {
        "global": {
            "scrape_interval": f"{interval}s",
            "evaluation_interval": f"{interval}s",
            "external_labels": {"cluster": "bench"},
        },
        "rule_files": [str(rules / "*.yml")],
        "scrape_configs": [
            {
                "job_name": "mfumon-aggregator",
                "scrape_interval": f"{interval}s",
                "scrape_timeout": f"{interval}s",
                "static_configs": static,
                "relabel_configs": [
                    {
                        "source_labels": ["__address__", "__param_shard"],
                        "separator": "/shard-",
                        "target_label": "instance",
                    }
                ],
            }
        ],
    }


def rules_at(interval: int, target: Path) -> Path:
    """The shipped rules, every group at the scrape interval (a group's own `interval:` kept when it is longer)."""
    target.mkdir()
    for path in sorted((ROOT / "deploy" / "prometheus" / "rules").glob("*.yml")):
        data = yaml.safe_load(path.read_text())
        for group in data["groups"]:
            own = group.get("interval")
            if own is not None and int(str(own).rstrip("m")) * 60 < interval:
                group.pop("interval")
        (target / path.name).write_text(yaml.safe_dump(data, sort_keys=False))
    return target


def start_prometheus(config: dict[str, Any], work: Path) -> tuple[subprocess.Popen[bytes], str]:
    path = work / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    log_path = work / "prometheus.log"
    cmd = [
        shutil.which("prometheus") or "prometheus",
        f"--config.file={path}",
        f"--storage.tsdb.path={work / 'tsdb'}",
        "--web.listen-address=127.0.0.1:0",
        "--storage.tsdb.retention.time=2h",
    ]
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=work)
    url = "http://" + wait_for_listening(proc, log_path, _PROMETHEUS_LISTENING).group(1)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/-/ready", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"prometheus not ready:\n{log_path.read_text()[-2000:]}")


def query(url: str, expr: str) -> list[dict[str, Any]]:
    body = httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=60).json()
    if body["status"] != "success":
        raise RuntimeError(f"{expr}: {body}")
    return list(body["data"]["result"])


def scalar(url: str, expr: str) -> float:
    result = query(url, expr)
    return float(result[0]["value"][1]) if result else 0.0


def self_metrics(url: str) -> dict[str, dict[str, float]]:
    """Prometheus' own /metrics (it does not scrape itself here): family -> rule group or "" -> value."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            file, _, name = sample.labels.get("rule_group", "").rpartition(";")
            group = f"{Path(file).stem}/{name}" if file else name
            out.setdefault(sample.name, {})
            out[sample.name][group] = out[sample.name].get(group, 0.0) + sample.value
    return out


def prometheus_version() -> str:
    out = subprocess.run(["prometheus", "--version"], capture_output=True, text=True, check=False)
    return (out.stdout or out.stderr).splitlines()[0].strip()


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    nodes = args.gpus // GPUS_PER_NODE
    jobs = args.gpus // GPUS_PER_JOB
    dbs = Databases(work, args.postgres_url)
    results: dict[str, Any] = {
        "gpus": args.gpus,
        "nodes": nodes,
        "jobs": jobs,
        "shards": args.shards,
        "replicas": args.replicas,
        "database": "postgres" if args.postgres_url else "sqlite",
        "push_interval_s": args.push_interval,
        "scrape_interval_s": args.scrape_interval,
        "seconds": args.seconds,
        "prometheus_version": prometheus_version(),
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg(),
    }
    with ExitStack() as stack:
        stack.callback(dbs.drop_all)
        database = dbs.new(results["database"])
        servers = [stack.enter_context(mfumon(database, work)) for _ in range(args.replicas)]
        urls = [s.url for s in servers]
        log(f"{args.replicas} aggregator(s) up; filling {nodes:,} nodes ({args.gpus:,} GPUs) and {jobs:,} jobs")
        started = time.monotonic()
        fill(urls[0], nodes, jobs)
        results["fill_seconds"] = time.monotonic() - started
        rules = rules_at(args.scrape_interval, work / "rules")
        prom_work = work / "prometheus"
        prom_work.mkdir()
        proc, prom = start_prometheus(prometheus_config(urls, args.shards, args.scrape_interval, rules), prom_work)
        stack.callback(stop_process, proc, 60.0)
        log(f"prometheus {prom} scraping {args.shards} shards every {args.scrape_interval}s; load for {args.seconds}s")
        load: dict[str, LoadResult] = {}
        rate = nodes / args.push_interval

        def push() -> None:
            load["result"] = run_load(
                urls, push_targets(nodes), seconds=args.seconds, rate=rate, processes=2, connections=8
            )

        pusher = threading.Thread(target=push)
        began = time.time()
        pusher.start()
        worst_rule_durations: dict[str, float] = {}
        while pusher.is_alive() or time.time() - began < args.seconds + args.scrape_interval:
            for group, value in self_metrics(prom).get("prometheus_rule_group_last_duration_seconds", {}).items():
                worst_rule_durations[group] = max(value, worst_rule_durations.get(group, 0.0))
            time.sleep(2.0)
        pusher.join()
        window = f"{int(time.time() - began)}s"
        result = load["result"]
        results["load"] = {
            "pushes_due_per_s": rate,
            "pushes_sent": result.sent,
            "pushes_ok": result.ok,
            "pushes_refused": result.refused,
            "errors": result.errors,
            "gpu_samples_per_s": result.units_per_second,
            "p50_ms": result.percentile(0.5),
            "p99_ms": result.percentile(0.99),
            "statuses": {str(k): v for k, v in result.statuses.items()},
        }
        shards = {}
        for series in query(prom, f'max_over_time(scrape_duration_seconds{{job="mfumon-aggregator"}}[{window}])'):
            shards[series["metric"]["instance"]] = {"max_s": float(series["value"][1])}
        for name, expr in {
            "mean_s": f'avg_over_time(scrape_duration_seconds{{job="mfumon-aggregator"}}[{window}])',
            "samples": 'scrape_samples_scraped{job="mfumon-aggregator"}',
            "scrapes": f'count_over_time(up{{job="mfumon-aggregator"}}[{window}])',
            "up_min": f'min_over_time(up{{job="mfumon-aggregator"}}[{window}])',
        }.items():
            for series in query(prom, expr):
                shards.setdefault(series["metric"]["instance"], {})[name] = float(series["value"][1])
        results["shards_scraped"] = shards
        own = self_metrics(prom)
        results["refused_samples"] = {name: sum(own.get(name, {}).values()) for name in REFUSED_SAMPLES}
        groups: dict[str, dict[str, float]] = {}
        for name, key in (
            ("prometheus_rule_group_interval_seconds", "interval_s"),
            ("prometheus_rule_group_iterations_missed_total", "missed"),
            ("prometheus_rule_evaluation_failures_total", "failures"),
            ("prometheus_rule_group_iterations_total", "iterations"),
        ):
            for group, value in own.get(name, {}).items():
                groups.setdefault(group, {})[key] = value
        for group, value in worst_rule_durations.items():
            groups.setdefault(group, {})["max_s"] = value
        results["rule_groups"] = groups
        results["head_series"] = sum(own.get("prometheus_tsdb_head_series", {}).values())
        results["prometheus_rss_bytes"] = sum(own.get("process_resident_memory_bytes", {}).values())
        outcomes: dict[str, float] = {}
        for url in urls:  # the aggregator's own count of its answers, by outcome (self series are on shard 0)
            text = httpx.get(f"{url}/metrics", params={"shard": 0, "shards": args.shards}, timeout=120).text
            for match in _INGEST_OUTCOMES.finditer(text):
                outcomes[match.group(1)] = outcomes.get(match.group(1), 0.0) + float(match.group(2))
        results["aggregator_ingest_outcomes"] = outcomes
    results["load_average_end"] = os.getloadavg()
    return results


def report(r: dict[str, Any]) -> str:
    interval = r["scrape_interval_s"]
    lines = [
        f"# {r['gpus']:,} GPUs scraped by Prometheus — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        f"{r['prometheus_version']}; {r['cpus']} CPUs shared with other work (load average at start "
        f"{' '.join(f'{x:.2f}' for x in r['load_average_start'])}, at end "
        f"{' '.join(f'{x:.2f}' for x in r['load_average_end'])}).",
        f"{r['replicas']} aggregator process(es) on {r['database']}; {r['nodes']:,} nodes x 8 GPUs, {r['jobs']:,} jobs;"
        f" every node pushed every {r['push_interval_s']} s (open loop) for {r['seconds']} s; "
        f"{r['shards']} shards scraped every {interval} s (timeout {interval} s), rules evaluated every {interval} s.",
        "",
        "## Pushes",
        "",
        f"- due {r['load']['pushes_due_per_s']:,.0f}/s; sent {r['load']['pushes_sent']:,}, accepted "
        f"{r['load']['pushes_ok']:,}, refused {r['load']['pushes_refused']:,} (statuses {r['load']['statuses']}); "
        f"{r['load']['gpu_samples_per_s']:,.0f} GPU-samples/s; p50 {r['load']['p50_ms']:.1f} ms, "
        f"p99 {r['load']['p99_ms']:.1f} ms",
        f"- the aggregator's own count (mfumon_ingest_requests_total by outcome, fill included): "
        f"{ {k: int(v) for k, v in sorted(r['aggregator_ingest_outcomes'].items())} }",
        "",
        "## Shards (scrape_duration_seconds over the run)",
        "",
        "| shard | scrapes | max (s) | mean (s) | within interval | samples per scrape | up (min) |",
        "|---|---:|---:|---:|---|---:|---:|",
    ]
    for instance, s in sorted(r["shards_scraped"].items()):
        ok = "yes" if s.get("max_s", 1e9) < interval else "NO"
        lines.append(
            f"| {instance} | {s.get('scrapes', 0):.0f} | {s.get('max_s', float('nan')):.2f} | "
            f"{s.get('mean_s', float('nan')):.2f} | {ok} | {s.get('samples', 0):,.0f} | {s.get('up_min', 0):.0f} |"
        )
    lines += ["", "## Samples refused by Prometheus", ""]
    lines += [f"- {name}: {value:,.0f}" for name, value in r["refused_samples"].items()]
    lines += [
        f"- head series: {r['head_series']:,.0f}; Prometheus RSS {r['prometheus_rss_bytes'] / 2**30:.2f} GiB",
        "",
        "## Rule groups (prometheus_rule_group_last_duration_seconds, max over the run)",
        "",
        "| group | max (s) | interval (s) | within interval | missed | failed evaluations |",
        "|---|---:|---:|---|---:|---:|",
    ]
    for group, g in sorted(r["rule_groups"].items()):
        ok = "yes" if g.get("max_s", 1e9) < g.get("interval_s", 0) else "NO"
        lines.append(
            f"| {group} | {g.get('max_s', float('nan')):.3f} | {g.get('interval_s', 0):.0f} | {ok} | "
            f"{g.get('missed', 0):.0f} | {g.get('failures', 0):.0f} |"
        )
    total = sum(g.get("max_s", 0) for g in r["rule_groups"].values())
    lines += ["", f"All groups together, each at its worst: {total:.2f} s per {interval} s evaluation.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--replicas", type=int, default=1, help="aggregator processes (more than 1 needs PostgreSQL)")
    parser.add_argument("--push-interval", type=float, default=30.0, help="seconds between a node's pushes")
    parser.add_argument("--scrape-interval", type=int, default=30, help="Prometheus scrape and rule interval (s)")
    parser.add_argument("--seconds", type=float, default=240.0, help="length of the pushed and scraped window")
    parser.add_argument("--postgres-url", help="a PostgreSQL admin URL: the aggregators use a fresh database on it")
    parser.add_argument("--out", type=Path, help="write report.md and results.json here")
    args = parser.parse_args()
    if args.replicas > 1 and not args.postgres_url:
        parser.error("--replicas > 1 needs --postgres-url (replicas share one PostgreSQL)")
    with tempfile.TemporaryDirectory(prefix="mfumon-fleet-") as tmp:
        results = measure(args, Path(tmp))
    text = report(results)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report.md").write_text(text)
        (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
