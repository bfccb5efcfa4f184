"""Every subcommand's options: help text on each, one spelling for shared ones, required ones marked (issue 30 #5).

Walks the parser of every ``mfumon`` subcommand, so a flag added later without help fails here.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import pytest

from mfumon.cli import SUBCOMMANDS

#: hidden, deprecated spellings kept so that nothing breaks (their help is suppressed on purpose)
DEPRECATED_ALIASES = {("exporter", "--log.level")}
#: subcommands that send requests to an aggregator, so need a token where it requires one
CLIENTS = ("exporter", "wrap", "scheduler", "remediate", "report")


def _parser(name: str) -> argparse.ArgumentParser:
    module = importlib.import_module(SUBCOMMANDS[name].module)
    for builder in ("build_parser", "_build_parser", "_parser"):
        if hasattr(module, builder):
            parser = getattr(module, builder)()
            assert isinstance(parser, argparse.ArgumentParser)
            return parser
    raise AssertionError(f"mfumon {name}: no parser builder in {module.__name__}")


def _options(name: str) -> list[argparse.Action]:
    return [a for a in _parser(name)._actions if not isinstance(a, argparse._HelpAction)]


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_option_has_help(name: str) -> None:
    missing = []
    for action in _options(name):
        label = action.option_strings[0] if action.option_strings else action.dest
        if action.help == argparse.SUPPRESS:
            assert (name, label) in DEPRECATED_ALIASES, f"mfumon {name} {label}: hidden but not a known alias"
        elif not (action.help or "").strip():
            missing.append(label)
    assert missing == [], f"mfumon {name}: options without help text: {missing}"


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_log_level_is_spelt_one_way(name: str) -> None:
    visible = {s for a in _options(name) if a.help != argparse.SUPPRESS for s in a.option_strings}
    assert {s for s in visible if "log" in s and "level" in s} <= {"--log-level"}


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_subcommand_takes_a_token_file(name: str) -> None:
    """Clients (and the demo, whose aggregator then requires it) read the token; serve reads its ingest tokens."""
    (action,) = [a for a in _options(name) if "--token-file" in a.option_strings]
    wanted = ("MFUMON_INGEST_TOKENS_FILE",) if name == "serve" else ("MFUMON_TOKEN_FILE", "MFUMON_TOKEN")
    assert all(variable in (action.help or "") for variable in wanted)


@pytest.mark.parametrize("name", CLIENTS)
def test_the_token_file_is_read_from_the_environment_too(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same rule everywhere: the flag, else MFUMON_TOKEN_FILE, else MFUMON_TOKEN (mfumon.exporter.auth)."""
    token_file = tmp_path / "token"
    token_file.write_text("from-env-file\n")
    monkeypatch.setenv("MFUMON_TOKEN_FILE", str(token_file))
    monkeypatch.setenv("MFUMON_TOKEN", "from-env")
    argv = {"scheduler": ["--source", "slurm"], "remediate": ["--source", "slurm"]}.get(name, [])
    args = _parser(name).parse_args(argv)
    if name == "exporter":
        from mfumon.exporter.node.settings import load_settings

        assert load_settings(args).token() == "from-env-file"
    else:
        from mfumon.exporter.auth import read_token

        assert args.token_file is None  # nothing given on the command line: the environment decides
        assert read_token(args.token_file) == "from-env-file"


def test_the_exporter_takes_log_level_and_the_old_spelling(monkeypatch: pytest.MonkeyPatch) -> None:
    from mfumon.exporter.node.settings import load_settings

    monkeypatch.delenv("MFUMON_LOG_LEVEL", raising=False)
    parser = _parser("exporter")
    assert load_settings(parser.parse_args(["--log-level", "DEBUG"])).LOG_LEVEL == "DEBUG"
    assert load_settings(parser.parse_args(["--log.level", "ERROR"])).LOG_LEVEL == "ERROR"


@pytest.mark.parametrize("name", ["scheduler", "remediate"])
def test_source_is_required_and_says_so(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MFUMON_SCHEDULER_SOURCE", raising=False)
    parser = _parser(name)
    (source,) = [a for a in parser._actions if "--source" in a.option_strings]
    assert source.required
    with pytest.raises(SystemExit) as exited:
        parser.parse_args([])
    assert exited.value.code == 2 and "--source" in capsys.readouterr().err
    monkeypatch.setenv("MFUMON_SCHEDULER_SOURCE", "kubernetes")
    assert _parser(name).parse_args([]).source == "kubernetes"  # the environment stands in for the flag


@pytest.mark.slow
def test_serve_takes_the_clients_token_file(tmp_path: Path) -> None:
    """The one-line file a client's --token-file reads is an ingest tokens file for mfumon serve --token-file."""
    import httpx

    from tests.conftest import start_server

    token_file = tmp_path / "token"
    token_file.write_text("s3cret-file\n")
    with start_server(tmp_path, args=["--token-file", str(token_file)]) as server:
        body = {"gpus_requested": 8}
        assert httpx.put(f"{server.url}/v1/jobs/t", json=body, timeout=10).status_code == 401
        headers = {"Authorization": "Bearer s3cret-file"}
        assert httpx.put(f"{server.url}/v1/jobs/t", json=body, headers=headers, timeout=10).status_code == 200
