"""The AKS Helm chart (deploy/helm/gpu-portal) and the image's entrypoint, as operators see them.

The chart is linted and rendered by Helm's own Go SDK (helm-python-sdk: the helm lint and helm
template code paths, v4), and the rendered core objects are round-tripped through the Kubernetes
client's models, so a misspelt or misplaced field is caught as kubeconform would catch it
(kubeconform itself is a GitHub download, not reachable here).
"""

import json
import os
import stat
import subprocess
from pathlib import Path

import helm_python as helm
import pytest
import yaml
from kubernetes.client import ApiClient

from portal.required_settings import REQUIRED_IN_PRODUCTION

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "gpu-portal"
ENTRYPOINT = ROOT / "deploy" / "container" / "entrypoint.sh"
MODELS = {
    "Deployment": "V1Deployment",
    "Service": "V1Service",
    "Job": "V1Job",
    "ServiceAccount": "V1ServiceAccount",
    "PodDisruptionBudget": "V1PodDisruptionBudget",
    "HorizontalPodAutoscaler": "V2HorizontalPodAutoscaler",
    "NetworkPolicy": "V1NetworkPolicy",
}


def _render(values: dict | None = None) -> list[dict]:
    with helm.Chart.load(str(CHART)) as chart:
        manifests = chart.render(values or {}, name="portal", namespace="gpu")
    docs = []
    for path, text in manifests.items():
        if path.endswith(".yaml"):
            docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


def _one(docs: list[dict], kind: str, suffix: str = "") -> dict:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(suffix)]
    assert len(found) == 1, f"{kind} *{suffix}: {[d['metadata']['name'] for d in found]}"
    return found[0]


def _pod_specs(docs: list[dict]) -> dict[str, dict]:
    return {
        d["metadata"]["name"]: d["spec"]["template"]["spec"]
        for d in docs
        if d["kind"] in ("Deployment", "Job")
    }


def test_helm_lint_finds_no_errors():
    result = helm.lint(str(CHART))
    assert result["errors"] == []
    assert not [m for m in result["messages"] if m["severity"] > 1], result["messages"]


def test_core_objects_keep_every_field_through_the_kubernetes_models():
    api = ApiClient()
    for doc in _render():
        model = MODELS.get(doc["kind"])
        if model is None:
            continue

        class _Response:
            data = json.dumps(doc)

        parsed = api.deserialize(_Response(), model)
        assert api.sanitize_for_serialization(parsed) == doc, doc["metadata"]["name"]


def test_one_image_runs_web_worker_beat_and_the_migration_hook():
    docs = _render()
    roles = {name: spec["containers"][0]["args"][0] for name, spec in _pod_specs(docs).items()}
    assert roles == {
        "portal-gpu-portal-web": "web",
        "portal-gpu-portal-worker": "worker",
        "portal-gpu-portal-beat": "beat",
        "portal-gpu-portal-migrate": "migrate",
    }
    images = {spec["containers"][0]["image"] for spec in _pod_specs(docs).values()}
    assert len(images) == 1
    job = _one(docs, "Job", "-migrate")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    # The Job's ServiceAccount and SecretProviderClass exist before it on a first install.
    for kind in ("ServiceAccount", "SecretProviderClass"):
        hook = _one(docs, kind, "-migrate")["metadata"]["annotations"]
        assert "pre-install" in hook["helm.sh/hook"]
        assert int(hook["helm.sh/hook-weight"]) < 0


def test_web_has_probes_on_healthz_an_hpa_a_pdb_and_resources():
    docs = _render()
    web = _one(docs, "Deployment", "-web")["spec"]["template"]["spec"]["containers"][0]
    for probe in ("readinessProbe", "livenessProbe"):
        assert web[probe]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert web["ports"][0]["name"] == "http"
    hpa = _one(docs, "HorizontalPodAutoscaler", "-web")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "portal-gpu-portal-web"
    assert "replicas" not in _one(docs, "Deployment", "-web")["spec"]  # the HPA owns it
    for component in ("web", "worker"):
        assert _one(docs, "PodDisruptionBudget", f"-{component}")["spec"]["minAvailable"] == 1
    for name, spec in _pod_specs(docs).items():
        requests = spec["containers"][0]["resources"]["requests"]
        assert {"cpu", "memory"} <= set(requests), name
        assert spec["securityContext"]["runAsNonRoot"] is True, name


def test_pods_use_workload_identity_and_key_vault_secrets():
    docs = _render()
    accounts = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ServiceAccount"}
    classes = {d["metadata"]["name"]: d for d in docs if d["kind"] == "SecretProviderClass"}
    for name, spec in _pod_specs(docs).items():
        account = accounts[spec["serviceAccountName"]]
        assert account["metadata"]["annotations"]["azure.workload.identity/client-id"]
        deployment = next(
            d for d in docs if d["metadata"]["name"] == name and d["kind"] in ("Deployment", "Job")
        )
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert labels["azure.workload.identity/use"] == "true", name
        csi = next(v["csi"] for v in spec["volumes"] if "csi" in v)
        spc = classes[csi["volumeAttributes"]["secretProviderClass"]]
        assert spc["apiVersion"] == "secrets-store.csi.x-k8s.io/v1"
        synced = spc["spec"]["secretObjects"][0]
        env_from = spec["containers"][0]["envFrom"][0]["secretRef"]["name"]
        assert env_from == synced["secretName"], name
        # Every variable production refuses to start without comes from the secret or the env.
        env = {e["name"] for e in spec["containers"][0]["env"]}
        secret_keys = {item["key"] for item in synced["data"]}
        missing = (set(REQUIRED_IN_PRODUCTION) | {"SECRET_KEY"}) - env - secret_keys
        assert not missing, (name, missing)


