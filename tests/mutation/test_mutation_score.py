"""The mutation check (tests/mutation/check.py): its judgement on made-up results, and the real run (slow)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.mutation.check import SURVIVORS_FILE, Survivor, judge, read_reviewed

_REVIEWED = """
### `mfumon.mfu._mfu.x_f__mutmut_3`

```diff
-    return a <= 0
+    return a < 0
```

Equivalent: because.
"""
_MODULES = ("mfumon.mfu._mfu",)
_SAME_CHANGE_RENUMBERED = Survivor("mfumon.mfu._mfu.x_f__mutmut_7", ("-return a <= 0", "+return a < 0"))


def _statuses(killed: int, survived: int) -> dict[str, str]:
    names = [f"mfumon.mfu._mfu.x_f__mutmut_{i}" for i in range(killed + survived)]
    return {name: "killed" if i < killed else "survived" for i, name in enumerate(names)}


def test_a_reviewed_survivor_passes_under_another_number() -> None:
    assert judge(_statuses(19, 1), [_SAME_CHANGE_RENUMBERED], _REVIEWED, _MODULES) == []


def test_an_unreviewed_survivor_fails() -> None:
    other = Survivor("mfumon.mfu._mfu.x_f__mutmut_3", ("-return a <= 0", "+return a <= 1"))
    failures = judge(_statuses(19, 1), [other], _REVIEWED, _MODULES)
    assert failures[0].startswith("unreviewed survivor mfumon.mfu._mfu.x_f__mutmut_3")
    assert failures[1] == "mfumon.mfu._mfu.x_f__mutmut_3 is listed in survivors.md but no longer survives: remove it"


def test_a_score_below_95_percent_fails() -> None:
    failures = judge(
        _statuses(18, 1) | {"mfumon.mfu._mfu.x_g__mutmut_1": "no tests"},
        [_SAME_CHANGE_RENUMBERED],
        _REVIEWED,
        _MODULES,
    )
    assert failures == [
        "mfumon.mfu._mfu: mutation score 90.0% is below 95%",
        "mfumon.mfu._mfu: 1 mutants neither killed nor survived: {'killed': 18, 'survived': 1, 'no tests': 1}",
    ]


def test_a_module_without_mutants_fails() -> None:
    assert judge({}, [], "", _MODULES) == ["mfumon.mfu._mfu: no mutants (is it in [tool.mutmut] source_paths?)"]


def test_the_survivors_file_parses() -> None:
    text = SURVIVORS_FILE.read_text(encoding="utf-8")
    assert len(read_reviewed(text)) == text.count("\n### `")


@pytest.mark.slow
def test_mutation_score_of_the_engine_and_the_ledger() -> None:
    """The whole run (2-5 minutes on two cores): every module at least 95 %, every survivor reviewed."""
    check = Path(__file__).with_name("check.py")
    done = subprocess.run([sys.executable, str(check)], capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
