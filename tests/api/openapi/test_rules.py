"""The OpenAPI document states the rules the server enforces (issue 28 #6), and the server keeps to the document.

The cursor format, ``shard`` with ``shards``, ``since < until``, the clock-skew bound and the signature format were
enforced but not documented: a client (or schemathesis) following the document was refused. Rules JSON Schema can
state are in the schemas (``anyOf``, ``required``, patterns); rules it cannot (one value against another, against
the server's clock) are in words, on the field and on the operation's 422. Here: a body or parameter the document
admits is taken, one it refuses is refused, for each such rule; and a 405 lists every method of its path.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient
from jsonschema import Draft202012Validator

from tests.utils.factories import gpu, node_sample, report

SIGNATURE = "training|llama-8b|h100-sxm|8|bf16"
EXAMPLE_PARAMS = {"job_id": "j", "node": "n", "signature": SIGNATURE, "source": "slurm"}


@pytest.fixture
def document(client: TestClient) -> dict[str, Any]:
    return client.get("/openapi.json").json()  # type: ignore[no-any-return]


def _request_schema(document: dict[str, Any], method: str, path: str) -> Draft202012Validator:
    schema = document["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
    return Draft202012Validator({**schema, "components": document["components"]})


def _parameter(document: dict[str, Any], method: str, path: str, name: str) -> dict[str, Any]:
    parameter = next(p for p in document["paths"][path][method]["parameters"] if p["name"] == name)
    return parameter  # type: ignore[no-any-return]


def _pattern(parameter: dict[str, Any]) -> str:
    schema = parameter["schema"]
    return str(schema.get("pattern") or next(s["pattern"] for s in schema.get("anyOf", []) if "pattern" in s))


def test_a_405_lists_every_method_of_its_path(client: TestClient, document: dict[str, Any]) -> None:
    """Starlette's router answered with the first matching route's methods only (``Allow: PUT`` on a path that
    has ``GET`` too)."""
    for path, operations in document["paths"].items():
        url = re.sub(r"\{(\w+)\}", lambda m: EXAMPLE_PARAMS[m.group(1)], path)
        documented = {method.upper() for method in operations}
        for method in ("OPTIONS", "PATCH", "TRACE"):
            if method in documented:
                continue
            response = client.request(method, url)
            assert response.status_code == 405, (method, url)
            allowed = {m.strip() for m in response.headers["allow"].split(",")} - {"HEAD"}
            assert allowed == documented, (method, url)


CURSOR_LISTS = [("/v1/jobs", ["6a", "6a6f622d39"]), ("/v1/nodes", ["6e"]), ("/v1/baselines", ["c3a97c78", "7a"])]


@pytest.mark.parametrize(("path", "foreign"), CURSOR_LISTS)
def test_a_cursor_is_taken_exactly_when_the_document_admits_it(
    client: TestClient, document: dict[str, Any], path: str, foreign: list[str]
) -> None:
    """The document said any of ``[A-Za-z0-9_-]{1,2800}``, and the server refused most of those (``0``)."""
    pattern = _pattern(_parameter(document, "get", path, "cursor"))
    candidates = [*foreign, "0", "AAAA", "6A", "6a6", "c3", "00", "0a", "not base64!", "x" * 201, "e280a8"]
    for cursor in candidates:
        status = client.get(path, params={"cursor": cursor}).status_code
        assert (status == 200) == bool(re.search(pattern, cursor)), (cursor, status)
    for cursor in foreign:
        assert re.search(pattern, cursor), cursor  # keys no page gave are positions too


def test_every_cursor_the_api_gives_is_one_the_document_admits(client: TestClient, document: dict[str, Any]) -> None:
    for job in ("a-1", "b.2", "c:3@x+y"):
        assert client.put(f"/v1/jobs/{job}", json={"gpus_requested": 1}).status_code == 200
    pattern = _pattern(_parameter(document, "get", "/v1/jobs", "cursor"))
    seen, cursor = [], None
    while True:
        page = client.get("/v1/jobs", params={"limit": 1, **({"cursor": cursor} if cursor else {})}).json()
        seen += [j["job_id"] for j in page["data"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert re.search(pattern, cursor), cursor
    assert seen == ["a-1", "b.2", "c:3@x+y"]


def test_shard_and_shards_go_together_as_documented(client: TestClient, document: dict[str, Any]) -> None:
    operation = document["paths"]["/metrics"]["get"]
    assert "`shard`" in operation["responses"]["422"]["description"]
    shard = _parameter(document, "get", "/metrics", "shard")["schema"]
    assert next(s for s in shard["anyOf"] if s.get("type") == "integer")["maximum"] == 1023
    assert client.get("/metrics", params={"shard": 1, "shards": 2}).status_code == 200
    for params in ({"shard": 1}, {"shards": 2}, {"shard": 2, "shards": 2}, {"shard": 1024, "shards": 1024}):
        response = client.get("/metrics", params=params)
        assert response.status_code == 422 and response.json()["detail"][0]["loc"][0] == "query", params


@pytest.mark.parametrize(
    ("schema", "field"),
    [("NodeSampleCreate", "timestamp"), ("JobEventCreate", "timestamp"), ("SchedulerSync", "observed_at")],
)
def test_the_clock_skew_bound_is_documented_on_every_client_time(
    document: dict[str, Any], schema: str, field: str
) -> None:
    assert "MFUMON_MAX_CLOCK_SKEW_SECONDS" in document["components"]["schemas"][schema]["properties"][field].get(
        "description", ""
    )


def test_the_signature_format_is_documented_and_kept(client: TestClient, document: dict[str, Any]) -> None:
    path = "/v1/baselines/{signature}"
    pin = _pattern(_parameter(document, "put", path, "signature"))
    read = _pattern(_parameter(document, "get", path, "signature"))
    cases = [
        SIGNATURE,
        "inference|a|b|h100-sxm|dp*.tp8.pp2.cp1.ep1.mbs1.ga4.seq8192|fp8",  # the model may hold '|'
        "training|llama-8b|h100-sxm|08|bf16",  # was taken: '08'.isdigit()
        "training|llama-8b|h100-sxm|\u0663|bf16",  # was taken: an Arabic-Indic digit 3 is .isdigit() too
        "training|llama-8b|h100-sxm|dp*.anything|bf16",  # was taken: only the 'dp*.' prefix was checked
        "training|llama-8b|no-such-device|8|bf16",  # a device outside the peak table: the read pattern admits it
        "training|llama-8b|h100-sxm|0|bf16",
        "finetune|llama-8b|h100-sxm|8|bf16",
        "training||h100-sxm|8|bf16",
    ]
    for signature in cases:
        status = client.put(f"/v1/baselines/{signature}", json={"mfu": 0.4}).status_code
        assert (status == 200) == bool(re.search(pin, signature)), (signature, status)
        status = client.get(f"/v1/baselines/{signature}").status_code
        assert (status != 422) == bool(re.search(read, signature)), (signature, status)


def test_the_pin_pattern_names_this_servers_devices(document: dict[str, Any]) -> None:
    pin = _pattern(_parameter(document, "put", "/v1/baselines/{signature}", "signature"))
    assert re.search(pin, SIGNATURE) and not re.search(pin, "training|m|no-such-device|8|bf16")


def _events_job(client: TestClient) -> None:
    assert client.post("/v1/jobs/j/reports", json=report()).status_code == 200


COUNT = report(tokens_per_second=None, tokens=1, interval_seconds=1)
PHASES = report(tokens_per_second=None, kind="inference", decode_tokens=100, interval_seconds=1)

# (what, method, path, body): the document's schema and the server must agree on each
BODIES: list[tuple[str, str, str, Any]] = [
    ("model with params", "put", "/v1/jobs/{job_id}", {"model": {"params": 7e9}}),
    ("model without params nor flops", "put", "/v1/jobs/{job_id}", {"model": {"layers": 32}}),
    ("model with null params", "put", "/v1/jobs/{job_id}", {"model": {"params": None, "flops_per_token": 1e9}}),
    ("model with both null", "put", "/v1/jobs/{job_id}", {"model": {"params": None, "flops_per_token": None}}),
    ("team with a tab", "put", "/v1/jobs/{job_id}", {"team": "\tllm"}),  # was stripped, then taken
    ("team with blanks around", "put", "/v1/jobs/{job_id}", {"team": "  llm \u3000"}),
    ("team of blanks only", "put", "/v1/jobs/{job_id}", {"team": " \u00a0 "}),
    ("team of 128 and blanks", "put", "/v1/jobs/{job_id}", {"team": " " + "t" * 128 + " "}),
    ("team of 129", "put", "/v1/jobs/{job_id}", {"team": "t" * 129}),
    ("report by rate", "post", "/v1/jobs/{job_id}/reports", report()),
    (
        "report by count",
        "post",
        "/v1/jobs/{job_id}/reports",
        report(tokens_per_second=None, tokens=1, interval_seconds=1),
    ),
    ("report with both", "post", "/v1/jobs/{job_id}/reports", report(tokens=10, interval_seconds=1)),
    ("report with neither", "post", "/v1/jobs/{job_id}/reports", report(tokens_per_second=None)),
    ("count without interval", "post", "/v1/jobs/{job_id}/reports", report(tokens_per_second=None, tokens=5)),
    (
        "phases",
        "post",
        "/v1/jobs/{job_id}/reports",
        PHASES,
    ),
    ("phases without interval", "post", "/v1/jobs/{job_id}/reports", report(kind="inference", decode_tokens=100)),
    (
        "phases on a training report",
        "post",
        "/v1/jobs/{job_id}/reports",
        report(tokens_per_second=None, kind="training", decode_tokens=100, interval_seconds=1),
    ),
    ("tiny peak", "post", "/v1/jobs/{job_id}/reports", report(peak_flops_per_gpu=5e-324)),
    (
        "tiny busy time",
        "post",
        "/v1/jobs/{job_id}/reports",
        report(
            tokens_per_second=None, kind="inference", decode_tokens=9, interval_seconds=1, decode_busy_seconds=1e-300
        ),
    ),
    ("event exit code on failure", "post", "/v1/jobs/{job_id}/events", {"type": "failure", "exit_code": 1}),
    ("event exit code on eval", "post", "/v1/jobs/{job_id}/events", {"type": "eval", "exit_code": 1}),
    ("event null exit code on eval", "post", "/v1/jobs/{job_id}/events", {"type": "eval", "exit_code": None}),
    ("pin an mfu", "put", "/v1/baselines/{signature}", {"mfu": 0.4, "tokens_per_second_per_gpu": 1000}),
    ("pin a job and an mfu", "put", "/v1/baselines/{signature}", {"job_id": "j", "mfu": 0.4}),
    ("pin a rate alone", "put", "/v1/baselines/{signature}", {"tokens_per_second_per_gpu": 1000}),
    ("unknown throttle reason", "post", "/v1/nodes/{node}/samples", node_sample(1, throttle_reasons=["cosmic"])),
    ("known throttle reason", "post", "/v1/nodes/{node}/samples", node_sample(1, throttle_reasons=["hw_slowdown"])),
    ("more GPUs than a node may have", "post", "/v1/nodes/{node}/samples", node_sample(129)),
    ("pending with GPUs", "put", "/v1/scheduler/{source}", "pending-held"),
    ("pending without GPUs", "put", "/v1/scheduler/{source}", "pending-empty"),
    ("placement under a bad name", "put", "/v1/scheduler/{source}", "bad-node-name"),
]


def _scheduler_body(kind: str) -> dict[str, Any]:
    job: dict[str, Any] = {"job_id": "s-1", "status": "pending", "gpus_requested": 8}
    if kind == "pending-held":
        job.update(placement={"n1": 8}, gpus_allocated=8)
    elif kind == "pending-empty":
        job.update(placement={}, gpus_allocated=0)
    else:
        job.update(status="running", placement={"bad name": 8}, gpus_allocated=8)
    return {"kind": "slurm", "observed_at": time.time(), "jobs": [job]}


@pytest.mark.parametrize(("case", "method", "path", "body"), BODIES, ids=[c[0] for c in BODIES])
def test_the_document_and_the_server_agree_on_a_body(
    client: TestClient, document: dict[str, Any], case: str, method: str, path: str, body: Any
) -> None:
    if isinstance(body, str):
        body = _scheduler_body(body)
    body = {k: v for k, v in body.items() if v is not None} if "null" not in case else body
    admitted = _request_schema(document, method, path).is_valid(body)
    if path.endswith("/events"):
        _events_job(client)
    url = re.sub(r"\{(\w+)\}", lambda m: EXAMPLE_PARAMS[m.group(1)], path)
    response = client.request(method.upper(), url, json=body)
    assert response.status_code in (200, 422), response.text
    assert (response.status_code == 200) == admitted, (case, admitted, response.text)


def test_gpus_per_push_is_documented_from_the_setting(make_client) -> None:  # type: ignore[no-untyped-def]
    client: TestClient = make_client(MAX_GPUS_PER_NODE=4)
    gpus = client.get("/openapi.json").json()["components"]["schemas"]["NodeSampleCreate"]["properties"]["gpus"]
    assert gpus["maxItems"] == 4
    sample = {**node_sample(0), "gpus": [gpu(i) for i in range(5)]}
    assert client.post("/v1/nodes/n/samples", json=sample).status_code == 422
