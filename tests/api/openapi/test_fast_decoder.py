"""The node push's fast decoder (``mfumon.api.schemas.decoder``) never takes a body the model refuses, and takes the
bodies it does take exactly as the model does: every field, every type. Generated and mutated bodies, JSON oddities
included, decoded both ways; and the bodies real exporters send are taken by the fast decoder, not left to the
model (or the fast path would be a slow path with extra steps)."""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Annotated, Any

import msgspec
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, StringConstraints, ValidationError

from mfumon.api.schemas._common import BLANKS, Text, text_pattern
from mfumon.api.schemas.decoder import FastDecoder
from mfumon.api.schemas.nodes import PUSH_DECODER, GpuSample, IbPortSample, NodeSampleCreate, decode_push
from mfumon.exporter.samples import THROTTLE_REASONS, JobShare, NodeBatch, software_entries
from mfumon.exporter.samples import GpuSample as ExporterGpu
from mfumon.exporter.samples import IbPortSample as ExporterPort
from tests.utils.factories import gpu, ib_port, node_sample

RAW = "\x00raw:"  # a string standing for JSON text written as is (numbers JSON has but Python's json cannot write)


def canonical(value: Any) -> Any:
    """A decoded value with every type spelled out: a model and a struct with equal fields compare equal."""
    if isinstance(value, BaseModel | msgspec.Struct):
        names = type(value).model_fields if isinstance(value, BaseModel) else value.__struct_fields__
        return (type(value).__name__, tuple((name, canonical(getattr(value, name))) for name in names))
    if isinstance(value, list):
        return ("list", tuple(canonical(v) for v in value))
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


def both(body: bytes) -> tuple[Any, Any]:
    """(the model's result or its ValidationError, the fast decoder's result or None)."""
    try:
        slow: Any = NodeSampleCreate.model_validate_json(body)
    except ValidationError as exc:
        slow = exc
    return slow, PUSH_DECODER.decode(body)


def assert_never_wider(body: bytes) -> None:
    slow, fast = both(body)
    if isinstance(slow, ValidationError):
        assert fast is None, f"the fast decoder took what the model refuses: {body[:300]!r}\n{slow}"
    elif fast is not None:
        assert canonical(fast) == canonical(slow), body[:300]


def encode(body: Any) -> bytes:
    text = json.dumps(body)
    marker = json.dumps(RAW)[:-1]  # '"\u0000raw:' as json writes it
    while marker in text:  # "\u0000raw:1e999" -> 1e999
        start = text.index(marker)
        end = text.index('"', start + len(marker))
        text = text[:start] + text[start + len(marker) : end] + text[end + 1 :]
    return text.encode()


# Values that sit on or across an edge of some field's type or bounds; each field gets any of them.
# fmt: off
ODD_VALUES: list[Any] = [
    None, True, False, 0, 1, -1, 2, 4096, 4097, 100_000, 100_001, 10**18, 10**18 + 1, 2**63, 0.0, -0.0, 0.5, 1.0,
    1.5, 8.0, -100, -100.5, 250, 251, 1e16, 1.0000000000000002e16, 1e17, 1e18, 1.0000000000000002e18, 1e300,
    f"{RAW}1e999", f"{RAW}-1e999",
    f"{RAW}1E2", f"{RAW}1e-400", "", " ", "a", " a ", "\u00a0a", "a\u3000", "a\n", "\na", "GPU-1", "GPU-1\n",
    "job-1", "-job", "x" * 64, "x" * 65, "x" * 128, "x" * 129, "x" * 200, "é", "a/b", "a b", "\u0085a",
    "process_utilization", "equal_split", "hw_slowdown", [], ["hw_slowdown"], ["hw_slowdown", "hw_slowdown"],
    ["bogus"], ["sw_thermal"] * 17, {}, [{}], math.pi,
]
# fmt: on
odd = st.sampled_from(ODD_VALUES)

# Characters around (or inside) free text: every blank str.strip() and pydantic-core's trim remove, the line and
# paragraph separators, the controls that look like blanks (tab, newline, NEL, file separator: refused by the pattern,
# though str.strip() would take them), and ones that look blank but are neither (zero-width space, BOM).
SURROUNDS = [*BLANKS, "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u200b", "\ufeff", "\u180e"]
SURROUNDS += ["  ", "\u3000 \u00a0", " \t", "\u2028\n"]


