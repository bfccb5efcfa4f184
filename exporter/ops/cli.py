"""``mfumon report --since 7d [--format markdown|html]``: the week an ops lead needs, from the aggregator's API.

Reads ``GET /v1/usage``, ``/v1/jobs`` (and ``/v1/nodes`` when prices are set) with a ``read`` token if the
aggregator requires one, and prints Markdown or a self-contained HTML page (``--output`` writes it to a file).
Several aggregators (``--url`` repeated, or ``--clusters FILE``) give one fleet report: a row per cluster and a fleet
row (:mod:`mfumon.exporter.ops.fleet`).

``mfumon report --chargeback --since 30d --format csv|json`` prints the aggregator's chargeback of the window
instead (``GET /v1/chargeback``: cost, GPU-hours and energy per team, idle and unreported GPUs, and job, priced by
the aggregator's price list; :mod:`mfumon.exporter.ops.chargeback`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from mfumon.exporter.auth import read_token
from mfumon.exporter.cliopts import add_log_level_option, add_token_file_option
from mfumon.exporter.ops import chargeback
from mfumon.exporter.ops.fleet import ClusterSource, fetch_fleet, load_clusters, source_from_url
from mfumon.exporter.ops.fleet_render import render_fleet_html, render_fleet_markdown
from mfumon.exporter.ops.html import render_html
from mfumon.exporter.ops.markdown import render_markdown
from mfumon.exporter.ops.prices import ENV as PRICES_ENV
from mfumon.exporter.ops.prices import Prices, parse_prices
from mfumon.exporter.ops.report import BELOW_BASELINE, TOP_WASTERS, ReportError, fetch_report
from mfumon.startup import aggregator_url_problem, fail

__all__ = ["build_parser", "main"]

REPORT_SINCE = "7d"  # the report's window when --since is not given (the chargeback's: 30d)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mfumon report",
        description="Where a window's GPU-hours went: per team and pool, top wasters, jobs below baseline, "
        "failures, and cost when GPU-hour prices are given.",
    )
    parser.add_argument(
        "--since",
        help="window start: a duration back from now (7d, 24h, 1w) or Unix seconds (default 7d; 30d with --chargeback)",
    )
    parser.add_argument(
        "--chargeback",
        action="store_true",
        help="print the aggregator's chargeback of the window instead (GET /v1/chargeback: cost, GPU-hours and "
        "energy per team, idle and unreported GPUs, and job, at the aggregator's prices); --format csv, json or "
        "markdown",
    )
    parser.add_argument(
        "--until",
        help="with --chargeback: window end, Unix seconds or a duration back from now (default now)",
    )
    parser.add_argument(
        "--format",
        choices=("markdown", "html", *(f for f in chargeback.FORMATS if f != "markdown")),
        default="markdown",
        help="default markdown; csv and json with --chargeback",
    )
    parser.add_argument("--output", "-o", type=Path, help="write to this file instead of stdout")
    parser.add_argument(
        "--url",
        action="append",
        default=[],
        help="the aggregator (default $MFUMON_URL or http://127.0.0.1:8000); repeat it, as URL or NAME=URL, for one "
        "report over several clusters",
    )
    parser.add_argument(
        "--clusters",
        type=Path,
        metavar="FILE",
        help="a fleet report over the clusters listed in FILE (YAML: clusters: [{name, url, token_file}]); "
        "a token_file is relative to FILE, and a cluster without one uses --token/--token-file",
    )
    parser.add_argument(
        "--token",
        help="a token with the 'read' scope, when the aggregator requires one (default: --token-file, "
        "$MFUMON_TOKEN_FILE, $MFUMON_TOKEN)",
    )
    add_token_file_option(parser, purpose="'read' scope")
    add_log_level_option(parser, "WARNING")
    parser.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="DEVICE=PRICE",
        help="price of a GPU-hour on a device (peak-table key, e.g. h100-sxm=2.49; default=... for "
        f"the rest); repeatable, comma-separated lists too; default ${PRICES_ENV}",
    )
    parser.add_argument("--currency", default=os.environ.get("MFUMON_CURRENCY", "USD"), help="default USD")
    parser.add_argument("--top", type=int, default=TOP_WASTERS, help=f"wasting jobs listed (default {TOP_WASTERS})")
    parser.add_argument(
        "--below-baseline",
        type=float,
        default=BELOW_BASELINE,
        metavar="RATIO",
        help=f"list jobs whose MFU is under this fraction of their baseline (default {BELOW_BASELINE})",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.chargeback:
        return _chargeback(parser, args)
    if args.format not in ("markdown", "html"):
        parser.error(f"--format {args.format} is for --chargeback; the report prints markdown or html")
    if args.until is not None:
        parser.error("--until is for --chargeback; the report runs from --since to now")
    if args.top < 1:
        parser.error("--top must be at least 1")
    if not 0 < args.below_baseline <= 1:
        parser.error("--below-baseline is a fraction of the baseline, in (0, 1]")
    try:
        price_items = args.price or [os.environ.get(PRICES_ENV, "")]
        prices = parse_prices(price_items, args.currency)
    except ValueError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    token = _token(parser, args)
    try:
        sources = [source_from_url(u) for u in args.url] + (load_clusters(args.clusters) if args.clusters else [])
    except ValueError as exc:
        parser.error(str(exc))
    for url in [source.url for source in sources] or [os.environ.get("MFUMON_URL", "")]:
        url_problem = aggregator_url_problem(url)
        if url_problem is not None:
            return fail("mfumon report", url_problem, code=2)
    if len(sources) > 1 or args.clusters:
        return _fleet(args, sources, token, prices)
    url = args.url[0] if args.url else os.environ.get("MFUMON_URL", "http://127.0.0.1:8000")
    try:
        with _client(url, token, args.timeout) as client:
            report = fetch_report(
                client,
                since=args.since or REPORT_SINCE,
                prices=prices,
                generated_at=time.time(),
                top=args.top,
                below=args.below_baseline,
            )
    except ReportError as exc:
        print(f"mfumon report: {exc}", file=sys.stderr)
        return 1
    _write(args.output, render_html(report) if args.format == "html" else render_markdown(report))
    return 0


def _token(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    try:
        return args.token or read_token(args.token_file)
    except OSError as exc:
        parser.error(f"cannot read the token file (--token-file or MFUMON_TOKEN_FILE): {exc}")


def _chargeback(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``--chargeback``: one aggregator's ``GET /v1/chargeback`` as CSV, JSON or Markdown; exit 2 for a window the
    aggregator would refuse (said here, in one line), 1 when it cannot be read."""
    if args.format not in chargeback.FORMATS:
        parser.error(f"--chargeback prints {', '.join(chargeback.FORMATS)}, not {args.format}")
    if args.price:
        parser.error("--price is for the report; the chargeback uses the aggregator's prices (PUT /v1/prices)")
    if args.clusters or len(args.url) > 1:
        parser.error("--chargeback reads one aggregator: give one --url")
    since = args.since or chargeback.DEFAULT_SINCE
    for flag, value in (("--since", since), ("--until", args.until)):
        problem = chargeback.time_problem(value, flag) if value is not None else None
        if problem is not None:
            return fail("mfumon report", problem, code=2)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    token = _token(parser, args)
    url = args.url[0] if args.url else os.environ.get("MFUMON_URL", "http://127.0.0.1:8000")
    url_problem = aggregator_url_problem(url)
    if url_problem is not None:
        return fail("mfumon report", url_problem, code=2)
    try:
        with _client(url, token, args.timeout) as client:
            data = chargeback.fetch_chargeback(client, since=since, until=args.until)
    except ReportError as exc:
        return fail("mfumon report", str(exc))
    if args.format == "csv":
        text = chargeback.render_csv(data)
    elif args.format == "json":
        text = chargeback.render_json(data)
    else:
        text = chargeback.render_markdown(data, url)
    _write(args.output, text)
    return 0


def _client(url: str, token: str | None, timeout: float) -> httpx.Client:
    headers = {"User-Agent": "mfumon-report"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout)


def _write(output: Path | None, text: str) -> None:
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")


def _fleet(args: argparse.Namespace, sources: list[ClusterSource], token: str | None, prices: Prices) -> int:
    """One report over several clusters; exit 1 when none answers, 0 otherwise (those that did not are named)."""
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        print(f"mfumon report: two clusters share a name in {names}: name them (NAME=URL)", file=sys.stderr)
        return 2
    fleet = fetch_fleet(
        sources,
        lambda s: _client(s.url, s.token or token, args.timeout),
        since=args.since or REPORT_SINCE,
        prices=prices,
        generated_at=time.time(),
        top=args.top,
        below=args.below_baseline,
    )
    for miss in fleet.unanswered:
        print(f"mfumon report: cluster {miss.name} did not answer: {miss.error}", file=sys.stderr)
    if not fleet.clusters:
        return 1
    _write(args.output, render_fleet_html(fleet) if args.format == "html" else render_fleet_markdown(fleet))
    return 0
