"""The software fingerprint a job sends once (issue 59): what it finds, and that no probe can hurt the job."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from mfumon.exporter.job import fingerprint


def _fake_torch(monkeypatch: pytest.MonkeyPatch, *, hip: str | None = None, nccl: object = (2, 21, 5)) -> None:
    torch = types.ModuleType("torch")
    torch.__version__ = "2.5.1+cu124"  # type: ignore[attr-defined]
    torch.version = types.SimpleNamespace(cuda=None if hip else "12.4", hip=hip)  # type: ignore[attr-defined]
    torch.backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(version=lambda: 90100))  # type: ignore[attr-defined]
    torch.cuda = types.SimpleNamespace(nccl=types.SimpleNamespace(version=lambda: nccl))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)


def test_torch_cuda_cudnn_and_nccl_from_the_imported_torch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake_torch(monkeypatch)
    found = fingerprint.collect(environ={}, cgroup=tmp_path / "none", probes=(fingerprint._torch,))
    assert found == {
        "python": found["python"],
        "pytorch": "2.5.1+cu124",
        "cuda": "12.4",
        "cudnn": "90100",
        "nccl": "2.21.5",
    }


def test_rocm_builds_report_rccl(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake_torch(monkeypatch, hip="6.2.41133", nccl=(2, 20, 5))
    found = fingerprint.collect(environ={}, cgroup=tmp_path / "none", probes=(fingerprint._torch,))
    assert (found["rocm"], found["rccl"]) == ("6.2.41133", "2.20.5")
    assert "cuda" not in found and "nccl" not in found


def test_the_driver_from_nvml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[str] = []
    nvml = types.ModuleType("pynvml")
    nvml.nvmlInit = lambda: calls.append("init")  # type: ignore[attr-defined]
    nvml.nvmlSystemGetDriverVersion = lambda: b"550.54.15"  # type: ignore[attr-defined]
    nvml.nvmlShutdown = lambda: calls.append("shutdown")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    found = fingerprint.collect(environ={}, cgroup=tmp_path / "none", probes=(fingerprint._driver,))
    assert found["driver"] == "550.54.15" and calls == ["init", "shutdown"]


def test_frameworks_only_when_imported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delitem(sys.modules, "transformers", raising=False)
    found = fingerprint.collect(environ={}, cgroup=tmp_path / "none", probes=(fingerprint._frameworks,))
    assert "transformers" not in found
    fake = types.ModuleType("transformers")
    fake.__version__ = "4.57.1"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "transformers", fake)
    found = fingerprint.collect(environ={}, cgroup=tmp_path / "none", probes=(fingerprint._frameworks,))
    assert found["transformers"]  # the installed distribution's version, else the module's


def test_container_image_build_and_id(tmp_path: Path) -> None:
    cgroup = tmp_path / "cgroup"
    cgroup.write_text("0::/system.slice/docker-" + "ab" * 32 + ".scope\n")
    env = {"NVIDIA_PYTORCH_VERSION": "24.05", "NVIDIA_BUILD_ID": "92422178"}
    found = fingerprint.collect(environ=env, cgroup=cgroup, probes=())
    assert found["container_image"] == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert found["container_build"] == "92422178"
    assert found["container_id"] == "ab" * 6
    named = fingerprint.collect(
        environ={"MFUMON_CONTAINER_IMAGE": "registry/train@sha256:0f"}, cgroup=cgroup, probes=()
    )
    assert named["container_image"] == "registry/train@sha256:0f"


def test_a_failing_probe_is_left_out_and_tags_are_kept(tmp_path: Path) -> None:
    def broken(out: dict[str, str]) -> None:
        raise RuntimeError("NVML: driver/library version mismatch")

    found = fingerprint.collect([("experiment", "lr-sweep-3")], environ={}, cgroup=tmp_path / "none", probes=(broken,))
    assert found == {"python": found["python"], "tag.experiment": "lr-sweep-3"}


@pytest.mark.parametrize("text", ["novalue", "=x", "9key=x", "key=", "k" * 61 + "=x", "key=" + "v" * 257])
def test_a_bad_tag_says_what_a_tag_is(text: str) -> None:
    with pytest.raises(ValueError, match="is not key=value"):
        fingerprint.parse_tag(text)


def test_a_tag_and_the_bounds() -> None:
    assert fingerprint.parse_tag(" team = vision ") == ("team", "vision")
    big = fingerprint.bounded({f"k{i}": "v" * 300 for i in range(100)})
    assert len(big) == fingerprint.MAX_ENTRIES and {len(v) for v in big.values()} == {fingerprint.MAX_VALUE}


def test_what_is_installed_for_wrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``mfumon wrap`` imports nothing of the training: it reads the installed distributions (the CUDA of a
    ``+cu124`` wheel, the NCCL and cuDNN wheels)."""
    versions = {"torch": "2.5.1+cu124", "nvidia-nccl-cu12": "2.21.5", "nvidia-cudnn-cu12": "9.1.0.70"}

    def version(name: str) -> str:
        if name not in versions:
            raise fingerprint.importlib.metadata.PackageNotFoundError(name)
        return versions[name]

    monkeypatch.setattr(fingerprint.importlib.metadata, "version", version)
    found = fingerprint.collect(environ={}, cgroup=tmp_path / "none", probes=(fingerprint.installed,))
    assert {k: found[k] for k in ("pytorch", "cuda", "nccl", "cudnn")} == {
        "pytorch": "2.5.1+cu124",
        "cuda": "12.4",
        "nccl": "2.21.5",
        "cudnn": "9.1.0.70",
    }