def decorations(value: str) -> list[str]:
    """``value`` with each of :data:`SURROUNDS` before, after, around and inside it, alone, and at the length edge."""
    out = [value, value * 200]
    for blank in SURROUNDS:
        out += [blank + value, value + blank, blank + value + blank, value[:1] + blank + value[1:], blank, blank * 2]
    for length in (127, 128, 129):
        long = (value * 200)[:length]
        out += [f" {long}", f"{long}\u00a0", f"\u3000{long}\u2029"]
    return out


def decorated(value: str) -> st.SearchStrategy[str]:
    return st.sampled_from(decorations(value))


GPU_FIELDS = list(GpuSample.model_fields)
PORT_FIELDS = list(IbPortSample.model_fields)


@st.composite
def shares(draw: st.DrawFn) -> Any:
    count = draw(st.integers(0, 4))
    jobs = draw(st.lists(st.sampled_from(["j1", "j2", "j3", " j1", "j1\n"]), min_size=count, max_size=count))
    parts = draw(st.lists(st.sampled_from([0.5, 0.25, 0.75, 1.0, 0.0, 0.3333, 0.3334]), min_size=count, max_size=count))
    methods = st.sampled_from(["process_utilization", "accounting", "equal_split", "guess"])
    return [{"job_id": j, "share": s, "method": draw(methods)} for j, s in zip(jobs, parts, strict=True)]


@st.composite
def gpus(draw: st.DrawFn, index: int) -> dict[str, Any]:
    body = gpu(index, job_id=draw(st.sampled_from([None, "j1", "j2"])))
    if draw(st.integers(0, 3)) == 0:  # free text with blanks around it: stripped alike, or refused alike
        body["name"] = draw(decorated("NVIDIA H100 80GB HBM3"))
    if draw(st.booleans()):
        body.update(
            ecc_uncorrected_total=0,
            xid_errors_total=draw(st.sampled_from([0, 3, 3.0])),
            compute_processes=1,
            throttle_reasons=draw(st.sampled_from([["hw_slowdown"], list(THROTTLE_REASONS[:3]), []])),
        )
    if draw(st.integers(0, 4)) == 0:
        body["shares"] = draw(shares())
        if draw(st.booleans()):
            body["mig_profile"] = "1g.10gb"
    if draw(st.integers(0, 2)) == 0:  # a third of the GPUs get an odd value or two, or lose a field
        for _ in range(draw(st.integers(1, 2))):
            body[draw(st.sampled_from([*GPU_FIELDS, "bogus"]))] = draw(odd)
    if draw(st.integers(0, 9)) == 0:
        body.pop(draw(st.sampled_from(GPU_FIELDS)), None)
    return body


SOFTWARE_PAIRS = st.tuples(
    st.sampled_from(["driver", "cuda_driver", "vbios", "Driver", "-x", "a" * 33, "tag.x"]),
    st.one_of(decorated("550.54.15"), st.sampled_from(["96.00.74.00.01", "v\u00e9", "1\x00", "x" * 65, "a b"])),
)


@st.composite
def pushes(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(0, 3))
    body: dict[str, Any] = {"timestamp": 1.7e9, "gpus": [draw(gpus(k)) for k in range(count)]}
    if draw(st.booleans()):
        body["pool"] = draw(st.one_of(st.sampled_from(["train", "", None]), decorated("train")))
    if draw(st.booleans()):
        ports = [ib_port("mlx5_0", 1), ib_port("mlx5_1", 1)]
        if draw(st.booleans()):
            ports.append(ib_port("mlx5_0", draw(st.sampled_from([1, 2]))))
        for port in ports:
            if draw(st.integers(0, 2)) == 0:
                port[draw(st.sampled_from([*PORT_FIELDS, "bogus"]))] = draw(odd)
        body["ib_ports"] = ports
    if draw(st.integers(0, 2)) == 0:  # the node's software: each (component, version) once, at most 16
        entries = [{"component": c, "version": v} for c, v in draw(st.lists(SOFTWARE_PAIRS, max_size=4))]
        if entries and draw(st.integers(0, 2)) == 0:
            entries[draw(st.integers(0, len(entries) - 1))][draw(st.sampled_from(["component", "version", "x"]))] = (
                draw(odd)
            )
        if entries and draw(st.integers(0, 5)) == 0:
            entries = entries * draw(st.sampled_from([2, 17]))
        body["software"] = entries
    if draw(st.integers(0, 5)) == 0:
        body[draw(st.sampled_from(["timestamp", "pool", "gpus", "ib_ports", "software", "bogus"]))] = draw(odd)
    listed = body["gpus"] if isinstance(body["gpus"], list) else []
    if draw(st.integers(0, 5)) == 0 and len(listed) > 1 and "uuid" in listed[0]:
        listed[-1]["uuid"] = listed[0]["uuid"]  # the same GPU twice
    return body


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pushes())
def test_generated_pushes_decode_as_the_model_decodes_them_or_not_at_all(body: dict[str, Any]) -> None:
    assert_never_wider(encode(body))


