"""`mfumon.mfu.__all__` is the whole public namespace, and the engine stays free of server dependencies."""

from __future__ import annotations

import ast
import sys
import types
from pathlib import Path

import mfumon.mfu


def test_all_lists_exactly_the_public_names() -> None:
    public = {
        name
        for name, value in vars(mfumon.mfu).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }
    assert set(mfumon.mfu.__all__) == public
    assert len(mfumon.mfu.__all__) == len(set(mfumon.mfu.__all__))


def test_engine_imports_only_the_stdlib_and_yaml() -> None:
    # Nodes, tools and tests may use the engine without the server's dependencies.
    allowed = set(sys.stdlib_module_names) | {"yaml", "__future__"}
    for path in Path(mfumon.mfu.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots = {node.module.split(".")[0]}
            else:
                continue
            assert roots <= allowed, f"{path.name} imports {sorted(roots - allowed)}"
