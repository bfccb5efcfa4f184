"""Kubernetes manifests, docker-compose file and Dockerfile: as far as they can be checked without a cluster.

Core kinds are validated against the Kubernetes OpenAPI schemas bundled in kubernetes-validate (offline); the
Prometheus Operator's kinds (ServiceMonitor, PodMonitor, PrometheusRule) have no bundled schema, so their
selectors and ports are checked against the objects they point at instead.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy._support import (
    AGGREGATOR_JOB,
    DEPLOY,
    KUBERNETES_DIR,
    PROMETHEUS_DIR,
    REPO,
    compose_mounts,
    load_rule_groups,
)

KUSTOMIZATION = KUBERNETES_DIR / "kustomization.yaml"
OPERATOR_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
K8S_VERSION = "1.30"


def _kustomization() -> dict[str, Any]:
    return yaml.safe_load(KUSTOMIZATION.read_text())


def _objects() -> dict[tuple[str, str], dict[str, Any]]:
    """(kind, name) -> object, for every document of every resource the kustomization lists."""
    objects = {}
    for resource in _kustomization()["resources"]:
        path = KUBERNETES_DIR / resource
        if not path.is_file():  # reported by test_kustomization_resources_exist_and_parse
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                objects[(doc["kind"], doc["metadata"]["name"])] = doc
    return objects


def _by_kind(kind: str) -> list[dict[str, Any]]:
    return [obj for (k, _), obj in _objects().items() if k == kind]


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _aggregator() -> dict[str, Any]:
    return _objects()[("Deployment", "mfumon-aggregator")]


def _aggregator_container() -> dict[str, Any]:
    (container,) = _aggregator()["spec"]["template"]["spec"]["containers"]
    return container


def test_kustomization_resources_exist_and_parse() -> None:
    kustomization = _kustomization()
    assert kustomization["namespace"] == "mfumon"
    resources = kustomization["resources"]
    assert "exporter-daemonset.yaml" in resources
    for resource in resources:
        assert (KUBERNETES_DIR / resource).is_file(), f"kustomization lists missing {resource}"
    kinds = {kind for kind, _ in _objects()}
    assert {"Deployment", "Service", "DaemonSet", "ServiceMonitor", "PrometheusRule"} <= kinds
    image_names = {image["name"] for image in kustomization["images"]}
    assert _aggregator_container()["image"] in image_names


def test_core_objects_match_the_kubernetes_schema() -> None:
    try:
        import kubernetes_validate
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("kubernetes-validate is part of the dev extra: CI must install it", pytrace=False)
        pytest.skip("kubernetes-validate not installed (pip install -e '.[dev]')")
    checked = 0
    for (kind, name), obj in _objects().items():
        if kind in OPERATOR_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{kind}/{name}: {exc.message}")
        checked += 1
    assert checked >= 5


def test_aggregator_runs_two_replicas_with_secrets_for_database_and_tokens() -> None:
    deployment = _aggregator()
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    container = _aggregator_container()
    assert container["args"][:3] == ["serve", "--host", "0.0.0.0"]
    env = container["env"]
    names = [e["name"] for e in env]
    url = next(e["value"] for e in env if e["name"] == "MFUMON_DATABASE_URL")
    assert url.startswith("postgresql+psycopg://")
    for ref in re.findall(r"\$\((\w+)\)", url):  # Kubernetes expands only variables defined earlier
        assert ref in names[: names.index("MFUMON_DATABASE_URL")], ref
    from_secret = {e["name"]: e["valueFrom"]["secretKeyRef"]["name"] for e in env if "valueFrom" in e}
    assert {from_secret[v] for v in ("POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_HOST")} == {"mfumon-postgres"}
    tokens_file = Path(next(e["value"] for e in env if e["name"] == "MFUMON_INGEST_TOKENS_FILE"))
    mount = next(m for m in container["volumeMounts"] if tokens_file.parent == Path(m["mountPath"]))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == "mfumon-ingest-tokens"
    assert "MFUMON_INGEST_TOKENS" not in names, "tokens come from the Secret file, not plain env"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"  # 503 while not following other replicas


def test_service_and_servicemonitor_reach_the_aggregator_pods() -> None:
    pod_labels = _aggregator()["spec"]["template"]["metadata"]["labels"]
    container_ports = {p["name"] for p in _aggregator_container()["ports"]}
    service = _objects()[("Service", AGGREGATOR_JOB)]  # the job label Prometheus Operator gives is this name
    assert _selects(service["spec"]["selector"], pod_labels)
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] in container_ports
    (monitor,) = _by_kind("ServiceMonitor")
    assert _selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    assert "jobLabel" not in monitor["spec"]
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [port["name"]]
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    pdb = _objects()[("PodDisruptionBudget", "mfumon-aggregator")]
    assert _selects(pdb["spec"]["selector"]["matchLabels"], pod_labels)


def test_podmonitor_reaches_the_exporter_daemonset() -> None:
    daemonsets = _by_kind("DaemonSet")
    assert daemonsets, "exporter-daemonset.yaml is missing"
    (daemonset,) = daemonsets
    template = daemonset["spec"]["template"]
    ports = {p.get("name"): p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
    (monitor,) = _by_kind("PodMonitor")
    assert _selects(monitor["spec"]["selector"]["matchLabels"], template["metadata"]["labels"])
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] in ports, "the PodMonitor scrapes a container port the DaemonSet does not name"


def test_prometheusrule_is_generated_from_the_rules_files() -> None:
    (rule,) = _by_kind("PrometheusRule")
    assert rule["spec"]["groups"] == load_rule_groups()
    script = KUBERNETES_DIR / "generate_prometheusrule.py"
    result = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def _compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


def test_compose_services_reference_existing_files() -> None:
    compose = _compose()
    services = compose["services"]
    assert set(services) == {"aggregator", "postgres", "prometheus", "grafana"}
    build = services["aggregator"]["build"]
    assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == (DEPLOY / "Dockerfile").resolve()
    named_volumes = set(compose["volumes"])
    for name, service in services.items():
        for host in compose_mounts(service).values():
            if host.startswith("."):
                assert (DEPLOY / host).exists(), (name, host)
            else:
                assert host in named_volumes, (name, host)
    prometheus_mounts = compose_mounts(services["prometheus"])
    assert (DEPLOY / prometheus_mounts["/etc/prometheus"]).resolve() == PROMETHEUS_DIR
    assert "--config.file=/etc/prometheus/prometheus.yml" in services["prometheus"]["command"]
    assert services["aggregator"]["environment"]["MFUMON_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert "@postgres:5432/" in services["aggregator"]["environment"]["MFUMON_DATABASE_URL"]


def test_compose_secrets_come_from_the_environment() -> None:
    """No credential is written in the compose file; every variable it needs is documented in env.example."""
    text = (DEPLOY / "docker-compose.yml").read_text()
    used = set(re.findall(r"\$\{(\w+)", text))
    assert {"MFUMON_POSTGRES_PASSWORD", "MFUMON_INGEST_TOKENS", "GRAFANA_ADMIN_PASSWORD"} <= used
    documented = set(re.findall(r"^(\w+)=", (DEPLOY / "env.example").read_text(), re.MULTILINE))
    assert used <= documented
    services = _compose()["services"]
    secrets = {
        "POSTGRES_PASSWORD": services["postgres"]["environment"],
        "MFUMON_INGEST_TOKENS": services["aggregator"]["environment"],
        "GF_SECURITY_ADMIN_PASSWORD": services["grafana"]["environment"],
    }
    for key, env in secrets.items():
        assert env[key].startswith("${") and ":?" in env[key], key


def _dockerfile_instructions() -> list[tuple[str, str]]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def test_dockerfile_builds_a_non_root_aggregator_from_existing_paths() -> None:
    instructions = _dockerfile_instructions()
    bases = [args.split()[0] for op, args in instructions if op == "FROM"]
    assert bases and all(base == "python:3.11-slim" for base in bases)
    copies = [shlex.split(args) for op, args in instructions if op == "COPY"]
    sources = [src for parts in copies if not parts[0].startswith("--from") for src in parts[:-1]]
    assert sources
    for source in sources:
        assert (REPO / source).exists(), f"Dockerfile copies missing {source}"
    allowed = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    for source in sources:
        assert f"!{source}" in allowed or f"!{source.rstrip('/')}/" in allowed, f"{source} is not in the context"
    runs = " ".join(args for op, args in instructions if op == "RUN")
    assert re.search(r"pip (?:wheel|install)[^&]*\.\[server,postgres", runs)
    user = [args for op, args in instructions if op == "USER"][-1]
    assert user.split(":")[0] not in {"0", "root"}
    entrypoint = [yaml.safe_load(args) for op, args in instructions if op == "ENTRYPOINT"][-1]
    command = [yaml.safe_load(args) for op, args in instructions if op == "CMD"][-1]
    assert entrypoint == ["mfumon"]
    assert command[:3] == ["serve", "--host", "0.0.0.0"]
