"""Fixtures for the exporter tests: the fake pynvml and amdsmi modules and a fake /proc tree."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.exporter.node import fake_amdsmi, fake_pynvml


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """``import pynvml`` yields the fake for this test; build devices with ``fake_nvml.reset([...])``."""
    fake_pynvml.reset([])
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml)
    yield fake_pynvml
    fake_pynvml.reset([])


@pytest.fixture
def fake_amd(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """``import amdsmi`` yields the fake for this test; build devices with ``fake_amd.reset([...])``."""
    fake_amdsmi.reset([])
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi)
    yield fake_amdsmi
    fake_amdsmi.reset([])


@pytest.fixture
def proc_root(tmp_path: Path) -> Callable[..., Path]:
    """``add(pid, env, start=...)`` writes ``<pid>/environ`` and ``<pid>/stat`` and returns the proc root."""
    root = tmp_path / "proc"
    root.mkdir()

    def add(pid: int, env: dict[str, str], start: int = 1000, comm: str = "python train.py") -> Path:
        directory = root / str(pid)
        directory.mkdir(exist_ok=True)
        (directory / "environ").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))
        fields = ["S", "1", str(pid), str(pid), "0", "-1", "4194560"] + ["0"] * 12 + [str(start)] + ["0"] * 30
        (directory / "stat").write_text(f"{pid} ({comm}) " + " ".join(fields) + "\n")
        return root

    add.root = root  # type: ignore[attr-defined]
    return add
