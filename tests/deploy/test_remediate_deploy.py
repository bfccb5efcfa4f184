"""Deployment files of ``mfumon remediate`` (issue 31): the Kubernetes Deployment with RBAC limited to get, list and
patch nodes, and the systemd unit for Slurm; both ship in dry run, with a ``remediate`` token and a kill switch.

The Kubernetes objects are also validated against the Kubernetes schema with every other object of the
kustomization (``test_manifests.py``); here, what the loop needs and nothing more.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml

from mfumon.exporter.scheduler.remediate.cli import _build_parser
from tests.deploy._support import DEPLOY, KUBERNETES_DIR

MANIFEST = KUBERNETES_DIR / "remediate-deployment.yaml"
UNIT = DEPLOY / "systemd" / "mfumon-remediate.service"


def _objects() -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if doc}


def test_the_kustomization_deploys_it() -> None:
    kustomization = yaml.safe_load((KUBERNETES_DIR / "kustomization.yaml").read_text())
    assert MANIFEST.name in kustomization["resources"]


def test_rbac_allows_get_list_and_patch_of_nodes_only() -> None:
    objects = _objects()
    assert set(objects) == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"}
    assert objects["ClusterRole"]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}
    ]
    binding = objects["ClusterRoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "mfumon-remediate",
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "mfumon-remediate", "namespace": "mfumon"}]
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == objects["ServiceAccount"]["metadata"]["name"] == "mfumon-remediate"


def test_the_deployment_runs_one_dry_run_loop_with_its_own_token_and_a_kill_switch() -> None:
    deployment = _objects()["Deployment"]
    assert deployment["spec"]["replicas"] == 1
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[:3] == ["remediate", "--source", "kubernetes"] and "--act" not in args  # dry run as shipped
    _build_parser().parse_args(args[1:])  # every argument is one mfumon remediate takes
    env = {e["name"]: e["value"] for e in container["env"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["token"]["secret"]["secretName"] == "mfumon-remediate-token"  # scope remediate, not ingest
    assert Path(env["MFUMON_TOKEN_FILE"]).parent == Path(mounts["token"])
    stop = volumes["stop"]["configMap"]
    assert stop == {"name": "mfumon-remediate-stop", "optional": True}  # absent: the loop runs
    assert Path(env["MFUMON_REMEDIATE_STOP_FILE"]) == Path(mounts["stop"]) / "remediate.stop"
    assert container["securityContext"]["runAsNonRoot"] and not container["securityContext"]["allowPrivilegeEscalation"]


def _unit() -> dict[str, list[str]]:
    """Key -> values (a key may repeat) of the unit file, sections merged."""
    out: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def test_the_systemd_unit_runs_a_dry_run_slurm_loop_with_a_remediate_token() -> None:
    unit = _unit()
    (exec_start,) = unit["ExecStart"]
    words = shlex.split(exec_start)
    assert words[0].endswith("/mfumon") and words[1:4] == ["remediate", "--source", "slurm"]
    assert "--act" not in words  # dry run as shipped; --act goes in MFUMON_REMEDIATE_ARGS
    _build_parser().parse_args([w for w in words[2:] if not w.startswith("$")])
    assert unit["LoadCredential"] == ["token:/etc/mfumon/remediate-token"]
    assert "MFUMON_TOKEN_FILE=%d/token" in unit["Environment"]
    assert "MFUMON_REMEDIATE_STOP_FILE=/etc/mfumon/remediate.stop" in unit["Environment"]
    assert unit["User"] == ["slurm"]  # scontrol update State=DRAIN needs SlurmUser (or an operator)
    assert unit["After"] == ["network-online.target munge.service"]
