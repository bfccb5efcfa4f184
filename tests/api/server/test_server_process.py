"""What ``mfumon serve`` sets up in its own process: the cycle collector, malloc arenas, and memory handed back."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mfumon.api.core.memory import Trimmer
from mfumon.api.server import GC_THRESHOLDS

_PROBE = """
import gc, json
from mfumon.api.core.memory import limit_malloc_arenas
from mfumon.api.server import quiet_gc
before = gc.get_freeze_count()
quiet_gc()
print(json.dumps({"frozen": gc.get_freeze_count() - before, "thresholds": gc.get_threshold(),
                  "arenas": limit_malloc_arenas(2)}))
"""


def test_the_server_process_freezes_what_imports_built_and_caps_arenas() -> None:
    """Run in a child process: both settings are process-wide and would leak into the test run."""
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=60)
    probe = json.loads(out.stdout)
    assert probe["frozen"] > 10_000  # the modules, the app's schemas: out of every later collection
    assert tuple(probe["thresholds"]) == GC_THRESHOLDS
    assert probe["arenas"] is (sys.platform == "linux")  # glibc's mallopt; elsewhere a no-op that says so


_TRIM_PROBE = """
import json
from mfumon.api.core.memory import release_free_memory
def rss():
    return int(next(l for l in open('/proc/self/status') if l.startswith('VmRSS')).split()[1]) * 1024
held = [bytes(4000) for _ in range(50_000)]  # 200 MB in malloc's heap (too large for Python's own pools)
pin = bytes(4000)  # allocated after them: the heap's top stays in use, so free() alone cannot shrink it
before = rss()
del held
freed = rss()
released = release_free_memory()
print(json.dumps({"before": before, "freed": freed, "trimmed": rss(), "released": released}))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's malloc_trim")
def test_memory_freed_below_the_top_of_the_heap_goes_back_only_with_a_trim() -> None:
    out = subprocess.run([sys.executable, "-c", _TRIM_PROBE], capture_output=True, text=True, check=True, timeout=60)
    probe = json.loads(out.stdout)
    assert probe["released"] is True
    assert probe["before"] - probe["freed"] < 50e6  # freed, yet still resident ...
    assert probe["freed"] - probe["trimmed"] > 150e6  # ... until the trim hands the pages back


def test_the_trimmer_trims_only_after_something_was_forgotten() -> None:
    forgotten, calls = [0], []
    trimmer = Trimmer(lambda: forgotten[0], release=lambda: calls.append(forgotten[0]) is None)
    trimmer()
    assert calls == []  # nothing went away: no walk of the heap
    forgotten[0] = 3
    trimmer()
    trimmer()
    assert calls == [3] and trimmer.trims == 1
    forgotten[0] = 5
    trimmer()
    assert calls == [3, 5]
