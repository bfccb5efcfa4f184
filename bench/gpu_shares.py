"""Two jobs on one GPU: does the exporter's per-job split of it (issue 35) match the work each job really did?

Starts two child processes on GPU 0, one with ``MFUMON_JOB_ID=share-a`` and one with ``MFUMON_JOB_ID=share-b`` (the
exporter's JobResolver reads the variable from /proc/<pid>/environ). Each runs bf16 ``size x size`` matmuls in bursts
of a fixed number of products, then sleeps to the end of its period, so that alone it keeps the GPU busy for its duty
cycle (``--duty-a``, ``--duty-b``; the number of products per burst comes from each child's own CUDA-event timing of a
one-second run of them on the otherwise idle GPU). While both run, the real exporter source
(``NvmlSource(NvmlApi.load(), JobResolver("/proc"))``) samples every ``--interval`` seconds; for each sample it records
the GPU's shares as the exporter builds them (job id, share, method), and the raw ``nvmlDeviceGetProcessUtilization``
answer (and the accounting answer, where the exporter falls back to it) for that cycle.

    python bench/gpu_shares.py [--seconds 10] [--interval 1] [--duty-a 0.6] [--duty-b 0.2]
        [--period 0.043] [--size 8192] [--tolerance 0.05] [--json out.json]

What it prints: each child's busy fraction, measured two ways from its own timing (products x solo product time / wall
time: the GPU time it used; and CUDA-event time of its bursts / wall time, which also counts the time a burst waited
for the other process's turn on the GPU), the split those imply, and per sample the exporter's shares beside the split
of the products the children ran in that sample's interval. The measured split is the ratio of products run: both
children run the same kernel, so a product takes the same GPU time whichever process runs it, whatever the clocks.

Verdict: the exporter's split matches when its shares come from ``process_utilization`` and the mean, over the
samples after the first, of share-a's share is within ``--tolerance`` (default 0.05) of share-a's part of the
products (and so share-b's too). Why 0.05: NVML's per-process smUtil is a whole percent per sample, a cycle's window
is NVML's samples since the previous cycle (its edges are NVML's, not the products' counted here, so a window can hold
one duty period more or less of a job than the count), and a time-sliced GPU spends some of its time switching
between the two contexts, which neither job's products account for; together a few percent, not more. The default
duties add up to 0.8 and not more, so that neither job's bursts wait long for the other's: at a sum near 1 both
fall behind their periods and the split tends to what time slicing gives two busy processes (1/2 each).

What the H200 VM of 2026-12-04 showed (bench/results/h200-2026-12-04/README.md): NVML's per-process samples are
coarser than that reasoning assumed. Each process gets at most one sample a second, its smUtil a multiple of about a
fifth of the GPU's utilization, the per-process values adding up to the GPU's: the driver looks about every 200 ms at
which process is on the GPU. A duty period that divides 200 ms (0.05 s) locks onto those looks and one job got the
whole GPU in every cycle; hence the default of 0.043 s. With it, the mean over 10 one-second cycles was 0.06-0.08 off
the products' split, about what 50 looks at a 0.24 / 0.76 split give by chance (sqrt(0.24 x 0.76 / 50) = 0.06).

Exit status: 0 when the split matches; 2 when it ran but did not match, or NVML gave no per-process samples (the
verdict says which); 1 when it cannot run (no torch, no CUDA device, NVML does not initialise, GPU 0 is in MIG mode).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mfumon.exporter.errors import DeviceError, SourceUnavailable
from mfumon.exporter.node.attribution import JobResolver
from mfumon.exporter.node.sources.nvml import NvmlSource
from mfumon.exporter.node.sources.nvml_api import NvmlApi
from mfumon.exporter.samples import GpuSample
from tests.conftest import stop_process

JOBS = ("share-a", "share-b")

#: One job: calibrates alone, says it is ready, waits for the run's length on stdin, then runs its duty cycle and
#: prints what it did as one JSON line. Every burst is ``(wall start, wall end, CUDA-event seconds)``.
_CHILD = r"""
import json, os, sys, time
size, duty, period = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
try:
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device")
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    c = torch.empty_like(a)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(5):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    # A one-second run: the clocks the GPU holds under sustained load (a short one would see the idle boost clock).
    timed, began = [], time.time()
    while time.time() - began < 1.0:
        start.record()
        for _ in range(10):
            torch.matmul(a, b, out=c)
        end.record()
        end.synchronize()
        timed.append(start.elapsed_time(end) / 1e3 / 10)
    tail = sorted(timed[len(timed) // 2 :])  # the second half: clocks settled
    solo = tail[len(tail) // 2]
except Exception as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
    raise SystemExit(1)
per_burst = max(1, round(duty * period / solo))
print(json.dumps({"pid": os.getpid(), "solo_matmul_s": solo, "matmuls_per_burst": per_burst}), flush=True)
seconds = float(sys.stdin.readline())
bursts = []
began = time.time()
due = began
while time.time() - began < seconds:
    t0 = time.time()
    start.record()
    for _ in range(per_burst):
        torch.matmul(a, b, out=c)
    end.record()
    end.synchronize()
    bursts.append((t0, time.time(), start.elapsed_time(end) / 1e3))
    due += period
    pause = due - time.time()
    if pause > 0:
        time.sleep(pause)
    else:
        due = time.time()  # behind: start the next period now rather than run bursts back to back to catch up
wall = time.time() - began
print(json.dumps({"began": began, "wall_s": wall, "bursts": bursts}), flush=True)
"""


def _start_child(job: str, args: argparse.Namespace, duty: float) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """Start one job and wait until it has calibrated (alone: the other waits on its stdin meanwhile)."""
    env = {**os.environ, "MFUMON_JOB_ID": job}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(args.size), str(duty), str(args.period)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    try:
        ready = json.loads(line)
    except json.JSONDecodeError:
        ready = {"error": f"no ready line (exit status {child.poll()}): {line!r}"}
    return child, ready


def work_between(bursts: list[list[float]], per_burst: int, t0: float, t1: float) -> float:
    """Products a job ran in ``[t0, t1]`` (wall clock), a burst's products spread evenly over its span."""
    total = 0.0
    for start, end, _ in bursts:
        overlap = min(end, t1) - max(start, t0)
        if overlap > 0:
            total += per_burst * (overlap / (end - start) if end > start else 1.0)
    return total


def _raw_samples(handle: Any, since_us: int) -> list[dict[str, int]] | str:
    """``nvmlDeviceGetProcessUtilization(handle, since_us)`` as pynvml answers it, or the error's name."""
    import pynvml

    try:
        samples = pynvml.nvmlDeviceGetProcessUtilization(handle, since_us)
    except pynvml.NVMLError as exc:
        return f"{type(exc).__name__} ({getattr(exc, 'value', '?')}): {exc}"
    fields = ("pid", "timeStamp", "smUtil", "memUtil", "encUtil", "decUtil")
    return [{name: int(getattr(s, name)) for name in fields if hasattr(s, name)} for s in samples]


def _record_calls(api: NvmlApi, calls: list[dict[str, Any]]) -> None:
    """Wrap the two per-process reads the exporter's ``_shares`` makes so each call's input and answer is kept."""
    process_utilization = api.process_utilization
    accounting_utilization = api.accounting_utilization

    def recorded_process_utilization(handle: Any, since_us: int) -> tuple[dict[int, float], int]:
        entry: dict[str, Any] = {"call": "process_utilization", "since_us": since_us}
        entry["raw"] = _raw_samples(handle, since_us)
        calls.append(entry)
        try:
            busy, newest = process_utilization(handle, since_us)
        except DeviceError as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"
            raise
        entry["busy"] = {str(pid): round(value, 4) for pid, value in busy.items()}
        entry["newest_us"] = newest
        return busy, newest

    def recorded_accounting(handle: Any) -> dict[int, float]:
        entry: dict[str, Any] = {"call": "accounting"}
        calls.append(entry)
        try:
            out = accounting_utilization(handle)
        except DeviceError as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"
            raise
        entry["busy"] = {str(pid): value for pid, value in out.items()}
        return out

    api.process_utilization = recorded_process_utilization  # type: ignore[method-assign]
    api.accounting_utilization = recorded_accounting  # type: ignore[method-assign]


def judge(samples: list[dict[str, Any]], measured_a: float, tolerance: float) -> dict[str, Any]:
    """The verdict over the samples after the priming one: method used, mean share of share-a, worst window."""
    scored = [s for s in samples if not s["priming"]]
    methods: dict[str, int] = {}
    shares_a: list[float] = []
    deviations: list[float] = []
    for sample in scored:
        shares = sample["shares"]
        method = "none" if not shares else shares[0]["method"]
        methods[method] = methods.get(method, 0) + 1
        if method != "process_utilization":
            continue
        share_a = next((s["share"] for s in shares if s["job_id"] == JOBS[0]), 0.0)
        shares_a.append(share_a)
        reference = sample["reference_share_a"]
        if reference is not None:
            deviations.append(abs(share_a - reference))
    out: dict[str, Any] = {
        "tolerance": tolerance,
        "samples_scored": len(scored),
        "methods": methods,
        "measured_share_a": round(measured_a, 4),
    }
    if not shares_a:
        out["matches"] = False
        out["reason"] = f"no sample split by process_utilization (methods: {methods})"
        return out
    mean_a = statistics.mean(shares_a)
    out["exporter_mean_share_a"] = round(mean_a, 4)
    out["exporter_share_a_min_max"] = [round(min(shares_a), 4), round(max(shares_a), 4)]
    out["max_window_deviation"] = round(max(deviations), 4) if deviations else None
    out["mean_window_deviation"] = round(statistics.mean(deviations), 4) if deviations else None
    all_process = methods.get("process_utilization", 0) == len(scored)
    within = abs(mean_a - measured_a) <= tolerance
    out["matches"] = all_process and within
    out["reason"] = (
        f"mean exporter share of {JOBS[0]} {mean_a:.3f} vs measured {measured_a:.3f}: "
        f"|diff| {abs(mean_a - measured_a):.3f} {'<=' if within else '>'} {tolerance}"
        + ("" if all_process else f"; not every sample split by process_utilization ({methods})")
    )
    return out


def nvml_named(samples: list[dict[str, Any]], job_of_pid: dict[int, str]) -> dict[str, dict[str, Any]]:
    """Per job: in how many scored cycles NVML's raw process samples listed its pid, and its mean smUtil there."""
    scored = [s for s in samples if not s["priming"]]
    utils: dict[str, list[int]] = {job: [] for job in job_of_pid.values()}
    for sample in scored:
        seen: dict[str, int] = {}
        for call in sample["calls"]:
            if call["call"] == "process_utilization" and isinstance(call.get("raw"), list):
                for raw in call["raw"]:
                    job = job_of_pid.get(raw["pid"])
                    if job is not None:
                        seen[job] = seen.get(job, 0) + raw["smUtil"]
        for job, util in seen.items():
            utils[job].append(util)
    return {
        job: {"cycles": len(u), "of": len(scored), "mean_sm_util": statistics.mean(u) if u else None}
        for job, u in utils.items()
    }


def _share_text(sample: GpuSample) -> str:
    if not sample.shares:
        return f"no shares (job {sample.job_id})"
    return ", ".join(f"{s.job_id} {s.share:.3f} ({s.method})" for s in sample.shares)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to sample both jobs")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between exporter cycles")
    parser.add_argument("--duty-a", type=float, default=0.6, help="share-a's busy fraction alone")
    parser.add_argument("--duty-b", type=float, default=0.2, help="share-b's busy fraction alone")
    parser.add_argument(
        "--period", type=float, default=0.043, help="seconds per duty period (burst + sleep); not a divisor of 0.2"
    )
    parser.add_argument("--size", type=int, default=8192, help="matmul size (both jobs)")
    parser.add_argument("--tolerance", type=float, default=0.05, help="allowed |mean share - measured| of share-a")
    parser.add_argument("--json", help="write the children's timing, every sample and the verdict to this file")
    args = parser.parse_args()

    if importlib.util.find_spec("torch") is None:
        print("gpu_shares: needs torch with a CUDA device (the two jobs run bf16 matmuls)", file=sys.stderr)
        return 1
    try:
        api = NvmlApi.load()
    except SourceUnavailable as exc:
        print(f"gpu_shares: {exc}", file=sys.stderr)
        return 1
    calls: list[dict[str, Any]] = []
    _record_calls(api, calls)
    source = NvmlSource(api, JobResolver("/proc"))
    children: list[subprocess.Popen[str]] = []
    try:
        gpu = next((d for d in source.devices if d.index == 0), None)
        if gpu is None or gpu.mig_profile is not None:
            print("gpu_shares: GPU 0 is missing or in MIG mode (a MIG instance is never split)", file=sys.stderr)
            return 1
        print(f"GPU 0: {gpu.name} {gpu.uuid}")
        ready: dict[str, dict[str, Any]] = {}
        for job, duty in zip(JOBS, (args.duty_a, args.duty_b), strict=True):
            child, info = _start_child(job, args, duty)
            children.append(child)
            if "error" in info:
                print(f"gpu_shares: {job} could not start: {info['error']}", file=sys.stderr)
                return 1
            ready[job] = info
            print(
                f"{job}: pid {info['pid']}, solo product {1e3 * info['solo_matmul_s']:.2f} ms, "
                f"{info['matmuls_per_burst']} per {1e3 * args.period:.0f} ms period (duty {duty:.2f})"
            )
        run_s = args.seconds + 3.0  # 1 s to settle before the priming cycle, and past the last cycle
        for child in children:
            assert child.stdin is not None
            child.stdin.write(f"{run_s}\n")
            child.stdin.flush()
        time.sleep(1.0)
        samples: list[dict[str, Any]] = []
        cycles = round(args.seconds / args.interval)
        t_start = time.time()
        previous = t_start
        for cycle in range(cycles + 1):
            if cycle:
                time.sleep(max(0.0, t_start + cycle * args.interval - time.time()))
            before = len(calls)
            collected = source.collect()
            now = time.time()
            sample = next(s for s in collected if s.uuid == gpu.uuid)
            samples.append(
                {
                    "t": round(now - t_start, 3),
                    "wall": now,
                    "window": [previous, now],
                    "priming": cycle == 0,
                    "utilization": sample.utilization,
                    "sm_active": sample.sm_active,
                    "tensor_active": sample.tensor_active,
                    "compute_processes": sample.compute_processes,
                    "job_id": sample.job_id,
                    "shares": sample.to_json().get("shares"),
                    "calls": calls[before:],
                }
            )
            print(
                f"{now - t_start:5.1f}s util {sample.utilization} sm {sample.sm_active} "
                f"procs {sample.compute_processes}: {_share_text(sample)}"
            )
            previous = now
        for child in children:
            assert child.stdin is not None
            child.stdin.close()
        done: dict[str, dict[str, Any]] = {}
        for job, child in zip(JOBS, children, strict=True):
            assert child.stdout is not None
            line = child.stdout.readline()
            child.wait(timeout=60)
            done[job] = json.loads(line) if line.strip() else {"error": f"no result (exit status {child.returncode})"}
        try:
            direct_accounting: object = {str(k): v for k, v in api.accounting_utilization(gpu.handle).items()}
        except DeviceError as exc:
            direct_accounting = f"{type(exc).__name__}: {exc}"
    finally:
        for child in children:
            stop_process(child, timeout_seconds=30)  # type: ignore[arg-type]
        source.close()

    for job in JOBS:
        if "error" in done[job]:
            print(f"gpu_shares: {job} failed during the run: {done[job]['error']}", file=sys.stderr)
            return 1
    span = (samples[0]["wall"], samples[-1]["wall"])  # from the priming cycle to the last: what was scored
    children_out: dict[str, dict[str, Any]] = {}
    for job, duty in zip(JOBS, (args.duty_a, args.duty_b), strict=True):
        info, result = ready[job], done[job]
        per_burst, solo, bursts = info["matmuls_per_burst"], info["solo_matmul_s"], result["bursts"]
        products = work_between(bursts, per_burst, *span)
        wall = span[1] - span[0]
        in_span = [b for b in bursts if b[1] > span[0] and b[0] < span[1]]
        events = sum(b[2] * (min(b[1], span[1]) - max(b[0], span[0])) / (b[1] - b[0]) for b in in_span if b[1] > b[0])
        children_out[job] = {
            **info,
            "duty_target": duty,
            "products_in_span": round(products, 2),
            "busy_work": round(products * solo / wall, 4),
            "busy_events": round(events / wall, 4),
            "bursts_total": len(bursts),
            "wall_s": result["wall_s"],
            "bursts": [[round(v, 6) for v in b] for b in bursts],
        }
    work = {job: children_out[job]["products_in_span"] for job in JOBS}
    measured_a = work[JOBS[0]] / sum(work.values())
    for sample in samples:
        t0, t1 = sample["window"]
        window = {
            job: work_between(children_out[job]["bursts"], ready[job]["matmuls_per_burst"], t0, t1) for job in JOBS
        }
        total = sum(window.values())
        sample["reference_share_a"] = round(window[JOBS[0]] / total, 4) if total > 0 else None
    verdict = judge(samples, measured_a, args.tolerance)
    named = nvml_named(samples, {ready[job]["pid"]: job for job in JOBS})

    print()
    for job in JOBS:
        c = children_out[job]
        print(
            f"{job}: duty {c['duty_target']:.2f}, busy {c['busy_work']:.3f} (products x solo time / wall), "
            f"{c['busy_events']:.3f} (CUDA-event burst time / wall), {c['products_in_span']:.0f} products"
        )
    print(f"measured split: {JOBS[0]} {measured_a:.3f}, {JOBS[1]} {1 - measured_a:.3f} (ratio of products)")
    for sample in samples:
        if not sample["priming"]:
            exporter = {s["job_id"]: s["share"] for s in sample["shares"] or []}
            print(
                f"  {sample['t']:5.1f}s exporter {JOBS[0]} {exporter.get(JOBS[0], float('nan')):.3f} "
                f"vs products {sample['reference_share_a']}"
            )
    for job in JOBS:
        n = named[job]
        mean_sm = "-" if n["mean_sm_util"] is None else f"{n['mean_sm_util']:.0f}%"
        print(f"NVML's samples named {job} in {n['cycles']} of {n['of']} cycles (per-cycle smUtil sum, mean {mean_sm})")
    print(f"accounting (read directly at the end): {direct_accounting}")
    print(f"verdict: {'MATCHES' if verdict['matches'] else 'DOES NOT MATCH'}: {verdict['reason']}")
    if args.json:
        report = {
            "gpu": {"name": gpu.name, "uuid": gpu.uuid},
            "config": {k: v for k, v in vars(args).items() if k != "json"},
            "children": children_out,
            "measured_split": {JOBS[0]: round(measured_a, 4), JOBS[1]: round(1 - measured_a, 4)},
            "samples": samples,
            "nvml_named": named,
            "accounting_direct": direct_accounting,
            "verdict": verdict,
        }
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0 if verdict["matches"] else 2


if __name__ == "__main__":
    raise SystemExit(main())
