"""schemathesis hooks: positive cases follow the rules the OpenAPI document states in words only.

JSON Schema says what one value may be, and (``anyOf``, ``required``) which fields go together; the document
carries every such rule. A few rules compare values with each other, with the server's clock or with what is
stored, and no JSON Schema keyword can state them; the document gives each in words, with the 422 that answers it
(``mfumon.api.openapi.invalid_when`` and the schemas' descriptions), and the server enforces each (tests in
``test_validation.py``). A generated "positive" case that breaks one of them is not valid data, so
``positive_data_acceptance`` would count the server's 422 as a failure: here each such case is brought within the
rule, changing as little as it can (a value lowered to its bound, a duplicate dropped), before it is sent. Negative
cases are left alone. Each rule below names the text of the document it follows.

Loaded with ``SCHEMATHESIS_HOOKS=<this file>`` by ``test_openapi_conformance.py``.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import schemathesis
from schemathesis import Case, HookContext
from schemathesis.generation.modes import GenerationMode

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from mfumon.api.schemas._common import BLANKS, MAX_TOKENS_PER_SECOND, param_count
from mfumon.api.services.usage import parse_time

MAX_INT = 10_000_000  # PositiveInt's bound


def _positive(case: Case) -> bool:
    meta = case.meta
    return meta is None or meta.generation.mode is GenerationMode.POSITIVE


def _not_ahead(body: dict[str, Any], field: str) -> None:
    """CLOCK_SKEW_RULE: a client time at most MFUMON_MAX_CLOCK_SKEW_SECONDS ahead of the aggregator's clock."""
    value = body.get(field)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > time.time():
        body[field] = time.time()


def _unique(items: Any, key: Any) -> Any:
    """The first item of each key kept: "each `uuid` once", "each (`device`, `port`) once", "each job_id once",
    "each (`component`, `version`) once"."""
    if not isinstance(items, list):
        return items
    seen, kept = set(), []
    for item in items:
        k = key(item) if isinstance(item, dict) else None
        if k is None or k not in seen:
            seen.add(k)
            kept.append(item)
    return kept


def _model(body: dict[str, Any], *, required: bool) -> None:
    """ModelSpec: `active_params` at most `params`, `kv_heads` at most `heads`; a report's job needs a model."""
    model = body.get("model")
    if not isinstance(model, dict):
        if required:
            body["model"] = {"params": 7e9}
        return
    for part, whole in (("active_params", "params"), ("kv_heads", "heads")):
        if model.get(part) is None or model.get(whole) is None:
            continue
        count = param_count if part == "active_params" else float  # params may be "7B" (ParamCount)
        if count(model[part]) > count(model[whole]):
            model[part] = model[whole]


def _layout(body: dict[str, Any]) -> None:
    """_LAYOUT_RULE: `num_gpus` a multiple of tensor x pipeline x context."""
    layout, num_gpus = body.get("parallelism"), body.get("num_gpus")
    if isinstance(layout, dict) and num_gpus is not None:
        size = math.prod(layout.get(k, 1) for k in ("tensor", "pipeline", "context"))
        if num_gpus % size:
            layout.update(tensor=1, pipeline=1, context=1)


def _report(body: dict[str, Any]) -> None:
    """JobReportCreate's description: the bound on tokens (or the phases') / interval_seconds, the phases' tokens
    and kind."""
    _model(body, required=True)
    _layout(body)
    phases = body.get("prefill_tokens") is not None or body.get("decode_tokens") is not None
    if phases:
        body["kind"] = "inference"
        body.pop("tokens", None)
    for name in ("ttft_histogram", "tpot_histogram", "itl_histogram", "queue_histogram"):
        _histogram(body.get(name))
    interval = body.get("interval_seconds")
    if interval is None:
        return
    for name, share in (("tokens", 1.0), ("prefill_tokens", 0.5), ("decode_tokens", 0.5)):
        if body.get(name) is not None and body[name] / interval > share * MAX_TOKENS_PER_SECOND:
            body[name] = math.floor(interval * share * MAX_TOKENS_PER_SECOND)