def test_the_generator_makes_both_kinds() -> None:
    """Guards the test above: of its kind of bodies, the model takes some and refuses some, and the fast decoder
    takes most that the model takes."""
    seen: Counter[str] = Counter()

    # derandomized: a fixed sample, so the guard does not fail on an unlucky draw (26 of 300 taken, once in CI)
    @settings(max_examples=300, phases=[Phase.generate], deadline=None, database=None, derandomize=True)
    @given(pushes())
    def collect(body: dict[str, Any]) -> None:
        slow, quick = both(encode(body))
        seen["refused" if isinstance(slow, ValidationError) else "taken"] += 1
        seen["fast"] += quick is not None

    collect()
    assert seen["taken"] >= 30 and seen["refused"] >= 30, seen
    assert seen["fast"] >= seen["taken"] * 0.5, seen


JSON_ODDITIES = [
    b'{"timestamp": 1700000000, "gpus": [], "gpus": []}',
    b'{"timestamp": 1700000000, "gpus": [], "pool": "a", "pool": " b "}',
    b'{"timestamp": 1700000000, "gpus": [], "pool": "\\ud800"}',
    b'{"timestamp": 1700000000, "gpus": [], "pool": "\\u0000"}',
    b'{"timestamp": 1700000000, "gpus": [], "pool": "\xff"}',
    b'\xef\xbb\xbf{"timestamp": 1700000000, "gpus": []}',
    b'  {"timestamp": 1700000000, "gpus": []}\n ',
    b'{"timestamp": 1700000000, "gpus": []} x',
    b'{"timestamp": 1700000000, "gpus": [],}',
    b'{"timestamp": NaN, "gpus": []}',
    b'{"timestamp": Infinity, "gpus": []}',
    b'{"timestamp": 1e999, "gpus": []}',
    b'{"timestamp": 100000000000, "gpus": []}',
    b'{"timestamp": 99999999999.99999, "gpus": []}',
    b'{"timestamp": 0, "gpus": []}',
    b'{"timestamp": "1700000000", "gpus": []}',
    b'{"timestamp": true, "gpus": []}',
    b'{"timestamp": 1700000000, "gpus": null}',
    b'{"timestamp": 1700000000}',
    b"[]",
    b"",
    b"null",
    '{"timestamp": 1700000000, "gpus": [], "pool": "caf\u00e9"}'.encode(),
    '{"timestamp": 1700000000, "gpus": []}'.encode("utf-16"),
]


@pytest.mark.parametrize("body", JSON_ODDITIES)
def test_json_oddities_decode_as_the_model_decodes_them_or_not_at_all(body: bytes) -> None:
    assert_never_wider(body)


