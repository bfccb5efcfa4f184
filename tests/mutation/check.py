"""Mutation testing of the MFU engine and the ledger, judged: the one command (docs/developing.md).

    .venv/bin/python tests/mutation/check.py [--workdir DIR] [--max-children N]

Runs mutmut (configured in pyproject.toml, [tool.mutmut]: the modules, their fast unit tests) and exits 1 when a
module's mutation score is below 95 % or when the survivors differ from those reviewed in
tests/mutation/survivors.md, each with the reason it cannot change behaviour. A survivor is matched there by its
function and its changed lines, not its number, so an edit elsewhere in the function does not unlist it.

mutmut writes the mutated sources under ``mutants/`` of the folder it runs in. It runs here in a copy (the package
laid out as the wheel has it, the tests it needs, pyproject.toml): the work tree, which others test in, is never
touched, and two runs can proceed at once. ``--workdir`` keeps the copy, to look at with ``mutmut browse`` there.
mutmut names a mutant by its file's path, so the copy puts each folder where pyproject.toml's package-dir installs
it (api/ as mfumon/api/): api/accounting/ledger.py is mutated as mfumon/api/accounting/ledger.py, the module the tests
import, mfumon.api.accounting.ledger.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest's own dependency there
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
SURVIVORS_FILE = Path(__file__).with_name("survivors.md")
THRESHOLD = 0.95
#: The modules under test, as mutmut names their mutants (the dotted path of each file it mutates).
MODULES = (
    "mfumon.mfu._checks",
    "mfumon.mfu._mfu",
    "mfumon.mfu._hardware",
    "mfumon.mfu._serving",
    "mfumon.mfu._flops",
    "mfumon.api.accounting.ledger",
)
#: What the run needs besides the package: the configuration and the fast unit tests with their conftests.
COPIED = (
    "pyproject.toml",
    "tests/__init__.py",
    "tests/conftest.py",
    "tests/mfu",
    "tests/api/__init__.py",
    "tests/api/conftest.py",
    "tests/api/accounting",
    "docs/reference",  # tests/mfu/test_docs_peak_table.py compares mfu.md with the peak table
)
#: A timed-out mutant made the tests hang or crawl: the tests noticed it, like a killed one.
DETECTED = frozenset({"killed", "timeout", "caught by type check"})
_LISTED = re.compile(r"^### `(?P<name>[^`]+)`\s*\n+```diff\n(?P<diff>.*?)^```", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Survivor:
    """A mutant no test killed: its name, and the lines it changes (the key it is reviewed under)."""

    name: str
    changed: tuple[str, ...]

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        return self.name.rpartition("__mutmut_")[0], self.changed


def prepare(workdir: Path) -> None:
    """Copy the package, laid out as installed (package-dir: api/ as mfumon/api/), and what the tests need into
    `workdir`."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    for package, folder in setuptools["package-dir"].items():
        shutil.copytree(REPO / folder, workdir.joinpath(*package.split(".")), ignore=ignore, dirs_exist_ok=True)
    for relative in COPIED:
        source, target = REPO / relative, workdir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=ignore, dirs_exist_ok=True)
        else:
            shutil.copy2(source, target)


def mutmut(workdir: Path, *args: str, log: Path | None = None) -> str:
    """Run mutmut in `workdir` at low priority (the machine is shared); its output, or raise when it fails."""
    command = [sys.executable, "-m", "mutmut", *args]
    with open(log or os.devnull, "w", encoding="utf-8") as sink:
        done = subprocess.run(
            command,
            cwd=workdir,
            stdout=subprocess.PIPE if log is None else sink,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=lambda: os.nice(10),
            check=False,
        )
    if done.returncode != 0:
        tail = done.stdout if log is None else log.read_text(encoding="utf-8", errors="replace")[-4000:]
        raise SystemExit(f"mutmut {' '.join(args)} failed ({done.returncode}):\n{tail}")
    return done.stdout or ""