def _histogram(histogram: Any) -> None:
    """LatencyHistogram's description: `le` strictly ascending, `counts` as many and cumulative, `count` at least
    the last of them."""
    if not isinstance(histogram, dict):
        return
    edges = sorted(set(histogram.get("le") or []))
    counts = sorted(histogram.get("counts") or [])[: len(edges)]
    edges = edges[: len(counts)]
    histogram["le"], histogram["counts"] = edges, counts
    histogram["count"] = max(histogram.get("count") or 0, counts[-1] if counts else 0)


def _scheduler(body: dict[str, Any]) -> None:
    """SchedulerSync's and SchedulerJob's descriptions: unique ids, quotas and pool names, units and placement add
    up."""
    _not_ahead(body, "observed_at")
    if "jobs" in body:
        body["jobs"] = _unique(body["jobs"], lambda job: job.get("job_id"))
    if "quotas" in body:
        body["quotas"] = _unique(body["quotas"], lambda q: (_label(q.get("team")), _label(q.get("pool"))))
    if isinstance(body.get("pools"), list):
        body["pools"] = _unique(body["pools"], lambda pool: _label(pool.get("name")))
    for job in body.get("jobs") if isinstance(body.get("jobs"), list) else ():
        if not isinstance(job, dict):
            continue
        units = job.get("units")
        if units is not None:
            total = sum(g * n for g, n in units)
            if 1 <= total <= MAX_INT:
                job["gpus_requested"] = total
            else:
                job["units"] = None
        placement = job.get("placement")
        if placement is not None and job.get("gpus_allocated") is not None:
            placed = sum(placement.values())
            if placed <= MAX_INT:
                job["gpus_allocated"] = placed
            else:
                job["placement"] = None


def _remediation(body: dict[str, Any]) -> None:
    """RemediationCreate: `timestamp` within the clock skew, `failing_since` at most `timestamp`."""
    _not_ahead(body, "timestamp")
    since, at = body.get("failing_since"), body.get("timestamp")
    if isinstance(since, (int, float)) and isinstance(at, (int, float)) and since > at:
        body["failing_since"] = at


def _label(value: Any) -> Any:
    """A label as the server keeps it (Text: surrounding blanks stripped)."""
    return value.strip(BLANKS) if isinstance(value, str) else value


def _usage(query: dict[str, Any], default_since: str = "7d") -> None:
    """invalid_when on GET /v1/usage, GET /v1/regressions and /v1/chargeback (default since 30d): `since` before
    `until` (or now)."""

    def start_end() -> tuple[float, float]:
        now = time.time()
        until = query.get("until")
        return parse_time(str(query.get("since", default_since)), now=now, field="since"), (
            now if until is None else parse_time(str(until), now=now, field="until")
        )

    try:
        start, end = start_end()
        if start >= end:
            query.pop("until", None)
            start, end = start_end()
        if start >= end:
            query["since"] = "7d"
    except ValueError:
        pass  # not valid by the pattern either: the server's 422 is right


def _metrics(query: dict[str, Any]) -> None:
    """invalid_when on GET /metrics: `shard` and `shards` together, `shard` below `shards`."""
    if query.get("shard") is None or query.get("shards") is None:
        query.pop("shard", None)
        query.pop("shards", None)
        return
    try:
        shard, shards = int(query["shard"]), int(query["shards"])
    except (TypeError, ValueError):
        return  # not integers: the server's 422 is right
    if shard >= 0 and shards >= 1 and shard >= shards:
        query["shard"] = shard % shards if isinstance(query["shard"], int) else str(shard % shards)