def real_pushes() -> list[bytes]:
    """What the node exporter sends (``mfumon.exporter.samples``): GPUs with every counter, shared and MIG GPUs, a
    lost GPU, InfiniBand ports."""
    counters = {
        "utilization": 0.97, "sm_active": 0.81, "sm_occupancy": 0.4, "tensor_active": 0.44, "dram_active": 0.3,
        "memory_used_bytes": 7.1e10, "memory_total_bytes": 8.5e10, "power_watts": 612.3, "temperature_celsius": 63,
        "sm_clock_hz": 1.98e9, "max_sm_clock_hz": 1.98e9, "nvlink_tx_bytes_per_second": 1.2e11,
        "nvlink_rx_bytes_per_second": 1.1e11, "pcie_tx_bytes_per_second": 3e9, "pcie_rx_bytes_per_second": 2e9,
        "xid_errors_total": 0, "ecc_uncorrected_total": 0, "ecc_corrected_total": 2, "compute_processes": 1,
        "nvlink_crc_flit_errors_total": 0, "nvlink_crc_data_errors_total": 0, "nvlink_replay_errors_total": 0,
        "nvlink_recovery_errors_total": 0, "pcie_replays_total": 0, "remapped_rows_correctable_total": 0,
        "remapped_rows_uncorrectable_total": 0, "row_remap_pending": 0, "row_remap_failure": 0,
        "energy_joules_total": 1.5e8, "board_energy_joules_total": 3.5e8, "board_power_watts": 650.0,
        "last_xid": 0, "throttle_reasons": ["sw_power_cap"],
    }  # fmt: skip
    full = [
        ExporterGpu.build(f"GPU-{k:04d}-aaaa", k, "NVIDIA H100 80GB HBM3", counters, job_id="train-42")
        for k in range(8)
    ]
    shared = ExporterGpu.build(
        "GPU-shared", 0, "NVIDIA A100-SXM4-80GB", {"utilization": 0.6}, job_id="a",
        shares=(JobShare("a", 0.6, "process_utilization"), JobShare("b", 0.4, "process_utilization")),
    )  # fmt: skip
    mig = ExporterGpu.build("MIG-1234", 1, "NVIDIA H100 80GB HBM3", {"utilization": 0.3}, mig_profile="3g.40gb")
    ports = tuple(ExporterPort(f"mlx5_{k}", 1, "InfiniBand", "ACTIVE", "LinkUp", 5e10, 0, 0, 0, 0, 0, 10**13, 10**13)
                  for k in range(4))  # fmt: skip
    software = software_entries([("driver", "580.159.04"), ("cuda_driver", "13.0"), ("vbios", "96.00.A5.00.1A")])
    batches = [
        NodeBatch("n1", 1.7e9, tuple(full), pool="h100", ib_ports=ports, software=software),
        NodeBatch("n2", 1.7e9, (shared, mig, full[0].lost())),
        NodeBatch("n3", 1.7e9, ()),
    ]
    return [json.dumps(batch.body()).encode() for batch in batches]


@pytest.mark.parametrize("body", real_pushes(), ids=["h100-ib", "shared-mig-lost", "empty"])
def test_what_exporters_send_is_taken_by_the_fast_decoder_as_by_the_model(body: bytes) -> None:
    fast = PUSH_DECODER.decode(body)
    assert fast is not None
    assert canonical(fast) == canonical(NodeSampleCreate.model_validate_json(body))
    assert canonical(decode_push(body)) == canonical(fast)


def test_a_rule_json_schema_cannot_state_is_the_models() -> None:
    """Shares must add up to 1 (a field validator): the struct runs the model's own validator."""
    body = node_sample(1)
    body["gpus"][0]["shares"] = [
        {"job_id": "a", "share": 0.5, "method": "accounting"},
        {"job_id": "b", "share": 0.4, "method": "accounting"},
    ]
    assert PUSH_DECODER.decode(json.dumps(body).encode()) is None
    body["gpus"][0]["shares"][1]["share"] = 0.5
    assert PUSH_DECODER.decode(json.dumps(body).encode()) is not None


@pytest.mark.parametrize(
    "software",
    [
        [{"component": "driver", "version": "1"}, {"component": "driver", "version": "1"}],  # the same pair twice
        [{"component": f"c{i}", "version": "1"} for i in range(17)],
        [{"component": "driver", "version": " 1"}],
        [{"component": "driver", "version": "1\n"}],
        [{"component": "driver", "version": "\u00e9"}],
        [{"component": "Driver", "version": "1"}],
        [{"component": "driver", "version": "1", "date": "2024"}],
        [{"component": "driver"}],
        {"driver": "1"},
    ],
)
def test_bad_node_software_is_refused_by_both_decoders(software: Any) -> None:
    """Refused by the fast decoder (None: left to the model) and by the model (its ValidationError is the 422)."""
    body = json.dumps({**node_sample(1), "software": software}).encode()
    assert PUSH_DECODER.decode(body) is None
    with pytest.raises(ValidationError, match="software"):
        decode_push(body)


def test_node_software_decodes_fast() -> None:
    software = [{"component": "driver", "version": "550.54.15"}, {"component": "vbios", "version": "96.00.74.00.01"}]
    fast = PUSH_DECODER.decode(json.dumps({**node_sample(1), "software": software}).encode())
    assert fast is not None and fast.software is not None
    assert [(e.component, e.version) for e in fast.software] == [("driver", "550.54.15"), ("vbios", "96.00.74.00.01")]


