"""Which job a Kubernetes pod belongs to: one rule for the node agent and the scheduler adapter.

The job of a pod is, first match wins:
1. the value of the ``mfumon.io/job-id`` label, verbatim (the same id ``MFUMON_JOB_ID`` would give);
2. ``<namespace>:<name>`` where name is the value of the first job label present: ``jobset.sigs.k8s.io/jobset-name``
   (JobSet), ``training.kubeflow.org/job-name`` (PyTorchJob and the other Kubeflow training jobs),
   ``ray.io/cluster`` (RayCluster, RayJob), ``leaderworkerset.sigs.k8s.io/name`` (LeaderWorkerSet),
   ``batch.kubernetes.io/job-name`` and ``job-name`` (batch Job, which the JobSet and CronJob controllers create);
3. ``<namespace>:<controller owner name>`` (a ReplicaSet's ``-<pod-template-hash>`` suffix removed, so a Deployment's
   pods are one job);
4. ``<namespace>:<pod name>``.

The label list is configurable (``--kube.job-label``), for operators that label pods their own way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mfumon.exporter.samples import sanitize_id

__all__ = ["EXPLICIT_LABEL", "JOB_LABELS", "pod_job_id"]

EXPLICIT_LABEL = "mfumon.io/job-id"
JOB_LABELS: tuple[str, ...] = (
    "jobset.sigs.k8s.io/jobset-name",
    "training.kubeflow.org/job-name",
    "ray.io/cluster",
    "leaderworkerset.sigs.k8s.io/name",
    "batch.kubernetes.io/job-name",
    "job-name",
)


def pod_job_id(
    namespace: str,
    name: str,
    labels: Mapping[str, str] | None = None,
    owners: Sequence[Mapping[str, Any]] | None = None,
    job_labels: Sequence[str] = JOB_LABELS,
) -> str | None:
    """The job id of a pod from its namespace, name, labels and ``metadata.ownerReferences``."""
    labels = labels or {}
    explicit = sanitize_id(labels.get(EXPLICIT_LABEL))
    if explicit:
        return explicit
    job = next((labels[key] for key in job_labels if labels.get(key)), None)
    if job is None:
        controller = next((o for o in owners or () if o.get("controller")), None)
        if controller is not None and controller.get("name"):
            job = str(controller["name"])
            template_hash = labels.get("pod-template-hash")
            if controller.get("kind") == "ReplicaSet" and template_hash and job.endswith(f"-{template_hash}"):
                job = job[: -len(template_hash) - 1]
    return sanitize_id(f"{namespace}:{job or name}")