def test_allowed_hosts_admit_the_probes_and_prometheus_by_pod_ip():
    web = _one(_render(), "Deployment", "-web")["spec"]["template"]["spec"]["containers"][0]
    names = [e["name"] for e in web["env"]]
    allowed = next(e["value"] for e in web["env"] if e["name"] == "ALLOWED_HOSTS")
    assert allowed == "gpu.example.org,$(POD_IP)"
    # Kubernetes expands $(POD_IP) only when POD_IP is defined earlier in the list.
    assert names.index("POD_IP") < names.index("ALLOWED_HOSTS")


def test_service_monitor_scrapes_metrics_with_the_bearer_token_from_the_secret():
    docs = _render()
    monitor = _one(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["path"] == "/metrics" and endpoint["port"] == "http"
    credentials = endpoint["authorization"]["credentials"]
    spc = _one(docs, "SecretProviderClass", "portal-gpu-portal")
    assert credentials == {"name": "portal-gpu-portal-secrets", "key": "METRICS_TOKEN"}
    assert "METRICS_TOKEN" in {i["key"] for i in spc["spec"]["secretObjects"][0]["data"]}
    service = _one(docs, "Service", "-web")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["spec"]["selector"].items()


def test_beat_runs_one_by_default_and_two_for_fail_over():
    assert _one(_render(), "Deployment", "-beat")["spec"]["replicas"] == 1
    assert _one(_render({"beat": {"replicas": 2}}), "Deployment", "-beat")["spec"]["replicas"] == 2


def test_worker_metrics_are_scraped_and_reachable_only_from_prometheus():
    docs = _render()
    worker = _one(docs, "Deployment", "-worker")["spec"]["template"]["spec"]["containers"][0]
    assert worker["ports"] == [{"name": "metrics", "containerPort": 9808}]
    assert {"name": "METRICS_WORKER_PORT", "value": "9808"} in worker["env"]
    assert _one(docs, "PodMonitor")["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    policy = _one(docs, "NetworkPolicy")["spec"]
    assert policy["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"]


def test_an_existing_secret_replaces_key_vault():
    docs = _render({"keyVault": {"enabled": False}, "existingSecret": "portal-env"})
    assert not [d for d in docs if d["kind"] == "SecretProviderClass"]
    for spec in _pod_specs(docs).values():
        assert spec["containers"][0]["envFrom"] == [{"secretRef": {"name": "portal-env"}}]
        assert not [v for v in spec["volumes"] if "csi" in v]


@pytest.fixture
def fake_bin(tmp_path):
    """gunicorn, celery and python3 that print the command line they were started with."""
    for name in ("gunicorn", "celery", "python3"):
        path = tmp_path / name
        path.write_text(f'#!/bin/sh\necho {name} "$@"\n')
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return tmp_path


@pytest.mark.parametrize(
    ("role", "expected"),
    [
        (
            "web",
            "gunicorn -c portal/gunicorn_conf.py portal.asgi:application",
        ),
        ("worker", "celery -A portal worker"),
        ("beat", "celery -A portal beat"),
        ("migrate", "python3 manage.py migrate --noinput"),
    ],
)
def test_the_entrypoint_starts_the_process_its_argument_names(fake_bin, tmp_path, role, expected):
    env = {
        "PATH": f"{fake_bin}:/usr/bin:/bin",
        "PORTAL_PORT": "9000",
        "PORTAL_VAR_DIR": str(tmp_path / "var"),
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom"),
    }
    (tmp_path / "prom").mkdir()
    (tmp_path / "prom" / "counter_1.db").write_text("stale")
    result = subprocess.run(
        ["sh", str(ENTRYPOINT), role], env=env, capture_output=True, text=True, check=True
    )
    assert result.stdout.startswith(expected)
    if role == "web":  # on every address, at the port the chart's probes and Service use
        assert "--bind 0.0.0.0:9000" in result.stdout
    # A previous run's multiprocess files are gone, so they are not counted twice.
    assert not list((tmp_path / "prom").iterdir())


def test_the_containerfile_builds_a_non_root_image_that_checks_healthz():
    text = (ROOT / "Containerfile").read_text()
    assert text.count("FROM ${BASE_IMAGE}") == 2  # builder and final stage share the base
    assert "ARG BASE_IMAGE=docker.io/library/python:3.11-slim-bookworm" in text
    assert "USER 10001:10001" in text
    assert "collectstatic" in text and "/healthz" in text
    assert 'ENTRYPOINT ["/app/deploy/container/entrypoint.sh"]' in text
    # The build-time key is never an ENV, so the image carries none.
    assert "ENV SECRET_KEY" not in text and "SECRET_KEY=" not in text.split("RUN SECRET_KEY")[0]
    assert os.access(ENTRYPOINT, os.X_OK)


@pytest.mark.parametrize(
    "values",
    [
        {"wrker": {"replicas": 3}},  # a misspelt key is refused, not ignored
        {"beat": {"replicas": 3}},
        {"config": {"SECRET_KEY": "in plain values"}},  # secrets come from Key Vault
        {"web": {"resources": {"requests": {"cpu": None}}}},  # null deletes the CPU request
    ],
)
def test_values_outside_the_schema_are_refused(values):
    with pytest.raises(Exception, match="(?i)schema|values"):
        _render(values)
