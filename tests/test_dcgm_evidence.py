"""A namespace workspace is busy by the GPU use DCGM reports through Prometheus (the emulator
serves the query API from its agent profiles), and by its GPU pods when PROMETHEUS_URL is unset
or Prometheus fails. Azure, Kubernetes and Prometheus are the emulator's; nothing else is faked."""

import time
from datetime import timedelta

import pytest
import requests
from django.utils import timezone
from kubernetes import client

from cloud import prometheus
from cloud.errors import CloudError
from clusters.backends.aks import kube_api
from tests.test_aks_workspaces import (  # noqa: F401 (fixtures)
    cluster,
    four_gpu_offering,
    make_pool,
    request_namespace,
)
from workspaces.kube_activity import namespace_activity_scan
from workspaces.models import TelemetrySample, WorkspaceAgent
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)


# The pool's nodes carry make_pool's sku=gpu:NoSchedule taint.
TOLERATE = [{"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]


def run_gpu_pod(ws, name="train", gpus=1):
    container = {"name": "train", "image": "pytorch",
                 "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}  # fmt: skip
    body = {
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [container], "tolerations": TOLERATE},
            },
        },
    }
    api = kube_api(ws.node_pool)
    client.AppsV1Api(api).create_namespaced_deployment(ws.namespace, body)
    deadline = time.monotonic() + 10
    core = client.CoreV1Api(api)
    while not core.list_namespaced_pod(ws.namespace, field_selector="status.phase=Running").items:
        assert time.monotonic() < deadline, "the GPU pod never ran"
        time.sleep(0.05)


@pytest.fixture
def namespace_ws(cast, cluster, sim):  # noqa: F811
    pool = make_pool(cast, cluster, name="a100", profile="", **four_gpu_offering())
    ws = request_namespace(cast, pool)
    assert ws.status == Status.RUNNING, ws.error_message
    run_gpu_pod(ws)
    return ws


def scanned(ws, seconds=0):
    """The sample a scan ``seconds`` from now stored (one per half agent interval is kept)."""
    namespace_activity_scan(now=timezone.now() + timedelta(seconds=seconds))
    sample = TelemetrySample.objects.filter(workspace=ws).latest("at")
    return sample, WorkspaceAgent.objects.get(pk=ws.pk).nvml


def test_a_namespace_holding_a_gpu_it_does_not_use_is_idle_by_dcgm(
    namespace_ws, sim, sim_server, settings
):
    sim.set_agent_profile(namespace_ws.namespace, "idle")
    settings.PROMETHEUS_URL = ""
    sample, nvml = scanned(namespace_ws)
    assert (sample.gpu_util, nvml) == (100, "1 running pod requesting GPUs")  # The fallback.
    settings.PROMETHEUS_URL = f"{sim_server.url}/prometheus"
    sample, nvml = scanned(namespace_ws, 30)
    assert sample.gpu_util == 0 and 480 <= sample.gpu_mem_used_mib <= 560
    assert nvml == "DCGM: 1 GPU device in use by pods"
    sim.set_agent_profile(namespace_ws.namespace, "busy")
    sample, _ = scanned(namespace_ws, 60)
    assert 80 <= sample.gpu_util <= 98 and sample.gpu_mem_used_mib > 40000  # Of 80 GiB.


def test_when_prometheus_fails_the_pod_count_decides(namespace_ws, sim, settings, caplog):
    sim.set_agent_profile(namespace_ws.namespace, "idle")
    settings.PROMETHEUS_URL = "http://127.0.0.1:9/prometheus"  # Nothing listens there.
    sample, nvml = scanned(namespace_ws)
    assert (sample.gpu_util, nvml) == (100, "1 running pod requesting GPUs")
    assert "PrometheusUnavailable" in caplog.text


def test_the_emulator_answers_the_prometheus_instant_query_shape(namespace_ws, sim, sim_server):
    sim.set_agent_profile(namespace_ws.namespace, "busy")
    url = f"{sim_server.url}/prometheus/api/v1/query"
    query = f'DCGM_FI_DEV_GPU_UTIL{{namespace="{namespace_ws.namespace}"}}'
    body = requests.get(url, params={"query": query}, timeout=5).json()
    assert body["status"] == "success" and body["data"]["resultType"] == "vector"
    (series,) = body["data"]["result"]
    labels = series["metric"]
    assert labels["namespace"] == namespace_ws.namespace and labels["container"] == "train"
    assert labels["pod"].startswith("train-") and labels["modelName"] == "NVIDIA A100 80GB PCIe"
    stamp, value = series["value"]
    assert isinstance(stamp, float) and 80 <= int(value) <= 98
    bad = requests.get(url, params={"query": "rate(x[5m])"}, timeout=5)
    assert bad.status_code == 400 and bad.json()["errorType"] == "bad_data"
    use = prometheus.dcgm_namespace_use(url=f"{sim_server.url}/prometheus")
    seen = use[("research-aks", namespace_ws.namespace)]
    assert seen.devices == 1 and seen.pods == (labels["pod"],)
    with pytest.raises(CloudError, match="PrometheusUnavailable"):
        prometheus.dcgm_namespace_use(url=f"{sim_server.url}/nothing-here")
