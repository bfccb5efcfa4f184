"""One Inspector JSON line -> a record or a counted skip: the README examples, third-party and constructed lines."""

from __future__ import annotations

import json
import random

from hypothesis import given
from hypothesis import strategies as st

from mfumon.exporter.node.nccl_inspector.jsonl import Skip, parse_line
from mfumon.exporter.node.nccl_inspector.records import CollRecord
from tests.exporter.node.nccl_inspector.lines import fixture_lines, render


def _record(line: str | bytes) -> CollRecord:
    parsed = parse_line(line)
    assert isinstance(parsed, CollRecord), parsed
    return parsed


def test_the_readme_example_of_2_28() -> None:
    (line,) = fixture_lines("readme-2.28-example.jsonl")
    record = _record(line)
    assert (record.family, record.kind, record.comm_id, record.comm_name) == ("2.28", "coll", "0x7f8c496ae9f661", None)
    assert (record.rank, record.n_ranks, record.nnodes) == (2, 8, 1)
    assert (record.hostname, record.pid, record.dump_timestamp_us) == ("example-hostname", 1639453, 1748030377748202)
    assert (record.op, record.sn, record.msg_size_bytes, record.exec_time_us) == ("AllReduce", 1407, 17179869184, 61974)
    assert (record.algbw_gbs, record.busbw_gbs) == (277.210914, 485.119099)
    # The README's example predates coll_timing_source: not GPU-timed as far as we can tell.
    assert record.timing_source is None and not record.gpu_timed
    assert record.known_op and not record.size_wrapped and not record.verbose
    assert record.comm_key == "0x7f8c496ae9f661"


def test_the_line_the_2_28_writer_renders() -> None:
    (line,) = fixture_lines("rendered-2.28.jsonl")
    record = _record(line)
    assert record.timing_source == "kernel_gpu" and record.gpu_timed
    assert record.family == "2.28"
    readme = _record(fixture_lines("readme-2.28-example.jsonl")[0])
    assert (record.op, record.sn, record.msg_size_bytes, record.busbw_gbs) == (
        readme.op,
        readme.sn,
        readme.msg_size_bytes,
        readme.busbw_gbs,
    )


def test_the_verbose_example_keeps_the_record_and_ignores_the_event_trace() -> None:
    (line,) = fixture_lines("readme-2.28-verbose.jsonl")
    record = _record(line)
    assert record.verbose
    assert (record.op, record.sn, record.msg_size_bytes, record.exec_time_us) == (
        "ReduceScatter",
        1231,
        2147483648,
        41057,
    )
    assert (record.rank, record.n_ranks, record.pid) == (4, 8, 438776)
    assert (record.algbw_gbs, record.busbw_gbs) == (418.439467, 366.134533)


def test_the_exporter_readme_example() -> None:
    (line,) = fixture_lines("exporter-readme-2.28.jsonl")
    record = _record(line)
    assert (record.op, record.n_ranks, record.nnodes, record.msg_size_bytes) == ("ReduceScatter", 32, 4, 65536)
    assert (record.rank, record.sn, record.exec_time_us, record.busbw_gbs) == (31, 129, 110, 18.469236)


def test_the_datadog_line_with_its_own_key_order_and_a_float_time() -> None:
    (line,) = fixture_lines("datadog-agent-2.28.jsonl")
    record = _record(line)
    assert (record.comm_id, record.rank, record.n_ranks, record.nnodes) == ("0xad56c683b0c4ef", 1, 3, 3)
    assert (record.hostname, record.pid, record.dump_timestamp_us) == (
        "nanogpt-nccl-test-worker-0",
        48,
        1772585717263338,
    )
    assert (record.op, record.sn, record.msg_size_bytes, record.exec_time_us) == ("AllReduce", 8995, 2360832, 5663.0)
    assert record.busbw_gbs == 0.55585


