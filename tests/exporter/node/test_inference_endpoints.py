"""``--inference.url`` values: option values keep their spaces (issue 30 #6), on the command line and in the env."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from mfumon.exporter.node.inference.endpoints import parse_endpoint, split_endpoint_list
from mfumon.exporter.node.settings import build_parser, load_settings

ROOT = Path(__file__).parents[3]
#: the README and the docs site (the README's exporter examples moved to docs/operators/inference.md)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _readme_exporter_lines() -> list[str]:
    """The docs' ``mfumon exporter --inference.url ...`` example lines, as written."""
    lines = [line for page in PAGES for line in page.read_text(encoding="utf-8").splitlines()]
    return [line.strip() for line in lines if re.match(r"\s*mfumon exporter .*--inference\.url ", line)]


def _endpoints_of(line: str) -> list[object]:
    """What ``mfumon exporter`` makes of the line: its parser, its settings, its endpoint parsing."""
    argv = shlex.split(line)
    assert argv[:2] == ["mfumon", "exporter"]
    settings = load_settings(build_parser().parse_args(argv[2:]))
    return [parse_endpoint(spec) for spec in split_endpoint_list(settings.INFERENCE_URLS)]


def test_the_readme_has_an_example_with_a_multi_word_value() -> None:
    assert any("gpu_model=NVIDIA H100 80GB HBM3" in line for line in _readme_exporter_lines())


@pytest.mark.parametrize("line", [line for line in _readme_exporter_lines() if ",model=" not in line])
def test_every_readme_example_line_parses_as_written(line: str) -> None:
    """Lines that name a model file need that file; the others parse here exactly as the exporter parses them."""
    endpoints = _endpoints_of(line)
    assert len(endpoints) == line.count("--inference.url")
    if "gpu_model=NVIDIA H100 80GB HBM3" in line:
        assert [getattr(e, "gpu_model", None) for e in endpoints] == ["NVIDIA H100 80GB HBM3"]


def test_repeated_flags_keep_each_value_whole() -> None:
    argv = ["--inference.url", "http://a:1/metrics,gpu_model=NVIDIA A100-SXM4-80GB,team=ml infra"]
    argv += ["--inference.url", "http://b:2/metrics,name=chat bot"]
    settings = load_settings(build_parser().parse_args(argv))
    endpoints = [parse_endpoint(spec) for spec in split_endpoint_list(settings.INFERENCE_URLS)]
    assert [e.url for e in endpoints] == ["http://a:1/metrics", "http://b:2/metrics"]
    assert endpoints[0].gpu_model == "NVIDIA A100-SXM4-80GB"
    assert endpoints[0].labels == {"team": "ml infra"} and endpoints[1].labels == {"name": "chat bot"}


@pytest.mark.parametrize(
    ("text", "specs"),
    [
        ("http://a/m http://b/m", ["http://a/m", "http://b/m"]),
        (
            "http://a/m,gpu_model=NVIDIA H100 80GB HBM3  https://b/m",
            ["http://a/m,gpu_model=NVIDIA H100 80GB HBM3", "https://b/m"],
        ),
        ("http://a/m,name=x y\nhttp://b/m,name=z", ["http://a/m,name=x y", "http://b/m,name=z"]),
        ("  \n", []),
    ],
)
def test_the_env_list_splits_only_before_a_url(text: str, specs: list[str]) -> None:
    assert split_endpoint_list(text) == specs


def test_a_word_that_is_no_option_is_still_refused() -> None:
    with pytest.raises(Exception, match="is not key=value"):
        parse_endpoint("http://a/m,job_id=x,H100")
