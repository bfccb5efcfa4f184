"""Operator override files: add a device, override an existing one, and refuse bad content clearly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mfumon.mfu import ModelShape, PeakTable, PeakTableError, evaluate, load_peak_overrides

OVERRIDES_YAML = r"""
devices:
  - key: rtx-6000-ada
    patterns: ['\bRTX 6000 Ada\b']
    names: ['NVIDIA RTX 6000 Ada Generation']
    peaks: {bf16: 364.2e12, fp16: 364.2e12, fp32: 91.1e12}
    memory_bandwidth_bytes_per_second: 960e9
    source: https://example.com/rtx-6000-ada-datasheet.pdf
  - key: h100-sxm
    peaks: {bf16: 900e12, fp8: null}
    source: measured at our 600 W power cap
"""


def _write(tmp_path: Path, text: str, name: str = "peaks.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_override_file_adds_a_device(tmp_path: Path) -> None:
    table = PeakTable.from_file(_write(tmp_path, OVERRIDES_YAML))
    lookup = table.lookup("NVIDIA RTX 6000 Ada Generation", "bf16")
    assert lookup.device_key == "rtx-6000-ada"
    assert lookup.peak_flops_per_gpu == 364.2e12
    spec = table.get("rtx-6000-ada")
    assert spec is not None
    assert spec.memory_bandwidth_bytes_per_second == 960e9
    assert table.specs[0] is spec  # new devices are matched first


def test_override_file_replaces_an_existing_entry_and_inherits_the_rest(tmp_path: Path) -> None:
    table = PeakTable.from_file(_write(tmp_path, OVERRIDES_YAML))
    h100 = table.get("h100-sxm")
    assert h100 is not None
    assert h100.peak("bf16") == 900e12
    assert h100.peak("fp8") is None  # null removes a dtype
    assert h100.peak("tf32") == 494.5e12  # inherited
    assert h100.source == "measured at our 600 W power cap"
    assert table.resolve("NVIDIA H100 80GB HBM3") is h100  # patterns inherited
    mig_lookup = table.lookup("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "bf16")
    assert mig_lookup.peak_flops_per_gpu == pytest.approx(900e12 / 7)
    # Replaced in place, so NVL and PCIe are still matched before the generic H100 pattern.
    assert table.resolve("NVIDIA H100 NVL") is table.get("h100-nvl")
    assert table.resolve("NVIDIA H100 PCIe") is table.get("h100-pcie")


def test_evaluate_uses_the_overridden_table(tmp_path: Path) -> None:
    table = PeakTable.from_file(_write(tmp_path, OVERRIDES_YAML))
    result = evaluate(
        kind="training",
        shape=ModelShape(params=1e9),
        tokens_per_second=1e4,
        num_gpus=1,
        device_name="NVIDIA H100 80GB HBM3",
        table=table,
    )
    assert result.mfu == pytest.approx(6e13 / 900e12)


def test_override_of_an_unconfirmed_figure_is_no_longer_flagged(tmp_path: Path) -> None:
    path = _write(tmp_path, "devices:\n  - key: a30\n    peaks: {bf16: 165e12}\n    source: NVIDIA A30 datasheet\n")
    table = PeakTable.from_file(path)
    assert not table.lookup("NVIDIA A30", "bf16").unconfirmed
    assert table.lookup("NVIDIA A30", "tf32").unconfirmed


def test_json_file_is_accepted(tmp_path: Path) -> None:
    data = {"devices": [{"key": "acme-x1", "patterns": ["Acme X1"], "peaks": {"bf16": 5e14}, "source": "acme"}]}
    table = PeakTable.from_file(_write(tmp_path, json.dumps(data), "peaks.json"))
    assert table.lookup("Acme X1 accelerator", "bf16").peak_flops_per_gpu == 5e14


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- key: x\n", "top level must be a mapping with exactly one key, 'devices'"),
        ("devices: {key: x}\n", "'devices' must be a list"),
        ("devices: [7]\n", r"devices\[0\]: an entry must be a mapping"),
        ("devices:\n  - {patterns: [X], peaks: {bf16: 1e12}, source: s}\n", r"devices\[0\]: key: required"),
        ("devices:\n  - {key: x, patterns: [X], peaks: {bf16: 1e12}}\n", r"devices\[0\] \(key 'x'\): source"),
        ("devices:\n  - {key: x, peaks: {bf16: 1e12}, source: s}\n", r"\(key 'x'\): patterns: required"),
        ("devices:\n  - {key: x, patterns: [X], source: s}\n", r"\(key 'x'\): peaks: required"),
        (
            "devices:\n  - {key: x, patterns: [X], peaks: {bf16: fast}, source: s}\n",
            r"peaks\.bf16: expected a number",
        ),
        (
            "devices:\n  - {key: x, patterns: [X], peaks: {bf16: -1}, source: s}\n",
            r"\(key 'x'\): peaks\.bf16 must be",
        ),
        (
            "devices:\n  - {key: x, patterns: [X], peaks: {int4: 1e12}, source: s}\n",
            r"peaks\.int4: unknown dtype",
        ),
        (
            "devices:\n  - {key: x, patterns: ['(bad'], peaks: {bf16: 1e12}, source: s}\n",
            "not a valid regular",
        ),
        ("devices:\n  - {key: x, patterns: X, peaks: {bf16: 1e12}, source: s}\n", "patterns: must be a list"),
        ("devices:\n  - {key: X Y, patterns: [X], peaks: {bf16: 1e12}, source: s}\n", "key 'X Y' must match"),
        (
            "devices:\n  - {key: x, patterns: [X], peaks: {bf16: 1e12}, source: s, speed: 3}\n",
            "unknown field",
        ),
        (
            "devices:\n  - {key: h100-sxm, peaks: {bf16: 1e12}, source: s, mig_slices: 0}\n",
            r"\(key 'h100-sxm'\): mig",
        ),
        (
            "devices:\n  - {key: x, patterns: [X], peaks: {bf16: 1e12}, source: s}\n"
            "  - {key: x, patterns: [Y], peaks: {bf16: 1e12}, source: s}\n",
            r"devices\[1\] \(key 'x'\): key appears more than once",
        ),
        ("devices: [\n", "not valid YAML"),
    ],
)
def test_bad_override_file_names_the_entry_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(PeakTableError, match=message) as caught:
        PeakTable.from_file(path)
    assert str(path) in str(caught.value)


def test_override_that_captures_a_known_device_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "devices:\n  - {key: my-a10, patterns: [A10], peaks: {bf16: 1e12}, source: s}\n")
    with pytest.raises(PeakTableError, match=r"peaks\.yaml: device name 'NVIDIA A10G' listed for 'a10g'"):
        PeakTable.from_file(path)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PeakTableError, match="cannot read peak override file"):
        load_peak_overrides(tmp_path / "absent.yaml")


def test_override_file_sets_and_inherits_the_nvlink_figure(tmp_path: Path) -> None:
    """The NVLink figure a point-to-point link inside a node is judged against (issue 61): inherited by an override
    that does not name it, set by one that does (with the entry's source when no nvlink source is given), and
    refused when it is not a positive number."""
    table = PeakTable.from_file(_write(tmp_path, OVERRIDES_YAML))
    h100 = table.get("h100-sxm")
    assert h100 is not None and h100.nvlink_bandwidth_bytes_per_second == 450e9
    assert "900 GB/s" in h100.nvlink_bandwidth_source
    rtx = table.get("rtx-6000-ada")
    assert rtx is not None and rtx.nvlink_bandwidth_bytes_per_second is None  # PCIe card: nothing to judge against
    text = """
devices:
  - key: h100-sxm
    nvlink_bandwidth_bytes_per_second: 400e9
    source: measured with nccl-tests sendrecv_perf on our HGX H100
"""
    spec = PeakTable.from_file(_write(tmp_path, text, "nvlink.yaml")).get("h100-sxm")
    assert spec is not None and spec.nvlink_bandwidth_bytes_per_second == 400e9
    assert spec.nvlink_bandwidth_source == "measured with nccl-tests sendrecv_perf on our HGX H100"
    bad = text.replace("400e9", "-1")
    with pytest.raises(PeakTableError, match="nvlink_bandwidth_bytes_per_second"):
        PeakTable.from_file(_write(tmp_path, bad, "bad.yaml"))
