"""What each kind of install brings: distributions, size on disk, and the job side's import time.

Run: ``.venv/bin/python bench/install_footprint.py [--before PATH] [--imports N]``. Builds this checkout's wheel,
installs it into a fresh virtual environment per role (``pip install mfu-monitor`` for jobs and GPU nodes,
``[server]`` for the aggregator, ``[server,postgres]`` for production) and reports, for each: the distributions
installed beside pip, the size of the environment's site-packages, and (plain install) the median wall time of
``python -c "from mfumon import JobReporter; JobReporter"`` against ``python -c pass`` over ``--imports`` runs.
``--before`` takes a checkout of an older commit (e.g. a ``git worktree``) and measures its one install the same way,
for the ratio in one run. Needs the package index (pip downloads what the local caches lack).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, slots=True)
class Footprint:
    role: str
    distributions: int
    size_bytes: int
    names: tuple[str, ...]


def build_wheel(source: Path, out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(source)],
        check=True,
    )
    return next(out.glob("mfu_monitor-*.whl"))


def _site_packages(env: Path) -> Path:
    return next(env.glob("lib/python*/site-packages"))


def install(wheel: Path, extras: str, env: Path) -> Footprint:
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    target = f"mfu-monitor[{extras}] @ {wheel.as_uri()}" if extras else str(wheel)
    subprocess.run([str(python), "-m", "pip", "install", "-q", target], check=True)
    listed = json.loads(
        subprocess.run(
            [str(python), "-m", "pip", "list", "--format", "json"], check=True, capture_output=True, text=True
        ).stdout
    )
    names = tuple(sorted(p["name"].lower() for p in listed if p["name"].lower() not in {"pip", "setuptools"}))
    size = sum(f.stat().st_size for f in _site_packages(env).rglob("*") if f.is_file() and not f.is_symlink())
    baseline = sum(
        f.stat().st_size
        for d in _site_packages(env).iterdir()
        if d.name.split("-")[0].lower() in {"pip", "setuptools", "_distutils_hack"}
        for f in ([d] if d.is_file() else d.rglob("*"))
        if f.is_file()
    )
    return Footprint(extras or "plain", len(names), size - baseline, names)


def import_seconds(python: Path, code: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([str(python), "-c", code], check=True, cwd=tempfile.gettempdir())
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a checkout of an older commit, measured the same way")
    parser.add_argument("--imports", type=int, default=15, help="runs of each import timing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        wheel = build_wheel(ROOT, work / "wheel")
        rows = []
        for extras in ("", "server", "server,postgres"):
            rows.append(install(wheel, extras, work / f"env-{extras or 'plain'}"))
        plain = work / "env-plain" / "bin" / "python"
        bare = import_seconds(plain, "pass", args.imports)
        reporter = import_seconds(plain, "from mfumon import JobReporter; JobReporter", args.imports)
        before = None
        if args.before is not None:
            old_wheel = build_wheel(args.before, work / "old-wheel")
            before = install(old_wheel, "", work / "env-before")
            old_python = work / "env-before" / "bin" / "python"
            old_bare = import_seconds(old_python, "pass", args.imports)
            old_reporter = import_seconds(old_python, "from exporter import JobReporter; JobReporter", args.imports)
        print(f"{'install':<24} {'distributions':>13} {'site-packages':>14}")
        for row in rows:
            print(
                f"{'mfu-monitor' + (f'[{row.role}]' if row.role != 'plain' else ''):<24} "
                f"{row.distributions:>13} {row.size_bytes / 1e6:>11.1f} MB"
            )
        if before is not None:
            print(f"{'before (plain)':<24} {before.distributions:>13} {before.size_bytes / 1e6:>11.1f} MB")
        print(f"plain install: {', '.join(rows[0].names)}")
        print(
            f"from mfumon import JobReporter: {reporter * 1e3:.0f} ms wall, python -c pass {bare * 1e3:.0f} ms: "
            f"+{(reporter - bare) * 1e3:.0f} ms (median of {args.imports})"
        )
        if before is not None:
            print(
                f"before, from exporter import JobReporter: {old_reporter * 1e3:.0f} ms, pass {old_bare * 1e3:.0f} ms:"
                f" +{(old_reporter - old_bare) * 1e3:.0f} ms"
            )


if __name__ == "__main__":
    main()
