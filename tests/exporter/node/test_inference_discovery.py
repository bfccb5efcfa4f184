"""Where serving endpoints come from: ``--inference.url`` options, served models, and local process discovery."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mfumon.exporter.errors import ConfigError
from mfumon.exporter.node.inference.discovery import discover_endpoints, engine_of, find_serving_processes
from mfumon.exporter.node.inference.endpoints import describe_model, find_hf_config, parse_endpoint, split_endpoint_list

LLAMA3_CONFIG = Path(__file__).parents[1] / "job" / "fixtures" / "meta-llama__Meta-Llama-3-8B.config.json"


def test_endpoint_with_job_model_path_and_options(tmp_path: Path) -> None:
    model_dir = tmp_path / "Meta-Llama-3-8B"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(LLAMA3_CONFIG.read_text())
    endpoint = parse_endpoint(
        f"http://127.0.0.1:8000/metrics,job_id=chat-8b,model={model_dir},kv_cache_dtype=fp8,num_gpus=2,team=search"
    )
    assert endpoint.url == "http://127.0.0.1:8000/metrics" and endpoint.port == 8000
    assert endpoint.job_id == "chat-8b"
    metadata = endpoint.report_metadata()
    assert metadata["kind"] == "inference"
    assert metadata["model"]["params"] == 8_030_261_248 and metadata["model"]["kv_heads"] == 8
    assert metadata["weight_dtype"] == "bf16"  # the config's torch_dtype
    assert metadata["kv_cache_dtype"] == "fp8" and metadata["num_gpus"] == 2 and metadata["team"] == "search"


def test_endpoint_with_an_explicit_shape() -> None:
    endpoint = parse_endpoint(
        "http://10.0.0.7:30000/metrics,engine=sglang,params=70e9,layers=80,heads=64,kv_heads=8,head_dim=128"
    )
    assert endpoint.engine == "sglang"
    assert endpoint.model == {"params": 70e9, "layers": 80, "heads": 64, "kv_heads": 8, "head_dim": 128}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("localhost:8000/metrics", "http"),
        ("http://h/metrics,job=1", "key=value"),
        ("http://h/metrics,engine=triton", "engine"),
        ("http://h/metrics,weight_dtype=int3", "weight_dtype"),
        ("http://h/metrics,num_gpus=-1", "num_gpus"),
        ("http://h/metrics,layers=80", "params"),
        ("http://h/metrics,model=/nonexistent/model", "config.json"),
        ("http://h/metrics,job_id=a b", "job_id"),
    ],
)
def test_bad_endpoint_options_are_config_errors(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_endpoint(spec)


def test_endpoint_list_from_the_environment() -> None:
    assert split_endpoint_list("http://a/metrics,job_id=x\n  http://b/metrics ") == [
        "http://a/metrics,job_id=x",
        "http://b/metrics",
    ]


def _hf_cache(root: Path, repo: str) -> Path:
    snapshot = root / "hub" / ("models--" + repo.replace("/", "--")) / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(LLAMA3_CONFIG.read_text())
    return snapshot / "config.json"


def test_repo_ids_are_found_in_the_hugging_face_cache(tmp_path: Path) -> None:
    config = _hf_cache(tmp_path, "meta-llama/Meta-Llama-3-8B")
    assert find_hf_config("meta-llama/Meta-Llama-3-8B", {"HF_HOME": str(tmp_path)}) == config
    assert find_hf_config("meta-llama/Meta-Llama-3-8B", {"HOME": "/nonexistent"}) is None
    model, dtype = describe_model("meta-llama/Meta-Llama-3-8B", {"HF_HOME": str(tmp_path)})
    assert model is not None and model["layers"] == 32 and dtype == "bf16"


@pytest.mark.parametrize(
    ("argv", "engine"),
    [
        (["/opt/venv/bin/python3", "/opt/venv/bin/vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"], "vllm"),
        (["vllm", "serve", "/models/llama", "--port", "8001"], "vllm"),
        (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "x"], "vllm"),
        (["python3", "-m", "sglang.launch_server", "--model-path", "x", "--enable-metrics"], "sglang"),
        (["text-generation-launcher", "--model-id", "x"], "tgi"),
        (["python3", "train.py", "--serve"], None),
        (["vllm", "bench", "serve"], None),
    ],
)
def test_engine_of_command_lines(argv: list[str], engine: str | None) -> None:
    assert engine_of(tuple(argv)) == engine


class FakeProc:
    """A /proc tree with serving processes: cmdline, environ, fd sockets, net/tcp and the network namespace."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "self" / "ns").mkdir(parents=True)
        os.symlink("net:[4026531840]", root / "self" / "ns" / "net")

    def add(
        self,
        pid: int,
        argv: list[str],
        env: dict[str, str],
        listen: list[int],
        *,
        netns: str = "net:[4026531840]",
        readable: bool = True,
    ) -> None:
        proc = self.root / str(pid)
        (proc / "ns").mkdir(parents=True)
        (proc / "net").mkdir()
        (proc / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
        (proc / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in env.items()))
        os.symlink(netns, proc / "ns" / "net")
        rows = ["  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode"]
        if readable:
            (proc / "fd").mkdir()
            for index, port in enumerate(listen):
                inode = 90_000 + pid * 10 + index
                os.symlink(f"socket:[{inode}]", proc / "fd" / str(10 + index))
                local = f"00000000:{port:04X}"  # 0.0.0.0:port, state 0A = LISTEN
                rows.append(f"   {index}: {local} 00000000:0000 0A 00000000:00000000 00:00000000 00000000  0 0 {inode}")
        (proc / "net" / "tcp").write_text("\n".join(rows) + "\n")


