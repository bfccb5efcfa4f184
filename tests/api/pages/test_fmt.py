"""How the pages print values: units named, ratios as percentages with the 0-1 value in the title, unknowns as
a dash with the reason."""

from __future__ import annotations

from mfumon.api.pages import fmt


def test_a_ratio_is_a_percentage_with_the_exact_value_in_its_title() -> None:
    assert fmt.ratio(0.4523) == '<span class="ratio" title="0.4523">45.2 %</span>'


def test_an_unknown_value_is_a_dash_with_its_reason_escaped() -> None:
    out = fmt.ratio(None, "unknown GPU model <x>")
    assert out.startswith('<span class="unknown"') and "—" in out and "&lt;x&gt;" in out and "%" not in out
    assert fmt.ratio(0.0) != fmt.ratio(None)  # zero is a value, not unknown


def test_units_are_named() -> None:
    assert ">2.97 PFLOP/s<" in fmt.flops_per_second(2.97e15)
    assert ">33.7 k tokens/s<" in fmt.count(33_700, "tokens/s")
    assert ">2.50 GPU-h<" in fmt.gpu_hours(9000)
    assert ">36 GPU-s<" in fmt.gpu_hours(36)  # a short run does not read 0.00 GPU-h
    assert ">850 ms<" in fmt.seconds(0.85) and ">4.2 min<" in fmt.seconds(252)
    assert "1970-01-01 00:00:00 UTC" in fmt.when(0.0)


def test_a_latency_keeps_three_digits_in_milliseconds_or_seconds() -> None:
    cases = {0.0425: "42.5 ms", 0.85: "850 ms", 0.9999: "1 s", 0.9642857: "964 ms", 2.2: "2.2 s", 1800.0: "1800 s"}
    for seconds, shown in cases.items():
        assert f">{shown}<" in fmt.latency(seconds), seconds
    assert 'title="0.0425 s"' in fmt.latency(0.0425) and "no histogram" in fmt.latency(None, "no histogram")


def test_evidence_prints_nested_values_readably() -> None:
    out = fmt.evidence([{"node": "n1", "clock_ratio": 0.612345}], "throttled_gpus")
    assert out == '<div>node: n1; clock ratio: <span class="ratio" title="0.6123">61.2 %</span></div>'
    assert ">10.0 %<" in fmt.evidence(0.1, "share_of_step_time")
    assert fmt.evidence(2.4, "gpu_seconds") == fmt.gpu_hours(2.4) and fmt.evidence(8, "gpus") == "8"
    assert ">41.0 %<" in fmt.evidence(0.41, "kv_cache_usage") and ">37.7 %<" in fmt.evidence(0.377, "mbu")
    assert fmt.evidence(0.1, "tpot_target_seconds") == fmt.latency(0.1)  # 100 ms


def test_evidence_names_a_gpu_by_index_and_node_and_keys_in_words() -> None:
    uuid = "GPU-5c0e7f1a-3b2d-4e6f-8a9b-0c1d2e3f4a5b"
    out = fmt.evidence([{"node": "node-7", "gpu": 3, "uuid": uuid, "clock_ratio": 0.5}], "throttled_gpus")
    assert out.startswith(f'<div><span title="{uuid}">GPU 3 on node-7</span>; clock ratio: ')
    assert out.count(uuid) == 1  # only in the title
    assert fmt.label("share_of_step_time") == "share of step time" and fmt.label("sm_active") == "SM active"
    assert fmt.label("tensor_active_spread") == "tensor active spread" and "_" not in fmt.label("kv_cache_usage")


def test_one_unit_per_column_of_gpu_time() -> None:
    unit = fmt.gpu_time_unit([24.0, 468.0, None])
    assert unit == fmt.GPU_HOURS and fmt.gpu_time_unit([24.0, 300.0]) == fmt.GPU_SECONDS
    assert ">0.01 GPU-h<" in fmt.gpu_time(24.0, unit) and ">0.13 GPU-h<" in fmt.gpu_time(468.0, unit)
    assert ">24 GPU-s<" in fmt.gpu_time(24.0, fmt.GPU_SECONDS)
