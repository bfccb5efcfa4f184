"""Run a short bf16 matmul load on GPU 0 (torch, if available) while sampling with the exporter's NVML source.

Prints, per sample, what NVML/GPM showed (utilization, SM active, SM occupancy, tensor active, DRAM active, power,
temperature, SM clock, clock-event reasons, job attribution, compute processes, the aggregator's hardware MFU estimate),
then the load's achieved TFLOP/s, the MFU that implies against the dense bf16 peak, the tensor-active / MFU ratio (the
simulator assumes about 1.15 for training) and the hardware estimate / MFU ratio (about 1.0 on the H200 calibration).

    python bench/gpu_check.py [--seconds 10] [--interval 1] [--size 8192] [--json out.json]

Start it as ``MFUMON_JOB_ID=gpu-check python bench/gpu_check.py`` to see the job attribution (NVML lists this
process on GPU 0; the exporter reads the variable from /proc/<pid>/environ, which holds the environment at exec).
Without torch or CUDA it only samples the idle GPUs. Exit status 1 when NVML does not initialise.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mfumon.exporter.errors import SourceUnavailable
from mfumon.exporter.node.attribution import JobResolver
from mfumon.exporter.node.sources.nvml import NvmlSource
from mfumon.exporter.node.sources.nvml_api import NvmlApi
from mfumon.exporter.samples import GpuSample
from mfumon.mfu import PeakTable, hardware_mfu


class MatmulLoad(threading.Thread):
    """bf16 ``size x size`` matmuls on cuda:0 until stopped; counts FLOPs and time."""

    def __init__(self, size: int) -> None:
        super().__init__(daemon=True)
        self.size = size
        self.stop = threading.Event()
        self.flops = 0.0
        self.seconds = 0.0
        self.error: str | None = None
        self.ready = threading.Event()

    def run(self) -> None:
        try:
            import torch

            a = torch.randn(self.size, self.size, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(self.size, self.size, device="cuda", dtype=torch.bfloat16)
            for _ in range(3):
                a @ b
            torch.cuda.synchronize()
            self.ready.set()
            started = time.perf_counter()
            while not self.stop.is_set():
                for _ in range(10):
                    a @ b
                torch.cuda.synchronize()
                self.flops += 10 * 2 * self.size**3
            self.seconds = time.perf_counter() - started
        except Exception as exc:  # report, do not crash the sampler
            self.error = f"{type(exc).__name__}: {exc}"
            self.ready.set()


def _row(t: float, s: GpuSample) -> str:
    def pct(v: float | None) -> str:
        return "  n/a" if v is None else f"{100 * v:5.1f}"

    clock = "n/a" if s.sm_clock_hz is None else f"{s.sm_clock_hz / 1e6:.0f}"
    power = "n/a" if s.power_watts is None else f"{s.power_watts:.0f}"
    reasons = ",".join(s.throttle_reasons or ()) or "-"
    return (
        f"{t:5.1f}s gpu{s.index} util {pct(s.utilization)} sm {pct(s.sm_active)} occ {pct(s.sm_occupancy)} "
        f"tensor {pct(s.tensor_active)} dram {pct(s.dram_active)} power {power}W temp {s.temperature_celsius}C "
        f"clock {clock}MHz reasons {reasons} job {s.job_id} procs {s.compute_processes} "
        f"hw-mfu {pct(hardware_mfu(s.tensor_active, s.sm_clock_hz, s.max_sm_clock_hz))}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--json", help="also write every sample to this file")
    args = parser.parse_args()
    try:
        source = NvmlSource(NvmlApi.load(), JobResolver("/proc"))
    except SourceUnavailable as exc:
        print(f"gpu_check: {exc}", file=sys.stderr)
        return 1
    devices = source.devices
    print(
        f"NVML devices: {[(d.index, d.name, d.mig_profile, 'GPM' if d.gpm_supported else 'no GPM') for d in devices]}"
    )
    load = MatmulLoad(args.size)
    load.start()
    load.ready.wait(timeout=120)
    if load.error:
        print(f"no load ({load.error}); sampling idle GPUs")
    records: list[dict[str, object]] = []
    busy_tensor: list[float] = []
    busy_estimate: list[float] = []
    started = time.monotonic()
    try:
        while time.monotonic() - started < args.seconds:
            time.sleep(args.interval)
            t = time.monotonic() - started
            for sample in source.collect():
                print(_row(t, sample))
                records.append({"t": round(t, 3), **sample.to_json()})
                if sample.index == 0 and sample.tensor_active is not None and not load.error:
                    busy_tensor.append(sample.tensor_active)
                    estimate = hardware_mfu(sample.tensor_active, sample.sm_clock_hz, sample.max_sm_clock_hz)
                    busy_estimate.append(estimate if estimate is not None else float("nan"))
    finally:
        load.stop.set()
        load.join(timeout=60)
        source.close()
    if load.seconds > 0:
        achieved = load.flops / load.seconds
        name = devices[0].name if devices else ""
        peak = PeakTable().lookup(name, "bf16").peak_flops_per_gpu  # dense, from the one peak table
        print(f"\nload: {achieved / 1e12:.1f} TFLOP/s bf16 on {name}")
        if peak and busy_tensor:
            mfu = achieved / peak
            tensor = statistics.mean(busy_tensor[1:] or busy_tensor)
            print(f"implied MFU {100 * mfu:.1f}% of {peak / 1e12:.0f} TFLOP/s; mean tensor_active {100 * tensor:.1f}%")
            print(f"tensor_active / MFU = {tensor / mfu:.2f}")
            estimate = statistics.mean(busy_estimate[1:] or busy_estimate)
            print(
                f"aggregator's hardware estimate (tensor x SM clock / max) {100 * estimate:.1f}%: {estimate / mfu:.2f}x"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