def _profile_summary(body: dict[str, Any]) -> None:
    """invalid_when on POST /v1/jobs/{job_id}/profiles: no part above its whole, each group once; and
    CLOCK_SKEW_RULE on `captured_at`."""
    _not_ahead(body, "captured_at")
    numbers = (int, float)
    span = body.get("span_seconds")
    if not isinstance(span, numbers) or isinstance(span, bool):
        return
    for field in ("compute_seconds", "comm_seconds", "idle_seconds"):
        if isinstance(body.get(field), numbers) and body[field] > span:
            body[field] = span
    comm = body.get("comm_seconds")
    if isinstance(comm, numbers) and isinstance(body.get("exposed_comm_seconds"), numbers):
        body["exposed_comm_seconds"] = min(body["exposed_comm_seconds"], comm)
    groups = body.get("groups")
    if isinstance(groups, list):
        groups = _unique([g for g in groups if isinstance(g, dict)], lambda g: g.get("group"))
        for group in groups:
            if isinstance(group.get("comm_seconds"), numbers):
                group["comm_seconds"] = min(group["comm_seconds"], span)
                if isinstance(group.get("exposed_seconds"), numbers):
                    group["exposed_seconds"] = min(group["exposed_seconds"], group["comm_seconds"])
        body["groups"] = groups


def _shares(gpu: dict[str, Any]) -> None:
    """GpuSample.shares' description: each job once, adding up to 1, `job_id` among them, never on a MIG instance."""
    shares = gpu.get("shares")
    if not isinstance(shares, list):
        return
    shares = _unique([s for s in shares if isinstance(s, dict)], lambda s: s.get("job_id"))
    if gpu.get("mig_profile") is not None or len(shares) < 2:
        gpu["shares"] = None
        return
    total = sum(s.get("share", 0.0) for s in shares)
    for s in shares:
        s["share"] = s.get("share", 0.0) / total if total > 0 else 1.0 / len(shares)
    gpu["shares"] = shares
    if gpu.get("job_id") is not None and gpu["job_id"] not in {s.get("job_id") for s in shares}:
        gpu["job_id"] = shares[0].get("job_id")


@schemathesis.hook
def map_case(context: HookContext, case: Case) -> Case:
    if not _positive(case):
        return case
    operation = f"{case.method.upper()} {case.path}"
    body = case.body if isinstance(case.body, dict) else None
    query = case.query if isinstance(case.query, dict) else None
    if operation == "POST /v1/nodes/{node}/samples" and body is not None:
        _not_ahead(body, "timestamp")
        if "gpus" in body:
            body["gpus"] = _unique(body["gpus"], lambda gpu: gpu.get("uuid"))
            for gpu in body["gpus"] if isinstance(body["gpus"], list) else ():
                if isinstance(gpu, dict):
                    _shares(gpu)
        if "ib_ports" in body:
            body["ib_ports"] = _unique(body["ib_ports"], lambda port: (port.get("device"), port.get("port")))
        if "software" in body:
            body["software"] = _unique(body["software"], lambda entry: (entry.get("component"), entry.get("version")))
        if "collectives" in body:  # each (job_id, group, collective) once, as the schema states in words
            body["collectives"] = _unique(
                body["collectives"], lambda row: (row.get("job_id"), row.get("group"), row.get("collective"))
            )
        if "collective_ranks" in body:  # each (job_id, comm_id, collective, rank, peer) once
            body["collective_ranks"] = _unique(
                body["collective_ranks"],
                lambda row: tuple(row.get(k) for k in ("job_id", "comm_id", "collective", "rank", "peer")),
            )
    elif operation == "POST /v1/jobs/{job_id}/reports" and body is not None:
        _report(body)
    elif operation == "PUT /v1/jobs/{job_id}" and body is not None:
        _model(body, required=False)
        _layout(body)
    elif operation == "POST /v1/jobs/{job_id}/events" and body is not None:
        _not_ahead(body, "timestamp")
    elif operation == "POST /v1/jobs/{job_id}/profiles" and body is not None:
        _profile_summary(body)
    elif operation == "POST /v1/remediations" and body is not None:
        _remediation(body)
    elif operation == "PUT /v1/scheduler/{source}" and body is not None:
        _scheduler(body)
    elif operation == "GET /v1/usage" and query is not None:
        _usage(query)
    elif operation in ("GET /v1/regressions", "GET /v1/chargeback") and query is not None:
        _usage(query, default_since="30d")
    elif operation == "GET /metrics" and query is not None:
        _metrics(query)
    return case
