"""Record what a real GPU's NVML answers, and calibrate GPM tensor activity against matmuls of known FLOP rate.

Two parts, both written as JSON under ``--out``:

* ``nvml_calls.json``: the raw answer (value, or ``NVMLError`` code and name) of every NVML call the exporter makes
  or may make for health counters (NVLink error counters and field values, PCIe replays, remapped rows, energy,
  clocks, clock-event reasons, ECC). The fake ``pynvml`` in ``tests/exporter/node/fake_pynvml.py`` mirrors these.
* ``calibration.json``: for each workload (idle, bf16/fp8/tf32 matmuls at full and half duty, a small matmul, a
  memory-bound elementwise kernel), the achieved FLOP/s timed with CUDA events, and the GPM metrics and clocks
  sampled every second while it ran. From that: achieved/peak (the true MFU of the kernel) against
  ``tensor_active`` and ``tensor_active x sm_clock / max_sm_clock`` (the hardware estimate the aggregator uses).

Uses pynvml and torch directly, not the exporter's code, so the record does not depend on what it is checking; the
dense peaks come from the one peak table (``mfumon.mfu``), a datasheet fact, not a thing under test.

    python bench/gpu_probe.py --out /tmp/probe [--seconds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pynvml as N

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mfumon.mfu import PeakTable

GPM_IDS = {
    "sm_active": 2,
    "sm_occupancy": 3,
    "integer": 4,
    "tensor_active": 5,
    "hmma_tensor": 7,
    "imma_tensor": 9,
    "dram_active": 10,
    "fp32": 12,
    "fp16": 13,
}


def _answer(fn: Any, *args: Any) -> dict[str, Any]:
    try:
        value = fn(*args)
    except N.NVMLError as exc:
        return {"error": int(exc.value), "error_name": str(exc)}
    except Exception as exc:  # a binding without the symbol, a ctypes mismatch
        return {"exception": f"{type(exc).__name__}: {exc}"}
    return {"value": _plain(value)}


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "_fields_"):
        return {name: _plain(getattr(value, name)) for name, *_ in value._fields_}
    return value


def record_calls(handle: Any) -> dict[str, Any]:
    calls: dict[str, Any] = {}
    simple = [
        "nvmlDeviceGetName",
        "nvmlDeviceGetUUID",
        "nvmlDeviceGetArchitecture",
        "nvmlDeviceGetCudaComputeCapability",
        "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceGetPcieReplayCounter",
        "nvmlDeviceGetRemappedRows",
        "nvmlDeviceGetRowRemapperHistogram",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetSupportedClocksEventReasons",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetEnforcedPowerLimit",
        "nvmlDeviceGetPowerManagementLimit",
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetMigMode",
        "nvmlDeviceGetPerformanceState",
        "nvmlDeviceGetCurrPcieLinkGeneration",
        "nvmlDeviceGetCurrPcieLinkWidth",
        "nvmlDeviceGetMaxPcieLinkGeneration",
        "nvmlDeviceGetMaxPcieLinkWidth",
        "nvmlDeviceGetEccMode",
        "nvmlDeviceGetRetiredPagesPendingStatus",
        "nvmlDeviceGetGpuFabricInfo",
        "nvmlGpmQueryDeviceSupport",
    ]
    for name in simple:
        fn = getattr(N, name, None)
        calls[name] = _answer(fn, handle) if fn else {"exception": "not in this pynvml"}
    for clock, cname in ((N.NVML_CLOCK_SM, "sm"), (N.NVML_CLOCK_MEM, "mem")):
        calls[f"nvmlDeviceGetClockInfo({cname})"] = _answer(N.nvmlDeviceGetClockInfo, handle, clock)
        calls[f"nvmlDeviceGetMaxClockInfo({cname})"] = _answer(N.nvmlDeviceGetMaxClockInfo, handle, clock)
        calls[f"nvmlDeviceGetApplicationsClock({cname})"] = _answer(N.nvmlDeviceGetApplicationsClock, handle, clock)
        calls[f"nvmlDeviceGetMaxCustomerBoostClock({cname})"] = _answer(
            N.nvmlDeviceGetMaxCustomerBoostClock, handle, clock
        )
    ecc_types = (
        (N.NVML_MEMORY_ERROR_TYPE_CORRECTED, "corrected"),
        (N.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, "uncorrected"),
    )
    for err, ename in ecc_types:
        for counter, cname in ((N.NVML_VOLATILE_ECC, "volatile"), (N.NVML_AGGREGATE_ECC, "aggregate")):
            calls[f"nvmlDeviceGetTotalEccErrors({ename},{cname})"] = _answer(
                N.nvmlDeviceGetTotalEccErrors, handle, err, counter
            )
    links: dict[str, Any] = {}
    for link in range(18):
        entry: dict[str, Any] = {"state": _answer(N.nvmlDeviceGetNvLinkState, handle, link)}
        for counter, cname in ((0, "replay"), (1, "recovery"), (2, "crc_flit"), (3, "crc_data"), (4, "ecc_data")):
            entry[cname] = _answer(N.nvmlDeviceGetNvLinkErrorCounter, handle, link, counter)
        entry["version"] = _answer(N.nvmlDeviceGetNvLinkVersion, handle, link)
        links[str(link)] = entry
    calls["nvlink"] = links
    fields = {
        "NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": 38,
        "NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": 45,
        "NVLINK_REPLAY_ERROR_COUNT_TOTAL": 52,
        "NVLINK_RECOVERY_ERROR_COUNT_TOTAL": 59,
        "PCIE_REPLAY_COUNTER": 94,
        "NVLINK_THROUGHPUT_DATA_TX": 138,
        "NVLINK_THROUGHPUT_DATA_RX": 139,
        "REMAPPED_COR": 142,
        "REMAPPED_UNC": 143,
        "REMAPPED_PENDING": 144,
        "REMAPPED_FAILURE": 145,
        "NVLINK_ERROR_DL_REPLAY": 161,
        "NVLINK_ERROR_DL_RECOVERY": 162,
        "NVLINK_ERROR_DL_CRC": 163,
        "NVLINK_LINK_COUNT": 91,
    }
    try:
        values = N.nvmlDeviceGetFieldValues(handle, list(fields.values()))
        calls["nvmlDeviceGetFieldValues"] = {
            name: {"nvmlReturn": int(v.nvmlReturn), "valueType": int(v.valueType), "value": _field(v)}
            for name, v in zip(fields, values, strict=True)
        }
    except Exception as exc:
        calls["nvmlDeviceGetFieldValues"] = {"exception": f"{type(exc).__name__}: {exc}"}
    return calls


def _field(v: Any) -> Any:
    kinds = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
    return getattr(v.value, kinds.get(int(v.valueType), "ullVal"), None)


class GpmSampler(threading.Thread):
    """One GPM sample pair per ``interval``, with clocks and power, until stopped."""

    def __init__(self, handle: Any, interval: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.handle, self.interval = handle, interval
        self.stop_event = threading.Event()
        self.rows: list[dict[str, Any]] = []

    def run(self) -> None:
        prev = N.nvmlGpmSampleAlloc()
        cur = N.nvmlGpmSampleAlloc()
        N.nvmlGpmSampleGet(self.handle, prev)
        while not self.stop_event.wait(self.interval):
            N.nvmlGpmSampleGet(self.handle, cur)
            row: dict[str, Any] = {"t": time.monotonic()}
            for name, mid in GPM_IDS.items():
                data = N.c_nvmlGpmMetricsGet_t()
                data.version = N.NVML_GPM_METRICS_GET_VERSION
                data.numMetrics = 1
                data.sample1, data.sample2 = prev, cur
                data.metrics[0].metricId = mid
                try:
                    N.nvmlGpmMetricsGet(data)
                    row[name] = None if data.metrics[0].nvmlReturn else data.metrics[0].value / 100.0
                except N.NVMLError:
                    row[name] = None
            row["sm_clock_hz"] = N.nvmlDeviceGetClockInfo(self.handle, N.NVML_CLOCK_SM) * 1e6
            row["power_watts"] = N.nvmlDeviceGetPowerUsage(self.handle) / 1000.0
            row["clocks_event_reasons"] = N.nvmlDeviceGetCurrentClocksEventReasons(self.handle)
            self.rows.append(row)
            prev, cur = cur, prev
        N.nvmlGpmSampleFree(prev)
        N.nvmlGpmSampleFree(cur)


def workloads(torch: Any, seconds: float) -> list[tuple[str, str | None, Any]]:
    """(name, dtype of the peak it is judged against, a callable that runs ~seconds and returns FLOPs done)."""

    def matmul(size: int, dtype: Any, duty: float = 1.0) -> Any:
        a = torch.randn(size, size, device="cuda").to(dtype)
        b = torch.randn(size, size, device="cuda").to(dtype)

        def run() -> tuple[float, float]:
            flops = 0.0
            busy = 0.0
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                start_ev, stop_ev = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start_ev.record()
                for _ in range(20):
                    a @ b
                stop_ev.record()
                stop_ev.synchronize()
                burst = start_ev.elapsed_time(stop_ev) / 1000.0
                busy += burst
                flops += 20 * 2.0 * size**3
                if duty < 1.0:
                    time.sleep(burst * (1 - duty) / duty)
            return flops, busy

        return run

    def scaled_fp8(size: int) -> Any:
        a = torch.randn(size, size, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(size, size, device="cuda").to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device="cuda")

        def run() -> tuple[float, float]:
            flops = busy = 0.0
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                start_ev, stop_ev = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start_ev.record()
                for _ in range(20):
                    torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
                stop_ev.record()
                stop_ev.synchronize()
                busy += start_ev.elapsed_time(stop_ev) / 1000.0
                flops += 20 * 2.0 * size**3
            return flops, busy

        return run

    def elementwise() -> Any:
        x = torch.randn(256 * 1024 * 1024, device="cuda")
        y = torch.randn_like(x)

        def run() -> tuple[float, float]:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                for _ in range(20):
                    x.add_(y)
                torch.cuda.synchronize()
            return 0.0, seconds

        return run

    def idle() -> tuple[float, float]:
        time.sleep(seconds)
        return 0.0, seconds

    torch.backends.cuda.matmul.allow_tf32 = True
    return [
        ("idle", None, idle),
        ("bf16_matmul_8192", "bf16", matmul(8192, torch.bfloat16)),
        ("bf16_matmul_8192_half_duty", "bf16", matmul(8192, torch.bfloat16, duty=0.5)),
        ("bf16_matmul_2048", "bf16", matmul(2048, torch.bfloat16)),
        ("fp8_matmul_8192", "fp8", scaled_fp8(8192)),
        ("tf32_matmul_8192", "tf32", matmul(8192, torch.float32)),
        ("fp32_elementwise_add", None, elementwise()),
    ]


def calibrate(handle: Any, seconds: float) -> list[dict[str, Any]]:
    import torch

    max_clock_hz = N.nvmlDeviceGetMaxClockInfo(handle, N.NVML_CLOCK_SM) * 1e6
    device_name = N.nvmlDeviceGetName(handle)
    device_name = device_name.decode() if isinstance(device_name, bytes) else device_name
    peaks = PeakTable()
    results = []
    for name, dtype, make in workloads(torch, seconds):
        try:
            make_run = make
            if name != "idle":  # warm up: module load, cuBLAS handles, clocks ramp
                make_run()
            sampler = GpmSampler(handle)
            started = time.monotonic()
            sampler.start()
            flops, busy = make_run()
            wall = time.monotonic() - started
            sampler.stop_event.set()
            sampler.join()
        except Exception as exc:
            results.append({"workload": name, "error": f"{type(exc).__name__}: {exc}"})
            continue
        rows = sampler.rows[1:] or sampler.rows  # the first interval straddles the start
        achieved = flops / wall
        entry: dict[str, Any] = {
            "workload": name,
            "dtype": dtype,
            "wall_seconds": wall,
            "busy_seconds": busy,
            "achieved_flops_per_second": achieved,
            "max_sm_clock_hz": max_clock_hz,
            "samples": sampler.rows,
        }
        for key in ("tensor_active", "hmma_tensor", "sm_active", "dram_active", "sm_clock_hz", "power_watts"):
            vals = [r[key] for r in rows if r.get(key) is not None]
            entry[f"mean_{key}"] = statistics.mean(vals) if vals else None
        if dtype and entry["mean_tensor_active"] is not None:
            peak = peaks.lookup(device_name, dtype).peak_flops_per_gpu
            if peak is None:
                raise SystemExit(f"{device_name}: no dense {dtype} peak in the peak table")
            mfu = achieved / peak
            clock_scaled = entry["mean_tensor_active"] * entry["mean_sm_clock_hz"] / max_clock_hz
            entry["true_mfu"] = mfu
            entry["hardware_estimate"] = clock_scaled
            entry["estimate_over_true"] = clock_scaled / mfu if mfu else None
        results.append(entry)
        print(
            f"{name:28s} achieved {achieved / 1e12:7.1f} TFLOP/s  true MFU {entry.get('true_mfu', 0):.3f}  "
            f"tensor {entry['mean_tensor_active'] or 0:.3f}  estimate {entry.get('hardware_estimate', 0):.3f}  "
            f"sm {entry['mean_sm_active'] or 0:.3f}  dram {entry['mean_dram_active'] or 0:.3f}  "
            f"clock {(entry['mean_sm_clock_hz'] or 0) / 1e6:.0f}/{max_clock_hz / 1e6:.0f} MHz  "
            f"power {entry['mean_power_watts'] or 0:.0f} W",
            flush=True,
        )
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    N.nvmlInit()
    try:
        handle = N.nvmlDeviceGetHandleByIndex(0)
        meta = {
            "driver": _answer(N.nvmlSystemGetDriverVersion),
            "nvml": _answer(N.nvmlSystemGetNVMLVersion),
            "pynvml": getattr(N, "__version__", None),
            "device_count": N.nvmlDeviceGetCount(),
        }
        record = {"meta": meta, "device0": record_calls(handle)}
        (out / "nvml_calls.json").write_text(json.dumps(record, indent=1, default=str))
        print("nvml calls recorded", flush=True)
        (out / "calibration.json").write_text(json.dumps(calibrate(handle, args.seconds), indent=1, default=str))
    finally:
        N.nvmlShutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