def test_free_text_is_stripped_after_its_pattern_as_the_model_strips_it() -> None:
    body = {**node_sample(1), "pool": "\u3000 train \u00a0"}
    assert PUSH_DECODER.decode(json.dumps(body).encode()).pool == "train"  # type: ignore[union-attr]
    body["pool"] = "train\n"
    assert PUSH_DECODER.decode(json.dumps(body).encode()) is None


# --- every field, one at a time -------------------------------------------------------------------------------------


def full_push() -> dict[str, Any]:
    """A push the model takes in which every field of every kind of object is present: a GPU with all its counters,
    a MIG instance, a shared GPU, an InfiniBand port, the node's software and NCCL Inspector's collectives (per
    rank too)."""
    whole = json.loads(real_pushes()[0])  # eight GPUs with every counter, InfiniBand ports
    first = {**whole["gpus"][0], "mig_profile": "1g.10gb", "job_id": "j1", "tensor_active_exact": 1}
    first.update(ecc_deferred_total=0, pcie_link_gen=5, pcie_link_gen_max=5, pcie_link_width=16)
    first.update(pcie_link_width_max=16, fabric_health_summary=1, fabric_health_mask=0, fabric_manager_status=0)
    first.update(hmma_active=0.1, imma_active=0.0, dmma_active=0.0)
    shared = gpu(1, shares=[{"job_id": "a", "share": 0.5, "method": "accounting"},
                            {"job_id": "b", "share": 0.5, "method": "accounting"}])  # fmt: skip
    body = {
        "timestamp": 1.7e9,
        "pool": "train",
        "gpus": [first, shared],
        "ib_ports": whole["ib_ports"][:1],
        "software": whole["software"][:1],
        "collectives": [
            {
                "job_id": "j1", "group": "dp", "collective": "AllReduce", "ranks": 8, "n_ranks": 16,
                "operations_total": 1200, "seconds_total": 84.5, "traffic_bytes_total": 1.2e12,
                "bus_bytes_total": 2.1e12, "lost_total": 4, "window_seconds": 3.0, "window_bus_bytes": 7.5e10,
                "interval_seconds": 10.0,
            }
        ],
        "collective_ranks": [
            {
                "job_id": "j1", "group": "pp", "comm_id": "0x7f8c496ae9f661", "collective": "Send", "rank": 3,
                "n_ranks": 4, "peer": 2, "operations": 40, "seconds": 0.8, "traffic_bytes": 4.0e9,
                "bus_bytes": 4.0e9, "interval_seconds": 10.0,
            }
        ],
    }  # fmt: skip
    assert NodeSampleCreate.model_validate(body)
    return body


