"""A namespace workspace is busy by the GPU use DCGM reports through Prometheus (the emulator
serves the query API from its agent profiles), and by its GPU pods when PROMETHEUS_URL is unset
or Prometheus fails. A MIG slice, whose agent cannot read its MIG device's use, is busy by
DCGM's use of its MIG instance merged into its agent's samples, and judged by its agent alone
without DCGM. Azure, Kubernetes and Prometheus are the emulator's; nothing else is faked."""

import json
import random
import time
from datetime import UTC, timedelta

import pytest
import requests
from django.utils import timezone
from kubernetes import client

from cloud import prometheus
from cloud.errors import CloudError
from cloudsim.agent_protocol import GpuModel, make_sample
from clusters.backends.aks import kube_api
from notifications.models import Notice
from tests.clusters.test_aks_workspaces import (  # noqa: F401 (fixtures)
    cluster,
    four_gpu_offering,
    make_pool,
    request_mig,
    request_namespace,
)
from workspaces import telemetry
from workspaces.heartbeats import heartbeat_ingest
from workspaces.kube_activity import namespace_activity_scan
from workspaces.models import TelemetrySample, Workspace, WorkspaceAgent
from workspaces.states import Status
from workspaces.sweep import idle_sweep

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
    running = {"field_selector": "status.phase=Running", "label_selector": f"app={name}"}
    # Its own pod: the namespace's JupyterLab runs beside it (cloud.kube_lab).
    while not core.list_namespaced_pod(ws.namespace, **running).items:
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


# --- MIG slices ---------------------------------------------------------------------------


@pytest.fixture
def mig_ws(cast, cluster, sim, settings):  # noqa: F811
    make_pool(cast, cluster)
    ws = request_mig(cast)
    assert ws.status == Status.RUNNING, ws.waiting_reason or ws.error_message
    return ws


def agent_heartbeat(ws, profile, at):
    """A heartbeat as the emulator's agent in the slice's pod sends it for ``profile``: one
    1g.10gb MIG device, no utilisation (NVML has none per MIG device), busy kernels only
    when someone works in Jupyter."""
    sample = make_sample(profile, random.Random(1), GpuModel("NVIDIA A100 80GB PCIe", 81920),
                         1, 1, 10, mig_profile=ws.mig_profile)  # fmt: skip
    sample["at"] = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    token = telemetry.agent_token_issue(workspace_id=ws.pk, now=at)
    body = json.dumps({"agent_version": "1.0", "samples": [sample]}).encode()
    heartbeat_ingest(workspace_id=ws.pk, token=token, body=body, now=at)


def play(ws, sim, profile, minutes):
    """``minutes`` of a slice playing ``profile`` (agent and DCGM alike), as beat runs it:
    every agent interval (30 s) a DCGM scan and an agent heartbeat a second later, and the
    idle sweep each minute. Returns the workspace as it is then."""
    sim.set_agent_profile(f"ws-{ws.short_id}", profile)
    start = timezone.now()
    for step in range(minutes * 2 + 1):
        at = start + timedelta(seconds=30 * step)
        namespace_activity_scan(now=at)
        agent_heartbeat(ws, profile, at + timedelta(seconds=1))
        if step % 2 == 0:
            idle_sweep(now=at + timedelta(seconds=2))
        if Workspace.objects.get(pk=ws.pk).status != Status.RUNNING:
            break
    return Workspace.objects.get(pk=ws.pk)


def test_a_mig_slice_running_a_job_nobody_watches_is_busy_by_dcgm(
    mig_ws, sim, sim_server, settings
):
    settings.PROMETHEUS_URL = f"{sim_server.url}/prometheus"
    ws = play(mig_ws, sim, "batch", minutes=45)  # Past the 30 idle minutes of the policy.
    assert ws.status == Status.RUNNING
    samples = TelemetrySample.objects.filter(workspace=ws)
    assert samples.count() >= 80 and all(80 <= s.gpu_util <= 98 for s in samples)
    agent = WorkspaceAgent.objects.get(pk=ws.pk)
    assert agent.interactive == 0 and agent.gpus[0]["util"] is None  # The agent saw no use.
    assert not Notice.objects.filter(user=ws.owner, text__contains="is idle").exists()


