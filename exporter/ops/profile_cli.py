"""``mfumon profile JOB_ID --steps N``: ask a running job for a profile and print what it shows.

Posts ``POST /v1/jobs/{id}/profile`` (a token with the ``profile`` scope when the aggregator requires tokens), then,
unless ``--no-wait``, polls ``GET /v1/jobs/{id}/profiles`` until a rank's summary arrives and prints the figures:
communication and exposed communication by parallelism, idle time, tensor-core share, and where each rank's trace is
kept, and the job's page (``/ui/jobs/{id}``). The job learns of the request in the answer to its next report, so
expect one report interval before it starts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import httpx

from mfumon.exporter.auth import add_token_file_option, read_token
from mfumon.exporter.links import job_page_url
from mfumon.startup import aggregator_url_problem, fail

__all__ = ["build_parser", "format_profile", "main"]

MAX_STEPS = 20


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mfumon profile",
        description="Ask a running job for a torch.profiler profile of its next steps and print the summary.",
    )
    parser.add_argument("job_id", help="the job to profile")
    parser.add_argument("--steps", type=int, default=5, help=f"steps to profile, 1 to {MAX_STEPS} (default 5)")
    parser.add_argument(
        "--ranks",
        default="sample",
        help="'all', 'sample' (rank 0, the last and a few between; default) or a comma-separated list of ranks",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="how long to wait for the summary (default 300)",
    )
    parser.add_argument("--no-wait", action="store_true", help="ask and return at once")
    parser.add_argument(
        "--url",
        default=os.environ.get("MFUMON_URL", "http://127.0.0.1:8000"),
        help="the aggregator (default $MFUMON_URL or http://127.0.0.1:8000)",
    )
    parser.add_argument("--token", help="a token with the 'profile' scope (default: --token-file, $MFUMON_TOKEN)")
    add_token_file_option(parser, purpose="'profile' scope")
    return parser


def _ranks(value: str) -> str | list[int]:
    if value in ("all", "sample"):
        return value
    try:
        ranks = [int(part) for part in value.split(",") if part.strip()]
    except ValueError as exc:
        raise ValueError(f"--ranks: 'all', 'sample' or ranks like 0,7,15, not {value!r}") from exc
    if not ranks or min(ranks) < 0:
        raise ValueError("--ranks: give at least one rank, none negative")
    return ranks


def format_profile(profile: dict[str, Any]) -> str:
    """The profile's figures as a few lines of text."""
    lines = [
        f"profile {profile['id']} of job {profile['job_id']}: {profile['status']}, "
        f"ranks {', '.join(str(r) for r in profile['ranks_reported']) or 'none yet'}"
    ]
    if profile.get("exposed_comm_ratio") is None:
        return "\n".join(lines)
    lines.append(
        f"communication {profile['comm_ratio']:.1%} of device time, exposed {profile['exposed_comm_ratio']:.1%}; "
        f"idle {profile['idle_ratio']:.1%}"
        + (
            f"; tensor-core kernels {profile['tensor_core_ratio']:.1%} of compute"
            if profile.get("tensor_core_ratio") is not None
            else ""
        )
    )
    lines.append(f"{'group':<8}{'comm':>9}{'exposed':>10}")
    for group in profile["groups"]:
        if group["comm_ratio"] > 0:
            lines.append(f"{group['group']:<8}{group['comm_ratio']:>9.1%}{group['exposed_comm_ratio']:>10.1%}")
    for summary in profile["summaries"]:
        if summary.get("trace_path"):
            lines.append(f"rank {summary['rank']} trace: {summary['trace_path']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 1 <= args.steps <= MAX_STEPS:
        parser.error(f"--steps must be 1 to {MAX_STEPS}")
    try:
        ranks = _ranks(args.ranks)
        token = args.token or read_token(args.token_file)
    except (ValueError, OSError) as exc:
        parser.error(str(exc))
    url_problem = aggregator_url_problem(args.url)
    if url_problem is not None:
        return fail("mfumon profile", url_problem, code=2)
    headers = {"User-Agent": "mfumon-profile", **({"Authorization": f"Bearer {token}"} if token else {})}
    path = f"/v1/jobs/{args.job_id}"
    try:
        with httpx.Client(base_url=args.url.rstrip("/"), headers=headers, timeout=30.0) as client:
            asked = client.post(f"{path}/profile", json={"steps": args.steps, "ranks": ranks})
            if asked.status_code != 202:
                print(f"mfumon profile: HTTP {asked.status_code}: {_detail(asked)}", file=sys.stderr)
                return 1
            profile = asked.json()
            print(f"profile {profile['id']} asked of job {args.job_id}: it starts after the job's next report")
            print(f"job page: {job_page_url(args.url, args.job_id)}")
            if args.no_wait:
                return 0
            deadline = time.monotonic() + args.wait
            while time.monotonic() < deadline:
                listed = client.get(f"{path}/profiles", params={"limit": 10}).json()["data"]
                profile = next((p for p in listed if p["id"] == profile["id"]), profile)
                if profile["status"] in ("done", "expired"):
                    break
                time.sleep(2.0)
    except httpx.HTTPError as exc:
        print(f"mfumon profile: {args.url}: {exc}", file=sys.stderr)
        return 1
    print(format_profile(profile))
    return 0 if profile["status"] == "done" else 1


def _detail(response: httpx.Response) -> str:
    try:
        return str(response.json().get("detail"))
    except ValueError:
        return response.text[:200]