def field_paths(schema: dict[str, Any], defs: dict[str, Any], at: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every field of the push's JSON schema, nested objects and array items included: its path ("*": an array's
    item) and its schema, ``X or null`` unwrapped."""
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    options = [o for o in schema.get("anyOf", ()) if o != {"type": "null"}]
    if len(options) == 1:
        schema = options[0]
    out: dict[tuple[str, ...], Any] = {at: schema} if at else {}
    if "$ref" in schema:
        return {**out, **field_paths(schema, defs, at)}
    for name, field in schema.get("properties", {}).items():
        out.update(field_paths(field, defs, (*at, name)))
    if "items" in schema:
        out.update(field_paths(schema["items"], defs, (*at, "*")))
    return out


PUSH_SCHEMA = NodeSampleCreate.model_json_schema(mode="validation")
FIELDS = field_paths(PUSH_SCHEMA, PUSH_SCHEMA["$defs"])
STRINGS = [path for path, schema in FIELDS.items() if schema.get("type") == "string"]
TEXTS = [path for path in STRINGS if FIELDS[path].get("pattern") == text_pattern(128)]


def with_value(body: Any, path: tuple[str, ...], value: Any) -> Any | None:
    """``body`` with the first field at ``path`` (the first array item that has it) set to ``value``; None if there
    is none."""
    if not path:
        return value
    key, rest = path[0], path[1:]
    if key == "*":
        if not isinstance(body, list):
            return None
        for k, item in enumerate(body):
            changed = with_value(item, rest, value)
            if changed is not None:
                return [*body[:k], changed, *body[k + 1 :]]
        return None
    if not isinstance(body, dict) or key not in body:
        return None
    changed = with_value(body[key], rest, value)
    return None if changed is None else {**body, key: changed}


def value_at(body: Any, path: tuple[str, ...]) -> Any:
    """The value :func:`with_value` sets: at the first array item that has the field."""
    if not path:
        return body
    key, rest = path[0], path[1:]
    if key == "*":
        return next(value_at(item, rest) for item in body if with_value(item, rest, 0) is not None)
    return value_at(body[key], rest)


def test_every_field_and_free_text_field_is_found() -> None:
    """Guards the tests below: the walk reaches every field, the free-text ones among them (GPU name, pool)."""
    assert {("pool",), ("gpus", "*", "name")} <= set(TEXTS), TEXTS
    assert {("gpus", "*", "shares", "*", "job_id"), ("ib_ports", "*", "device"), ("gpus", "*", "uuid")} <= set(STRINGS)
    body = full_push()
    assert all(with_value(body, path, "x") is not None for path in FIELDS), [
        path for path in FIELDS if with_value(body, path, "x") is None
    ]


def mismatches(path: tuple[str, ...], values: list[Any]) -> list[str]:
    body, found = full_push(), []
    for value in values:
        raw = encode(with_value(body, path, value))
        slow, fast = both(raw)
        if isinstance(slow, ValidationError):
            if fast is not None:
                found.append(f"{value!r}: taken fast as {value_at(msgspec.to_builtins(fast), path)!r}, refused")
        elif fast is not None and canonical(fast) != canonical(slow):
            theirs, ours = value_at(slow.model_dump(), path), value_at(msgspec.to_builtins(fast), path)
            found.append(f"{value!r}: the model stores {theirs!r}, the fast decoder {ours!r}")
    return found


@pytest.mark.parametrize("path", STRINGS, ids=".".join)
def test_every_string_field_with_blanks_around_it_decodes_as_the_model_decodes_it(path: tuple[str, ...]) -> None:
    """Issue 54: ``gpus[].name`` (a required free-text field) kept its trailing blank through the fast decoder and
    lost it through the model, so /metrics showed ``model="NVIDIA H100 80GB HBM3 "``. Every string field, every blank
    and blank-looking character around and inside it."""
    start = value_at(full_push(), path)
    assert not mismatches(path, decorations(start)), "\n".join(mismatches(path, decorations(start)))


@pytest.mark.parametrize("path", TEXTS, ids=".".join)
def test_free_text_with_blanks_around_it_stays_on_the_fast_path(path: tuple[str, ...]) -> None:
    """Stripped by the fast decoder, not left to the model: a trailing blank in a GPU name is common (NVML pads)."""
    start = value_at(full_push(), path)
    for value in decorations(start):
        raw = encode(with_value(full_push(), path, value))
        slow, fast = both(raw)
        if not isinstance(slow, ValidationError):
            assert fast is not None, value
            assert value_at(msgspec.to_builtins(fast), path) == value.strip(), value


@pytest.mark.parametrize("path", list(FIELDS), ids=".".join)
def test_every_field_with_every_odd_value_decodes_as_the_model_decodes_it(path: tuple[str, ...]) -> None:
    """Each field alone, each :data:`ODD_VALUES`: what the generated bodies above reach only by chance."""
    found = mismatches(path, ODD_VALUES)
    assert not found, "\n".join(found)


class _Listed(BaseModel):
    model_config = {"extra": "forbid"}
    names: list[Annotated[str, Text(8)]]


class _Open(BaseModel):
    value: float


class _Aliased(BaseModel):
    model_config = {"extra": "forbid"}
    value: float = 0.0
    other: dict[str, int] = {}


class _Lowered(BaseModel):
    model_config = {"extra": "forbid"}
    name: Annotated[str, StringConstraints(to_lower=True)]


class _Stripping(BaseModel):
    model_config = {"extra": "forbid", "str_strip_whitespace": True}
    name: str


@pytest.mark.parametrize("model", [_Open, _Aliased, _Listed, _Lowered, _Stripping])
def test_a_model_with_what_the_decoder_cannot_state_fails_to_build(model: type[BaseModel]) -> None:
    with pytest.raises(TypeError):
        FastDecoder(model)