def test_an_idle_mig_slice_by_dcgm_is_warned_then_stopped(mig_ws, sim, sim_server, settings):
    settings.PROMETHEUS_URL = f"{sim_server.url}/prometheus"
    ws = play(mig_ws, sim, "idle", minutes=45)
    assert ws.status in (Status.STOPPING, Status.STOPPED)
    assert Notice.objects.filter(user=ws.owner, text__contains="is idle").exists()
    event = ws.events.get(to_status=Status.STOPPING)
    assert event.actor is None and event.reason.startswith("Stopped for idleness")
    assert set(TelemetrySample.objects.filter(workspace=ws).values_list("gpu_util", flat=True)) == {
        0
    }


@pytest.mark.parametrize("url", ["", "http://127.0.0.1:9/prometheus"], ids=["unset", "down"])
def test_without_dcgm_a_mig_slice_is_judged_by_its_agent_alone(mig_ws, sim, settings, caplog, url):
    settings.PROMETHEUS_URL = url
    ws = play(mig_ws, sim, "batch", minutes=45)
    # Its agent sees no busy kernel and cannot read a MIG device's use: idle, as before DCGM.
    assert ws.status in (Status.STOPPING, Status.STOPPED)
    assert set(TelemetrySample.objects.filter(workspace=ws).values_list("gpu_util", flat=True)) == {
        None
    }
    assert ("PrometheusUnavailable" in caplog.text) == bool(url)


def test_a_busy_jupyter_kernel_keeps_a_slice_dcgm_sees_idle(mig_ws, sim, sim_server, settings):
    """Merged, not replaced: the agent's sessions still count beside DCGM's GPU use."""
    settings.PROMETHEUS_URL = f"{sim_server.url}/prometheus"
    sim.set_agent_profile(f"ws-{mig_ws.short_id}", "idle")  # DCGM: an idle MIG instance.
    start = timezone.now()
    for step in range(91):
        at = start + timedelta(seconds=30 * step)
        namespace_activity_scan(now=at)
        agent_heartbeat(mig_ws, "busy", at + timedelta(seconds=1))  # A busy kernel.
    idle_sweep(now=start + timedelta(minutes=45, seconds=2))
    assert Workspace.objects.get(pk=mig_ws.pk).status == Status.RUNNING
    assert TelemetrySample.objects.filter(workspace=mig_ws).latest("at").gpu_util == 0


def test_the_emulator_serves_mig_instance_series_as_dcgm_exporter_labels_them(
    mig_ws, sim, sim_server
):
    sim.set_agent_profile(f"ws-{mig_ws.short_id}", "batch")
    url = f"{sim_server.url}/prometheus/api/v1/query"
    pod = f"ws-{mig_ws.short_id}-0"

    def series(metric):
        query = f'{metric}{{pod="{pod}"}}'
        return requests.get(url, params={"query": query}, timeout=5).json()["data"]["result"]

    (engine,) = series("DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    labels = engine["metric"]
    assert (labels["GPU_I_PROFILE"], labels["namespace"]) == ("1g.10gb", mig_ws.namespace)
    assert labels["GPU_I_ID"].isdigit() and labels["cluster"] == "research-aks"
    assert 0.8 <= float(engine["value"][1]) <= 0.98
    (fb,) = series("DCGM_FI_DEV_FB_USED")
    assert 9728 * 0.6 <= int(fb["value"][1]) <= 9728  # Of the MIG device's memory, MiB.
    assert series("DCGM_FI_DEV_GPU_UTIL") == []  # Not counted per MIG instance.
    use = prometheus.dcgm_use(url=f"{sim_server.url}/prometheus")
    seen = use.pods[("research-aks", mig_ws.namespace, pod)]
    assert seen.mig_profile == "1g.10gb" and 80 <= seen.gpu_util <= 98


def test_a_reading_is_merged_only_into_samples_taken_near_it(mig_ws, sim, sim_server, settings):
    """An agent's backlog, sent after an outage, is not credited with today's GPU use."""
    settings.PROMETHEUS_URL = f"{sim_server.url}/prometheus"
    sim.set_agent_profile(f"ws-{mig_ws.short_id}", "batch")
    now = timezone.now()
    namespace_activity_scan(now=now)
    agent_heartbeat(mig_ws, "batch", now - timedelta(minutes=10))  # Beyond two intervals.
    agent_heartbeat(mig_ws, "batch", now + timedelta(seconds=59))  # Within them.
    utils = TelemetrySample.objects.filter(workspace=mig_ws).order_by("at")
    old, near = utils.values_list("gpu_util", flat=True)
    assert old is None and 80 <= near <= 98