def read_statuses(workdir: Path) -> dict[str, str]:
    """Every mutant's status, from `mutmut results --all true` ("name: status" lines)."""
    statuses = {}
    for line in mutmut(workdir, "results", "--all", "true").splitlines():
        name, _, status = line.strip().rpartition(": ")
        if "__mutmut_" in name:
            statuses[name] = status
    return statuses


def read_survivor(workdir: Path, name: str) -> Survivor:
    """The lines `name` changes, from `mutmut show` (a unified diff of the function)."""
    diff = mutmut(workdir, "show", name).splitlines()
    changed = tuple(
        line[0] + line[1:].strip()
        for line in diff
        if line[:1] in "+-" and not line.startswith(("+++", "---")) and line[1:].strip()
    )
    return Survivor(name, changed)


def read_reviewed(text: str) -> dict[tuple[str, tuple[str, ...]], str]:
    """The survivors reviewed in survivors.md: key -> the name they were listed under."""
    reviewed = {}
    for match in _LISTED.finditer(text):
        lines = match["diff"].splitlines()
        changed = tuple(line[0] + line[1:].strip() for line in lines if line[:1] in "+-" and line[1:].strip())
        reviewed[Survivor(match["name"], changed).key] = match["name"]
    return reviewed


def judge(
    statuses: dict[str, str], survivors: list[Survivor], reviewed_text: str, modules: tuple[str, ...] = MODULES
) -> list[str]:
    """Print the score per module and return the failures (empty when the check passes)."""
    failures = []
    print(f"{'module':<34}{'mutants':>8}{'detected':>9}{'survived':>9}{'other':>6}{'score':>8}")
    for module in modules:
        counts = Counter(status for name, status in statuses.items() if name.startswith(module + "."))
        total = sum(counts.values())
        detected = sum(counts[status] for status in DETECTED)
        other = total - detected - counts["survived"]
        score = detected / total if total else 0.0
        print(f"{module:<34}{total:>8}{detected:>9}{counts['survived']:>9}{other:>6}{score:>8.1%}")
        if not total:
            failures.append(f"{module}: no mutants (is it in [tool.mutmut] source_paths?)")
        elif score < THRESHOLD:
            failures.append(f"{module}: mutation score {score:.1%} is below {THRESHOLD:.0%}")
        if other:
            failures.append(f"{module}: {other} mutants neither killed nor survived: {dict(counts)}")
    reviewed = read_reviewed(reviewed_text)
    found = {survivor.key: survivor for survivor in survivors}
    for key, survivor in found.items():
        if key not in reviewed:
            change = "\n".join(f"    {line}" for line in survivor.changed)
            failures.append(
                f"unreviewed survivor {survivor.name} (write the test that kills it, or add it to "
                f"{SURVIVORS_FILE.relative_to(REPO)} with why it cannot change behaviour):\n{change}"
            )
    for key, listed in reviewed.items():
        if key not in found:
            failures.append(f"{listed} is listed in {SURVIVORS_FILE.name} but no longer survives: remove it")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, help="run (and keep the results) here instead of a temporary folder")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2, help="mutants run at once")
    parser.add_argument("--judge-only", action="store_true", help="judge the results already in --workdir")
    args = parser.parse_args(argv)
    if args.judge_only and args.workdir is None:
        parser.error("--judge-only needs --workdir")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mfumon-mutation-"))
    started = time.monotonic()
    try:
        if not args.judge_only:
            prepare(workdir)
            mutmut(workdir, "run", "--max-children", str(args.max_children), log=workdir / "mutmut.log")
        statuses = read_statuses(workdir)
        survivors = [read_survivor(workdir, name) for name, status in statuses.items() if status == "survived"]
        failures = judge(statuses, survivors, SURVIVORS_FILE.read_text(encoding="utf-8"))
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"{len(statuses)} mutants in {time.monotonic() - started:.0f} s")
    for failure in failures:
        print(f"FAIL {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
