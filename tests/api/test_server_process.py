"""What ``mfumon serve`` sets up in its own process before it serves: the cycle collector and malloc arenas."""

from __future__ import annotations

import json
import subprocess
import sys

from api.server import GC_THRESHOLDS

_PROBE = """
import gc, json
from api.core.memory import limit_malloc_arenas
from api.server import quiet_gc
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
