"""The probe behind held-pushes-100k.txt: one ``mfumon serve`` (SQLite) filled with GPUS, pushed open loop at RATE for
SECONDS; p50/p99 of the pushes, the cycle collector's passes and the server's threads' CPU.

    PYTHONPATH=$PWD .venv/bin/python bench/results/cpu-2026-12-03-door/held_pushes_probe.py 100000 1500 30
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]
from aggregator_scale import fill, push_targets  # noqa: E402
from loadgen import run_load  # noqa: E402

SERVE = """
import gc, sys, time, runpy
started, count, total, most = [0.0], {}, {}, {}
def on_gc(phase, info):
    if phase == "start":
        started[0] = time.perf_counter()
        return
    g, took = info["generation"], time.perf_counter() - started[0]
    count[g] = count.get(g, 0) + 1; total[g] = total.get(g, 0) + took; most[g] = max(most.get(g, 0), took)
    print(f"GC passes {count} ms {({k: round(v * 1e3) for k, v in total.items()})} "
          f"longest {({k: round(v * 1e3) for k, v in most.items()})}", file=sys.stderr, flush=True)
gc.callbacks.append(on_gc)
sys.argv = ["mfumon", "serve"]
runpy.run_module("mfumon", run_name="__main__")
"""


def threads_cpu(pid: int) -> list[float]:
    tick = os.sysconf("SC_CLK_TCK")
    out = []
    for task in glob.glob(f"/proc/{pid}/task/*"):
        fields = Path(task, "stat").read_text().rsplit(")", 1)[1].split()
        out.append((int(fields[11]) + int(fields[12])) / tick)
    return sorted(out, reverse=True)


def main() -> None:
    gpus, rate, seconds = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    tmp = Path(tempfile.mkdtemp())
    (tmp / "serve.py").write_text(SERVE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MFUMON_")}
    env.update(MFUMON_DATABASE_URL=f"sqlite:///{tmp}/db.sqlite", MFUMON_LOG_LEVEL="WARNING", MFUMON_PORT="18123")
    with open(tmp / "err.log", "w") as log:
        server = subprocess.Popen([sys.executable, str(tmp / "serve.py")], env=env, stderr=log, stdout=log)
    url = "http://127.0.0.1:18123"
    for _ in range(300):
        try:
            if httpx.get(f"{url}/readyz").status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    nodes = gpus // 8
    fill(url, nodes, gpus // 32)
    filled = threads_cpu(server.pid)
    r = run_load(url, push_targets(nodes), seconds=seconds, processes=2, connections=32, rate=rate)
    print(f"p50 {r.percentile(0.5):.1f} ms, p99 {r.percentile(0.99):.1f} ms, {r.ok} of {r.sent} ok")
    print(f"threads' CPU (s) after the fill {filled[:4]}, after the load {threads_cpu(server.pid)[:4]}")
    server.terminate()
    server.wait()
    print([line for line in (tmp / "err.log").read_text().splitlines() if line.startswith("GC")][-2:])


if __name__ == "__main__":
    main()
