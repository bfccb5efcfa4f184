"""Type-check the package under the names it imports as: ``.venv/bin/python .ci/typecheck.py [mypy options]``.

pyproject.toml maps the package onto the repository's folders ([tool.setuptools] package-dir: mfumon.api is api/,
mfumon.exporter is exporter/, mfumon.migrations is migrations/). mypy knows no such mapping: it names a file by its
folders, so ``mypy mfumon api exporter migrations`` checks every file but calls api/main.py ``api.main``, finds no
module for ``from mfumon.api.errors import ...`` and (ignore_missing_imports) makes every name imported across the
package Any. This hands mypy each file of the mapped folders with its installed name (api/main.py is
mfumon.api.main), so imports between them reach the files themselves; errors name the files as they are edited.
Options and configuration are mypy's own ([tool.mypy] in pyproject.toml); the exit status is mypy's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mypy import util
from mypy.fscache import FileSystemCache
from mypy.main import process_options, run_build
from mypy.modulefinder import BuildSource

if sys.version_info >= (3, 11):
    import tomllib
else:  # mypy's own dependency there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def sources() -> list[BuildSource]:
    """Every Python file of the mapped folders, named as the package-dir mapping installs it."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    found = []
    for package, folder in setuptools["package-dir"].items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [*package.split("."), *path.relative_to(ROOT / folder).with_suffix("").parts]
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found.append(BuildSource(path.relative_to(ROOT).as_posix(), name, base_dir=str(ROOT)))
    return found


def main(argv: list[str]) -> int:
    os.chdir(ROOT)  # where mypy reads its configuration, and what the file names are relative to
    fscache = FileSystemCache()
    _, options = process_options(argv, require_targets=False, fscache=fscache)
    checked = sources()
    _, messages, blockers = run_build(checked, options, fscache, 0.0, sys.stdout, sys.stderr)
    n_errors, n_notes, n_files = util.count_stats(messages)
    formatter = util.FancyFormatter(sys.stdout, sys.stderr, options.hide_error_codes)
    if n_errors:
        print(formatter.format_error(n_errors, n_files, len(checked), blockers=blockers, use_color=False))
    else:
        print(formatter.format_success(len(checked), use_color=False))
    return (2 if blockers else 1) if messages and n_notes < len(messages) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