def test_2_30_lines_carry_the_communicator_name_and_p2p_records() -> None:
    records = [_record(line) for line in fixture_lines("constructed-2.30.jsonl")]
    assert {r.family for r in records} == {"2.30"}
    named = [r for r in records if r.comm_name == "DP Group 0"]
    assert [r.op for r in named] == ["AllReduce", "AllReduce", "Send", "Recv"]
    send, recv = named[2], named[3]
    assert (send.kind, send.sn, send.peer, send.msg_size_bytes, send.exec_time_us) == ("p2p", 1, 2, 536870912, 1155)
    assert (recv.kind, recv.sn, recv.peer) == ("p2p", 2, 0)
    assert send.algbw_gbs == send.busbw_gbs  # P2P: factor 1
    unnamed = [r for r in records if r.comm_id == "0x3c0ffee1234567"]
    assert [(r.op, r.comm_name, r.comm_key) for r in unnamed] == [
        ("ReduceScatter", None, "0x3c0ffee1234567"),
        ("AllGather", None, "0x3c0ffee1234567"),
    ]
    assert named[0].comm_key == "DP Group 0"


def test_the_uint8_size_bug_is_undone_and_flagged() -> None:
    (line,) = fixture_lines("constructed-2.30-uint8.jsonl")
    record = _record(line)
    assert record.raw_msg_size_bytes == 2**64 - 1048576
    assert (record.msg_size_bytes, record.size_wrapped) == (1048576, True)


def test_key_order_does_not_matter() -> None:
    (line,) = fixture_lines("rendered-2.28.jsonl")
    data = json.loads(line)
    rng = random.Random(61)
    shuffled = {k: dict(sorted(v.items(), key=lambda _: rng.random())) for k, v in reversed(list(data.items()))}
    assert parse_line(json.dumps(shuffled)) == parse_line(line)


def test_invalid_ops_are_kept_but_marked() -> None:
    record = _record(render(op="Invalid"))
    assert record.op == "Invalid" and not record.known_op
    assert _record(render(op="AlltoAll")).known_op is False  # NCCL's own name is not one the Inspector writes


def test_nan_bandwidths_are_none() -> None:
    line = render().replace('"coll_busbw_gbs":', '"coll_busbw_gbs":"nan","x":')
    record = _record(line)
    assert record.busbw_gbs is None


def _reason(line: str | bytes) -> str:
    parsed = parse_line(line)
    assert isinstance(parsed, Skip), parsed
    return parsed.reason


def test_broken_lines_are_skipped_with_a_reason() -> None:
    (line,) = fixture_lines("rendered-2.28.jsonl")
    assert _reason(line[: len(line) // 2]) == "broken_json"  # half-written
    assert _reason(line[:100] + line) == "broken_json"  # the writer gave up mid-record, the next one followed
    assert _reason("") == "empty"
    assert _reason("[1, 2]") == "not_object"
    assert _reason('{"dump_stats":{"dropped_total":3}}') == "unknown_shape"
    assert _reason(line.replace('"rank":2', '"rank":"two"')) == "bad_field"
    assert _reason(line.replace('"pid":1639453', '"pid":-1')) == "bad_field"
    assert _reason(line.replace('"coll_timing_source":"kernel_gpu"', '"coll_timing_source":1')) == "bad_field"
    assert _reason(b"\xff\xfe{" + line.encode()) == "broken_json"


def test_every_prefix_of_a_line_is_a_skip_never_a_record_or_an_error() -> None:
    (line,) = fixture_lines("readme-2.28-verbose.jsonl")
    for end in range(len(line)):
        assert isinstance(parse_line(line[:end]), Skip)


@given(st.binary(max_size=400))
def test_no_bytes_make_it_raise(data: bytes) -> None:
    assert isinstance(parse_line(data), (Skip, CollRecord))


_KEYS = st.sampled_from(["header", "metadata", "coll_perf", "p2p_perf", "id", "rank", "pid", "coll", "coll_sn"])
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(_KEYS, inner),
    max_leaves=30,
)


@given(_JSON)
def test_no_json_makes_it_raise(value: object) -> None:
    assert isinstance(parse_line(json.dumps(value)), (Skip, CollRecord))


_FIELDS = [(section, key) for section, keys in json.loads(render()).items() for key in keys]


@given(st.sampled_from(_FIELDS), _JSON)
def test_no_field_value_makes_it_raise(field: tuple[str, str], value: object) -> None:
    data = json.loads(render(comm_name="tp"))
    data[field[0]][field[1]] = value
    assert isinstance(parse_line(json.dumps(data)), (Skip, CollRecord))
