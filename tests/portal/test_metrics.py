"""/metrics: the bearer token, every family an operator's dashboard and alerts read, and the
figures agreeing with the pages' (GPUs in use, the month's spend)."""

import hashlib
import json
import re
import shutil
import subprocess
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from billing.month_spend import team_spend
from cloud import azure_vm
from cloud.metrics import arm_operation, kube_operation
from portal.celery import app as celery_app
from teams import tasks as team_tasks
from tests.billing.test_spend import price, run
from tests.factories import WorkspaceFactory
from workspaces.azure import azure_settings

pytestmark = pytest.mark.django_db
TOKEN = "metrics-token-for-tests-0123456789"
ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "gpu-portal-dashboard.json"

# Every family the issue asks for, as prometheus_client's parser names them (a counter
# without its _total suffix).
FAMILIES = {
    "portal_request_duration_seconds",
    "portal_workspaces",
    "portal_gpus_in_use",
    "portal_team_gpus_in_use",
    "portal_team_gpus_idle",
    "portal_team_month_gpu_hours",
    "portal_team_month_spend_usd",
    "portal_team_month_budget_usd",
    "portal_team_month_budget_used_ratio",
    "portal_idle_actions",
    "portal_cloud_calls",
    "portal_cloud_call_duration_seconds",
    "portal_task_queue_depth",
    "portal_task_queue_oldest_age_seconds",
    "portal_heartbeats",
    "portal_heartbeat_samples",
    "portal_heartbeat_buffer_pending",
    "portal_heartbeat_oldest_pending_timestamp_seconds",
    "portal_beat_job_last_run_timestamp_seconds",
    "portal_beat_job_seconds_since_last_run",
    "portal_beat_job_interval_seconds",
}


@pytest.fixture(autouse=True)
def _spend_computed_afresh():
    from django.core.cache import cache

    from portal.metrics_collectors import SPEND_CACHE_KEY

    cache.delete(SPEND_CACHE_KEY)


@pytest.fixture
def token(settings):
    settings.METRICS_TOKEN_SHA256 = hashlib.sha256(TOKEN.encode()).hexdigest()
    return TOKEN


def scrape(client, token=TOKEN):
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content
    return {f.name: f for f in text_string_to_metric_families(response.content.decode())}


def value(families, name, **labels):
    """The value of the sample ``name`` whose labels include ``labels``; None if absent."""
    for family in families.values():
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                return sample.value
    return None


def test_without_a_configured_token_metrics_is_not_found(client, settings):
    settings.METRICS_TOKEN_SHA256 = ""
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 404


