"""Serving endpoints the agent reads: what ``--inference.url`` says, and how a served model is described.

One ``--inference.url`` (repeatable; ``MFUMON_INFERENCE_URLS`` holds several, separated by newlines, or by spaces
before the next ``http(s)://``) is the metrics URL followed by comma-separated ``key=value`` options, whose values may
hold spaces (``gpu_model=NVIDIA H100 80GB HBM3``)::

    --inference.url 'http://127.0.0.1:8000/metrics,job_id=chat-70b,model=/models/Llama-3.1-70B-Instruct'
    --inference.url 'http://10.0.0.7:30000/metrics,job_id=summarize,model=Qwen/Qwen2.5-32B-Instruct,num_gpus=4'

Options: ``job_id`` (default: the GPU attribution's job, else ``<node>-<engine>-<port>``), ``engine`` (``vllm``,
``sglang``, ``tgi``; default: told by the metric names), ``model`` (a ``config.json``, its folder, or a Hugging Face
repo id looked up in the local Hugging Face cache), the shape directly (``params``, ``active_params``, ``layers``,
``heads``, ``kv_heads``, ``head_dim``, ``seq_len``), ``weight_dtype`` and ``kv_cache_dtype`` (``bf16``, ``fp8``,
``int4``...; default: the model config's quantisation, and the engine's KV-cache dtype), ``num_gpus``,
``gpu_model``, ``dtype`` (the matmul precision for MFU), ``name``, ``team``, ``pool``.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mfumon.exporter.errors import ConfigError
from mfumon.exporter.modelspec import from_hf_config, serving_dtype_from_hf_config
from mfumon.exporter.samples import sanitize_id

__all__ = ["InferenceEndpoint", "describe_model", "find_hf_config", "parse_endpoint", "split_endpoint_list"]

logger = logging.getLogger(__name__)

STORAGE_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")
COMPUTE_DTYPES = ("bf16", "fp16", "fp8", "tf32", "fp32")
_SHAPE_KEYS = ("params", "active_params", "layers", "heads", "kv_heads", "head_dim", "seq_len")
_TEXT_KEYS = (
    "job_id",
    "engine",
    "model",
    "weight_dtype",
    "kv_cache_dtype",
    "gpu_model",
    "dtype",
    "name",
    "team",
    "pool",
)
_OPTIONS = frozenset({*_SHAPE_KEYS, *_TEXT_KEYS, "num_gpus"})
_NEXT_SPEC = re.compile(r"\s+(?=https?://)", re.IGNORECASE)  # whitespace that starts another endpoint spec


@dataclass(frozen=True)
class InferenceEndpoint:
    """One serving engine's metrics URL and what the agent knows of the job behind it.

    ``model`` is the job report's ``model`` object (None: the aggregator keeps what the job registered);
    ``origin`` says where the endpoint came from (``config``, ``process <pid>``) for logs.
    """

    url: str
    job_id: str | None = None
    engine: str | None = None
    model: Mapping[str, Any] | None = None
    weight_dtype: str | None = None
    kv_cache_dtype: str | None = None
    num_gpus: int | None = None
    gpu_model: str | None = None
    dtype: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)  # name, team, pool
    origin: str = "config"

    @property
    def port(self) -> int | None:
        return urlsplit(self.url).port

    def report_metadata(self) -> dict[str, Any]:
        """The job-metadata fields of every report sent for this endpoint."""
        fields: dict[str, Any] = {
            "kind": "inference",
            "model": dict(self.model) if self.model else None,
            "weight_dtype": self.weight_dtype,
            "kv_cache_dtype": self.kv_cache_dtype,
            "num_gpus": self.num_gpus,
            "gpu_model": self.gpu_model,
            "dtype": self.dtype,
            **self.labels,
        }
        return {key: value for key, value in fields.items() if value is not None}

    def with_defaults(self, **defaults: Any) -> InferenceEndpoint:
        """A copy where each given default fills a field that is still unset."""
        return replace(self, **{k: v for k, v in defaults.items() if v is not None and getattr(self, k) is None})


def split_endpoint_list(text: str) -> list[str]:
    """``MFUMON_INFERENCE_URLS``: endpoint specs, one per line or separated by whitespace before ``http(s)://``.

    Only whitespace before a URL separates specs, so an option's value keeps its spaces (``gpu_model=NVIDIA H100
    80GB HBM3``): splitting at every space made ``H100`` a spec of its own.
    """
    specs = (part.strip() for line in text.splitlines() for part in _NEXT_SPEC.split(line))
    return [spec for spec in specs if spec]


def parse_endpoint(spec: str, env: Mapping[str, str] | None = None) -> InferenceEndpoint:
    """Parse one ``--inference.url`` value; ``ConfigError`` names what is wrong."""
    url, *options = [part.strip() for part in spec.split(",")]
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--inference.url {spec!r}: must start with an http(s) metrics URL")
    values: dict[str, str] = {}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or key not in _OPTIONS or not value:
            allowed = ", ".join(sorted(_OPTIONS))
            raise ConfigError(f"--inference.url {spec!r}: {option!r} is not key=value with a key among {allowed}")
        values[key] = value
    try:
        return _endpoint(url, values, env)
    except ValueError as exc:
        raise ConfigError(f"--inference.url {spec!r}: {exc}") from exc


def _endpoint(url: str, values: dict[str, str], env: Mapping[str, str] | None) -> InferenceEndpoint:
    engine = values.get("engine")
    if engine is not None and engine not in ("vllm", "sglang", "tgi"):
        raise ValueError(f"engine must be vllm, sglang or tgi, got {engine!r}")
    for key, allowed in (
        ("weight_dtype", STORAGE_DTYPES),
        ("kv_cache_dtype", STORAGE_DTYPES),
        ("dtype", COMPUTE_DTYPES),
    ):
        if key in values and values[key] not in allowed:
            raise ValueError(f"{key} must be one of {', '.join(allowed)}, got {values[key]!r}")
    job_id = values.get("job_id")
    if job_id is not None and sanitize_id(job_id) != job_id:
        raise ValueError(f"job_id {job_id!r} has characters a job id cannot have")
    model, weight_dtype = (None, None)
    if "model" in values:
        model, weight_dtype = describe_model(values["model"], env)
        if model is None:
            raise ValueError(f"model {values['model']!r}: no config.json there, nor in the Hugging Face cache")
    shape = {key: _number(key, values[key]) for key in _SHAPE_KEYS if key in values}
    if shape:
        model = {**(model or {}), **shape}
        if "params" not in model:
            raise ValueError("a model shape needs params")
    return InferenceEndpoint(
        url=url,
        job_id=job_id,
        engine=engine,
        model=model,
        weight_dtype=values.get("weight_dtype", weight_dtype),
        kv_cache_dtype=values.get("kv_cache_dtype"),
        num_gpus=int(_number("num_gpus", values["num_gpus"])) if "num_gpus" in values else None,
        gpu_model=values.get("gpu_model"),
        dtype=values.get("dtype"),
        labels={key: values[key] for key in ("name", "team", "pool") if key in values},
    )


def _number(key: str, text: str) -> float | int:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{key} must be a number, got {text!r}") from None
    if not value > 0:
        raise ValueError(f"{key} must be > 0, got {text!r}")
    return int(value) if key != "params" and key != "active_params" else value


def describe_model(model: str, env: Mapping[str, str] | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """(report ``model`` object, weight dtype) of a served model: a config path or folder, or a HF repo id."""
    path = Path(model)
    config = path if path.is_file() else path / "config.json" if path.is_dir() else find_hf_config(model, env)
    if config is None or not config.is_file():
        return None, None
    try:
        spec = from_hf_config(config, name=model[-128:])
        return spec.to_dict(), serving_dtype_from_hf_config(config)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logger.warning("cannot describe model %s from %s: %s", model, config, exc)
        return None, None


def find_hf_config(repo_id: str, env: Mapping[str, str] | None = None) -> Path | None:
    """``config.json`` of a repo id in the local Hugging Face cache (``HF_HUB_CACHE``, ``HF_HOME``, ``~/.cache``).

    ``env`` is the serving process's environment when known (its cache, not the agent's); the newest snapshot wins.
    """
    if repo_id.count("/") != 1 or repo_id.startswith(("/", ".")):
        return None
    env = env if env is not None else os.environ
    roots = [env.get("HF_HUB_CACHE"), env.get("HUGGINGFACE_HUB_CACHE")]
    if env.get("HF_HOME"):
        roots.append(str(Path(env["HF_HOME"]) / "hub"))
    if env.get("HOME"):
        roots.append(str(Path(env["HOME"]) / ".cache" / "huggingface" / "hub"))
    folder = "models--" + repo_id.replace("/", "--")
    for root in filter(None, roots):
        snapshots = sorted((Path(root) / folder / "snapshots").glob("*/config.json"), key=_mtime, reverse=True)
        if snapshots:
            return snapshots[0]
    return None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