def test_local_discovery_finds_engines_with_their_job_model_and_gpus(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path / "proc")
    hf_home = tmp_path / "hf"
    _hf_cache(hf_home, "meta-llama/Meta-Llama-3-8B")
    proc.add(
        4242,
        [
            "/usr/bin/python3",
            "/usr/local/bin/vllm",
            "serve",
            "meta-llama/Meta-Llama-3-8B",
            "-tp",
            "2",
            "--kv-cache-dtype",
            "fp8_e4m3",
        ],
        {"SLURM_JOB_ID": "81234", "HF_HOME": str(hf_home)},
        [8000],
    )
    proc.add(
        5151,
        ["python3", "-m", "sglang.launch_server", "--model-path", "x", "--port=30001", "--tp-size", "4"],
        {},
        [30001],
    )
    proc.add(6000, ["vllm", "serve", "/models/loading"], {}, [])  # still loading its weights: not listening yet
    proc.add(7000, ["vllm", "serve", "/models/podded"], {}, [8000], netns="net:[4026532999]")  # a pod's own netns
    proc.add(8000, ["text-generation-launcher", "--model-id", "bigscience/bloom-560m"], {}, [3000], readable=False)

    endpoints = {e.url: e for e in discover_endpoints(tmp_path / "proc", "gpu-node-7")}
    assert set(endpoints) == {
        "http://127.0.0.1:8000/metrics",
        "http://127.0.0.1:30001/metrics",
        "http://127.0.0.1:3000/metrics",
    }
    vllm = endpoints["http://127.0.0.1:8000/metrics"]
    assert vllm.job_id == "81234" and vllm.engine == "vllm" and vllm.origin == "process 4242"
    assert vllm.model is not None and vllm.model["kv_heads"] == 8 and vllm.weight_dtype == "bf16"
    assert vllm.kv_cache_dtype == "fp8"
    assert vllm.num_gpus is None  # a scheduler's job: the exporters attribute its GPUs
    sglang = endpoints["http://127.0.0.1:30001/metrics"]
    assert sglang.job_id == "gpu-node-7-sglang-30001" and sglang.num_gpus == 4 and sglang.model is None
    tgi = endpoints["http://127.0.0.1:3000/metrics"]  # sockets unreadable: the command line's port is trusted
    assert tgi.engine == "tgi" and tgi.job_id == "gpu-node-7-tgi-3000"


def test_processes_are_read_from_cmdline(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.add(10, ["bash"], {}, [])
    proc.add(11, ["vllm", "serve", "m", "--port=9000"], {}, [9000])
    (processes,) = find_serving_processes(tmp_path)
    assert processes.pid == 11 and processes.port == 9000 and processes.model == "m"
    assert json.dumps(processes.argv)
