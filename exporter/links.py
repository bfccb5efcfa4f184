"""The addresses of the aggregator's pages, built in one place for every command that names them.

The job reporter (and so ``mfumon wrap`` and the framework callbacks) says at start where its job's page is;
``mfumon profile`` and ``mfumon report`` link the pages they summarise. The routes are :mod:`mfumon.api.routes.ui`'s
(``/ui`` the cluster, ``/ui/jobs/{job_id}`` a job); the base is the aggregator URL the command was given, path
prefix (a reverse proxy's) included.
"""

from __future__ import annotations

from urllib.parse import quote

__all__ = ["cluster_page_url", "job_page_url"]


def cluster_page_url(base_url: str) -> str:
    """The cluster page: ``<base>/ui``."""
    return f"{base_url.rstrip('/')}/ui"


def job_page_url(base_url: str, job_id: str) -> str:
    """A job's page: ``<base>/ui/jobs/<job_id>`` (the id percent-encoded where a path segment needs it)."""
    return f"{cluster_page_url(base_url)}/jobs/{quote(job_id, safe=':@+')}"
