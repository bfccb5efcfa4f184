"""``/metrics`` series of the software comparison (issue 59): its families and how they are rendered, together.

One series per called change (a ``regression`` or an ``improvement`` beyond the noise, from
:mod:`mfumon.api.regressions.analysis`), labelled by the signature, the component and its two versions: bounded by the
changes the fleet actually went through in ``REGRESSIONS_WINDOW_DAYS``. Changes that did nothing, or had too few jobs
to tell, are in ``GET /v1/regressions`` only. Rendered on every scrape (shard 0 only) from the maintenance thread's
last comparison; every replica computes the same from the database.
"""

from __future__ import annotations

from collections.abc import Iterable

from mfumon.api.metrics._text import declare, gauge, labels_text, sample_line
from mfumon.api.regressions.analysis import Change

REGRESSION_FAMILIES = declare(
    gauge(
        "regression_mfu_before_ratio",
        "Mean MFU of a signature's jobs on a component's old version, where the change to the new one moved MFU "
        "beyond the noise (verdict regression or improvement).",
    ),
    gauge("regression_mfu_after_ratio", "Mean MFU of the same signature's jobs on the new version."),
    gauge(
        "regression_mfu_change_ratio",
        "MFU after / MFU before for a called change: below 1 a regression, above 1 an improvement (the alert's value).",
    ),
    gauge("regression_confidence_ratio", "1 - the p-value of Welch's t-test of the two groups' mean MFU."),
    gauge("regression_jobs", "Jobs of the signature on the new version (the affected jobs)."),
    gauge("regression_gpu_seconds", "GPU-seconds of the affected jobs in the compared window."),
    gauge("regression_confounded", "1 when other components changed between the two groups too (see also_changed)."),
)


def render_regressions(changes: Iterable[Change]) -> str:
    """The called changes' series; every family's header even when there is none."""
    called = [c for c in changes if c.verdict in ("regression", "improvement")]
    rows = []
    for change in called:
        labels = labels_text(
            [
                ("signature", change.signature),
                ("component", change.component),
                ("from_version", change.before),
                ("to_version", change.after),
                ("verdict", change.verdict),
            ]
        )
        before, after = change.mfu_before, change.mfu_after
        ratio = after.mean / before.mean if before and after and before.mean else None
        values = {
            "mfumon_regression_mfu_before_ratio": before.mean if before else None,
            "mfumon_regression_mfu_after_ratio": after.mean if after else None,
            "mfumon_regression_mfu_change_ratio": ratio,
            "mfumon_regression_confidence_ratio": change.confidence,
            "mfumon_regression_jobs": float(len(change.affected_jobs)),
            "mfumon_regression_gpu_seconds": change.gpu_hours_after * 3600.0,
            "mfumon_regression_confounded": 1.0 if change.confounded else 0.0,
        }
        rows.append((labels, values))
    out = []
    for name, family in REGRESSION_FAMILIES.items():
        lines = [sample_line(name, labels, v[name]) for labels, v in rows if v[name] is not None]  # type: ignore[arg-type]
        out.append(family.header() + "".join(lines))
    return "".join(out)