@pytest.mark.parametrize("header", ["", "Bearer wrong-token", f"Basic {TOKEN}", TOKEN])
def test_a_wrong_or_missing_token_is_refused(client, token, header):
    response = client.get("/metrics", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"portal_" not in response.content


def test_a_scrape_has_every_family_and_the_pages_figures(client, cast, token):
    now = datetime.now(UTC)
    cast.team.monthly_budget = Decimal("100")
    cast.team.save()
    start = max(now - timedelta(hours=2), now.replace(day=1, hour=0, minute=0, second=1))
    price("Standard_NC24ads_A100_v4", "3.6730", now - timedelta(days=60))
    a100 = {"gpu_model": "A100", "gpu_count": 1}
    run(cast, start=start, **a100)  # one A100 VM running since start
    WorkspaceFactory(team=cast.team, owner=cast.researcher, **a100)  # requested: holds one too
    # Counters live as long as the test session: count what this request adds.
    timed = "portal_request_duration_seconds_count"
    healthz_before = value(scrape(client), timed, view="healthz") or 0
    client.get("/healthz")  # a request timed per view
    with celery_app.connection_for_write() as conn:  # what earlier tests left unsent
        conn.default_channel.queue_purge(celery_app.conf.task_default_queue)

    families = scrape(client)

    assert families.keys() >= FAMILIES, FAMILIES - families.keys()
    assert value(families, "portal_workspaces", kind="vm", status="running") == 1
    assert value(families, "portal_workspaces", kind="vm", status="requested") == 1
    assert value(families, "portal_gpus_in_use", gpu_model="A100") == 2
    assert value(families, "portal_team_gpus_in_use", team="vision", gpu_model="A100") == 2
    # The agent never reported use: the running VM's GPU is idle.
    assert value(families, "portal_team_gpus_idle", team="vision", gpu_model="A100") == 1
    spent = team_spend(team_ids=[cast.team.pk], now=datetime.now(UTC))[cast.team.pk].spent
    shown = value(families, "portal_team_month_spend_usd", team="vision")
    assert spent > 0 and abs(Decimal(str(shown)) - spent) <= Decimal("0.02")
    assert value(families, "portal_team_month_budget_used_ratio", team="vision") == pytest.approx(
        float(spent / 100), abs=0.001
    )
    hours = (datetime.now(UTC) - start).total_seconds() / 3600
    gpu_hours = value(families, "portal_team_month_gpu_hours", team="vision")
    assert gpu_hours == pytest.approx(hours, abs=0.01)
    assert value(families, timed, view="healthz") - healthz_before == 1
    assert value(families, "portal_task_queue_depth") == 0


def test_azure_calls_are_counted_by_operation_and_outcome(client, sim, token):
    sim.inject("vm.list", "throttle", count=1)
    operation = "GET Microsoft.Compute/virtualMachines"
    before = scrape(client)
    azure_vm.power_states(azure_settings())  # a 429, retried by azure-core, then a 200
    after = scrape(client)

    def grew(outcome):
        old = value(before, "portal_cloud_calls_total", operation=operation, outcome=outcome)
        new = value(after, "portal_cloud_calls_total", operation=operation, outcome=outcome)
        return (new or 0) - (old or 0)

    assert grew("throttled") == 1
    assert grew("ok") == 1


def test_heartbeats_are_counted_by_outcome(client, token):
    before = value(scrape(client), "portal_heartbeats_total", outcome="refused") or 0
    client.post(
        f"/api/workspaces/{uuid.uuid4()}/heartbeat/",
        data=b"{}",
        content_type="application/json",
        HTTP_AUTHORIZATION="Bearer not-an-agent-token",
    )
    assert value(scrape(client), "portal_heartbeats_total", outcome="refused") == before + 1


def test_a_beat_job_that_ran_shows_when(client, cast, token):
    team_tasks.expire_quota_requests.apply()  # as a worker runs it for the beat
    families = scrape(client)
    ran = value(families, "portal_beat_job_last_run_timestamp_seconds", job="expire-quota-requests")
    assert ran == pytest.approx(datetime.now(UTC).timestamp(), abs=30)
    since = value(families, "portal_beat_job_seconds_since_last_run", job="expire-quota-requests")
    assert 0 <= since < 30
    assert value(families, "portal_beat_job_interval_seconds", job="idle-sweep") > 0


@pytest.mark.parametrize(
    ("method", "url", "operation"),
    [
        (
            "PUT",
            "https://management.azure.com/subscriptions/s/resourceGroups/rg/providers/"
            "Microsoft.Compute/virtualMachines/vm-1?api-version=2024-07-01",
            "PUT Microsoft.Compute/virtualMachines",
        ),
        (
            "POST",
            "https://management.azure.com/subscriptions/s/resourceGroups/rg/providers/"
            "Microsoft.Compute/virtualMachines/vm-1/deallocate?api-version=2024-07-01",
            "POST Microsoft.Compute/virtualMachines/deallocate",
        ),
        (
            "GET",
            "https://management.azure.com/subscriptions/s/resourceGroups/rg/providers/"
            "Microsoft.ContainerService/managedClusters/aks/agentPools/mig",
            "GET Microsoft.ContainerService/managedClusters/agentPools",
        ),
        (
            "POST",
            "https://management.azure.com/subscriptions/s/providers/Microsoft.CostManagement/query",
            "POST Microsoft.CostManagement/query",
        ),
    ],
)
def test_azure_operations_name_types_never_resources(method, url, operation):
    assert arm_operation(method, url) == operation


def test_kubernetes_operations_name_resources_never_namespaces():
    assert kube_operation("GET", "https://aks/api/v1/namespaces/ws-1/pods/p") == "GET pods"
    assert kube_operation("DELETE", "https://aks/api/v1/namespaces/ws-1") == "DELETE namespaces"
    url = "https://aks/apis/rbac.authorization.k8s.io/v1/namespaces/ws-1/rolebindings"
    assert kube_operation("POST", url) == "POST rolebindings"
    assert kube_operation("GET", "https://aks/api/v1/namespaces/a/pods/p/log") == "GET pods/log"
    assert kube_operation("GET", "http://127.0.0.1:8100/_k8s/c1/api/v1/nodes") == "GET nodes"


def test_every_alert_and_panel_reads_families_the_portal_exports():
    suffixes = ("", "_total", "_bucket", "_count", "_sum")
    exported = {f + suffix for f in FAMILIES for suffix in suffixes}
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    exprs = [rule["expr"] for group in groups for rule in group["rules"]]
    panels = json.loads(DASHBOARD.read_text())["panels"]
    exprs += [target["expr"] for panel in panels for target in panel.get("targets", [])]
    assert len(exprs) >= 10
    for expr in exprs:
        names = set(re.findall(r"\bportal_[a-z_]+", expr))
        assert names and names <= exported, (expr, names - exported)


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (Debian: prometheus) absent")
def test_the_alert_rules_pass_promtool():
    result = subprocess.run(
        ["promtool", "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_token_is_kept_hashed_and_a_weak_one_refuses_to_start():
    from django.core.exceptions import ImproperlyConfigured

    from portal.required_settings import metrics_token_sha256

    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    assert metrics_token_sha256(token=TOKEN, sha256="") == digest
    assert metrics_token_sha256(token="", sha256=digest.upper()) == digest
    assert metrics_token_sha256(token="", sha256="") == ""
    with pytest.raises(ImproperlyConfigured) as short:
        metrics_token_sha256(token="short-secret", sha256="")
    assert "short-secret" not in str(short.value)
    with pytest.raises(ImproperlyConfigured):
        metrics_token_sha256(token="", sha256="not-a-digest")


def test_the_oldest_waiting_heartbeat_shows_until_it_is_stored(client, token, time_machine):
    from workspaces.heartbeats import HeartbeatBuffer

    buffer = HeartbeatBuffer(flush_thread=False)
    taken = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    time_machine.move_to(taken, tick=False)
    buffer.add(uuid.uuid4(), [])
    families = scrape(client)
    oldest = "portal_heartbeat_oldest_pending_timestamp_seconds"
    assert value(families, oldest) == taken.timestamp()
    assert value(families, "portal_heartbeat_buffer_pending") == 1
    buffer.flush()
    families = scrape(client)
    assert value(families, oldest) == float("inf")
    assert value(families, "portal_heartbeat_buffer_pending") == 0


@pytest.mark.filterwarnings("ignore::celery.exceptions.AlwaysEagerIgnored")  # sent, not run
def test_a_waiting_task_shows_in_the_queue_depth_and_age(client, token):
    # The queue the worker consumes, emptied first of what earlier tests left unsent. Changing
    # it for this test would stay in Celery's routing (app.amqp.queues) for later ones.
    queue = celery_app.conf.task_default_queue
    with celery_app.connection_for_write() as conn:
        conn.default_channel.queue_purge(queue)
    celery_app.send_task("portal.no_such_task", queue=queue)  # no worker takes it here
    try:
        families = scrape(client)
        assert value(families, "portal_task_queue_depth", queue=queue) == 1
        age = value(families, "portal_task_queue_oldest_age_seconds", queue=queue)
        assert 0 < age < 60
    finally:
        with celery_app.connection_for_write() as conn:
            conn.default_channel.queue_purge(queue)


def test_a_broker_the_portal_cannot_look_into_leaves_the_queue_figures_out(
    client, token, monkeypatch
):
    # The collector's app on a memory:// broker; the real app's conf is left alone, since a
    # changed broker URL outlives monkeypatch's undo in Celery's connection settings.
    from types import SimpleNamespace

    from kombu import Connection

    from portal import metrics_collectors

    conf = celery_app.conf
    memory = SimpleNamespace(
        conf=SimpleNamespace(
            broker_url="memory://",
            task_default_queue=conf.task_default_queue,
            beat_schedule=conf.beat_schedule,
        ),
        connection_for_read=lambda: Connection("memory://"),
    )
    monkeypatch.setattr(metrics_collectors, "app", memory)

    families = scrape(client)  # answers 200, with every other family

    assert "portal_task_queue_depth" not in families
    assert "portal_task_queue_oldest_age_seconds" not in families
    assert "portal_beat_job_interval_seconds" in families


def test_idle_warnings_and_stops_are_counted(client, cast, token, sim):
    from tests.workspaces.test_sweep import _at, _report, _running
    from workspaces.sweep import idle_sweep

    def counted(families, action):
        return value(families, "portal_idle_actions_total", action=action) or 0

    before = scrape(client)
    ws, agent_token = _running(cast)
    _report(ws, agent_token, _at(0), 10, util=90)  # busy until 12:09:30
    _report(ws, agent_token, _at(10), 30, util=0)  # idle since
    assert idle_sweep(now=_at(30)).warned == [ws.pk]  # stops in 10 min
    assert idle_sweep(now=_at(40)).stopped == [ws.pk]
    after = scrape(client)
    assert counted(after, "warned") - counted(before, "warned") == 1
    assert counted(after, "stopped") - counted(before, "stopped") == 1
