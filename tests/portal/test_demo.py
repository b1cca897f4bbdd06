"""`make run` works for all three kinds out of the box: the emulator's demo quota
(cloudsim/demo.py, CLOUDSIM_DEMO_QUOTA=1) fits seed_demo's node pools and a VM, a MIG slice and
a namespace requested at once; a pool Azure refused counts no capacity; demo timings say so."""

import io
import re
import time
import uuid
from datetime import timedelta

import pytest
import time_machine
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from clusters import aks_services
from clusters.models import NodePool, PoolStatus
from teams.models import Team
from tests.factories import SSH_KEY
from tests.workspaces.test_sweep import T0, _at, _report, _running
from workspaces.actions import workspace_keep_running
from workspaces.backends.vm_request import workspace_request
from workspaces.models import SizeOffering, Workspace
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)


def _wait(predicate, what, seconds=60.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(what())


def _seed(sim, *, demo_quota: bool):
    from cloudsim.demo import DEMO_LOCATION, DEMO_QUOTA

    if demo_quota:
        for family, limit in DEMO_QUOTA.items():
            sim.set_quota(DEMO_LOCATION, family, limit)
    sim.create_aks_cluster(
        settings.AZURE_SUBSCRIPTION_ID, settings.AZURE_RESOURCE_GROUP, "research-aks"
    )
    call_command("seed_demo", stdout=io.StringIO())


def _pools():
    return list(NodePool.objects.values_list("name", "status", "error_code"))


def test_the_demo_runs_a_vm_a_mig_slice_and_a_namespace_at_once(
    client, sim, celery_worker_thread, live_server, settings
):
    # The VM is made from the demo catalog's environment: Running once its agent (the
    # emulator's, posting to this live portal) reports it set up.
    settings.PORTAL_URL = live_server.url
    settings.AGENT_INTERVAL_SECONDS = 0.2
    settings.SETUP_POLL_SECONDS = 0.2
    _seed(sim, demo_quota=True)
    _wait(lambda: NodePool.objects.filter(status=PoolStatus.READY).count() == 3, _pools)
    alice = get_user_model().objects.get(username="alice")
    client.force_login(alice)
    form = client.get(reverse("workspaces:request-namespace")).content.decode()
    assert "a100 (Standard_NC96ads_A100_v4)" in form  # a pool serves the team
    team, now = Team.objects.get(slug="vision-lab"), timezone.now()
    vm = workspace_request(
        user=alice,
        team=team,
        name="train",
        offering=SizeOffering.objects.get(vm_size="Standard_NC24ads_A100_v4", region="eastus"),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=now,
    )
    mig = aks_services.workspace_request_mig(
        user=alice,
        team=team,
        name="notebook",
        profile="1g.10gb",
        gpu_model="A100",
        request_key=uuid.uuid4(),
        now=now,
    )
    namespace = aks_services.workspace_request_namespace(
        user=alice,
        team=team,
        name="training",
        pool=NodePool.objects.get(name="a100"),
        gpus=2,
        request_key=uuid.uuid4(),
        now=now,
    )
    ids = [vm.pk, mig.pk, namespace.pk]
    _wait(
        lambda: Workspace.objects.filter(pk__in=ids, status=Status.RUNNING).count() == 3,
        lambda: list(Workspace.objects.values_list("name", "status", "waiting_reason")),
    )


def _capacity_row(html: str, pool: str) -> list[str]:
    """The cells after the pool's name in its row of the capacity table, as text."""
    for row in re.findall(r"<tr>(.*?)</tr>", html, re.S):
        cells = [
            re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", row, re.S)
        ]
        if pool in cells:
            return cells[cells.index(pool) + 1 :]
    raise AssertionError(f"no row for {pool}")


def test_a_pool_azure_refused_counts_no_capacity_on_the_clusters_page(client, sim):
    _seed(sim, demo_quota=False)  # Azure's default 96 vCPUs per family: a100 does not fit
    pool = NodePool.objects.get(name="a100")
    assert pool.status == PoolStatus.FAILED and "InsufficientVCPUQuota" in pool.error_code
    client.force_login(get_user_model().objects.get(username="pat"))
    html = client.get(reverse("clusters:list")).content.decode()
    # Cells after the name: VM size, serves, nodes, total, used, free, waiting.
    total, used, free = _capacity_row(html, "a100")[3:6]
    assert (total, used, free) == ("0", "0", "0")
    assert _capacity_row(html, "mig1g")[3:6] == ["14", "0", "14"]  # 2 nodes x 7 x 1g


def test_keep_running_with_demo_timings_says_the_length_it_keeps(client, cast, settings):
    from workspaces.telemetry import demo_timings_note

    settings.IDLE_TIME_SCALE = 0.1  # as `make run`
    ws, token = _running(cast)
    _report(ws, token, T0, 1, util=0)
    client.force_login(cast.researcher)
    url = reverse("workspaces:detail", args=[ws.pk])
    with time_machine.travel(_at(1), tick=False):
        page = client.get(url).content.decode()
        assert "Keep running for 24 minutes" in page
        assert "Keep running for 4 hours" not in page
        extension = workspace_keep_running(user=cast.researcher, workspace=ws, now=timezone.now())
        assert extension.until - extension.at == timedelta(minutes=24)
        page = client.get(url).content.decode()
    assert "alice kept it for 24 minutes" in page
    note = demo_timings_note()
    assert note in page
    assert "stopped after 3 minutes, warned 1 minute before" in note


def test_production_pages_have_no_demo_timings_note(client, cast):
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:list")).content.decode()
    assert 'data-testid="demo-timings"' not in page
