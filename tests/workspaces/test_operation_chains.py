"""One chain of tasks per Azure operation, and a bound on its attempts that holds.

Azure keeps refusing the NIC's DELETE (5xx) while the reconcile sweep runs as beat runs it.
The tasks go through tests.broker, so a chain waiting in its back-off meets the sweep as it does
in production; time-machine moves the clock. The SDK's own retries are off, so each DELETE the
emulator logs is one attempt of the portal's.
"""

import uuid
from datetime import timedelta

import pytest
import time_machine
from django.conf import settings
from django.utils import timezone

from clusters import services as cluster_services
from clusters.models import NodePool, PoolStatus
from clusters.tasks import advance_pool, reconcile_pools
from tests.broker import Broker
from tests.clusters.test_aks_workspaces import cluster, make_pool  # noqa: F401 (a fixture)
from tests.factories import SSH_KEY, OfferingFactory
from workspaces.actions import workspace_delete
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace
from workspaces.states import Status
from workspaces.tasks import advance_workspace, reconcile_workspaces

pytestmark = pytest.mark.django_db(transaction=True)

AZURE_500 = "An internal execution error occurred. Please retry later."


@pytest.fixture
def azure_once(settings):
    settings.AZURE_RETRY_TOTAL = 0


def _running(cast):
    ws = workspace_request(
        user=cast.researcher,
        team=cast.team,
        name="chains",
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
    )
    ws = Workspace.objects.get(pk=ws.pk)
    assert ws.status == Status.RUNNING
    return ws


def _nic_deletes(sim) -> list[dict]:
    return [
        r for r in sim.requests() if r["method"] == "DELETE" and "/networkInterfaces/" in r["path"]
    ]


def _pool_deletes(sim, pool) -> list[dict]:
    return [
        r
        for r in sim.requests()
        if r["method"] == "DELETE" and r["path"].split("?")[0].endswith(f"/agentPools/{pool.name}")
    ]


def test_a_delete_azure_keeps_refusing_fails_after_the_bound_with_sweeps_running(
    cast, sim, azure_once, monkeypatch
):
    ws = _running(cast)
    broker = Broker(monkeypatch, advance_workspace)
    sim.inject("nic.delete", "server_error", count=500)
    sweep_every = int(settings.PORTAL_RECONCILE_INTERVAL)
    with time_machine.travel(timezone.now(), tick=True) as clock:
        workspace_delete(user=cast.researcher, workspace=ws, now=timezone.now())
        for second in range(0, 30 * 60, 10):  # half an hour, beat's sweep every minute
            broker.run_due()
            if second % sweep_every == 0:
                reconcile_workspaces()
            clock.shift(timedelta(seconds=10))
        broker.run_due()

    deletes = _nic_deletes(sim)
    assert len(deletes) <= settings.WORKSPACE_RETRY_MAX + 1
    gaps = [b["t"] - a["t"] for a, b in zip(deletes, deletes[1:], strict=False)]
    assert min(gaps) >= 1, f"DELETEs in pairs: {gaps}"
    ws.refresh_from_db()
    assert ws.status == Status.FAILED and ws.error_message == AZURE_500
    assert ws.events.get(to_status=Status.FAILED).detail["message"] == AZURE_500
    assert broker.waiting() == []


def test_the_sweep_starts_no_second_chain_while_one_waits_for_its_retry(
    cast, sim, azure_once, monkeypatch
):
    ws = _running(cast)
    broker = Broker(monkeypatch, advance_workspace)
    sim.inject("nic.delete", "unavailable", count=50, retry_after=300)
    with time_machine.travel(timezone.now(), tick=True) as clock:
        workspace_delete(user=cast.researcher, workspace=ws, now=timezone.now())
        broker.run_due()
        clock.shift(timedelta(seconds=1))  # the VM's DELETE is done
        broker.run_due()  # the first DELETE of the NIC: Azure says come back in 5 minutes
        assert len(_nic_deletes(sim)) == 1 and len(broker.waiting()) == 1
        clock.shift(timedelta(seconds=200))
        assert reconcile_workspaces() == 0
        assert len(broker.waiting()) == 1


def test_a_chain_whose_operation_a_person_replaced_stops_quietly(
    cast, sim, azure_once, monkeypatch
):
    sim.set_quota("eastus", "standardNCADSA100v4Family", 0)
    broker = Broker(monkeypatch, advance_workspace)
    sim.inject("nic.delete", "unavailable", count=50, retry_after=600)
    with time_machine.travel(timezone.now(), tick=True) as clock:
        ws = workspace_request(
            user=cast.researcher,
            team=cast.team,
            name="waits",
            offering=OfferingFactory(),
            ssh_public_key=SSH_KEY,
            request_key=uuid.uuid4(),
            now=timezone.now(),
        )
        broker.run_due()  # no quota: it waits, and checks again in 5 minutes
        assert Workspace.objects.get(pk=ws.pk).waiting_reason
        clock.shift(timedelta(seconds=10))
        workspace_delete(user=cast.researcher, workspace=ws, now=timezone.now())
        broker.run_due()
        clock.shift(timedelta(seconds=1))
        broker.run_due()  # the delete's first NIC DELETE: Azure says come back in 10 minutes
        assert len(_nic_deletes(sim)) == 1
        clock.shift(timedelta(seconds=300))
        broker.run_due()  # the waiting chain's check is due: its operation is gone
        assert len(_nic_deletes(sim)) == 1
        assert len(broker.waiting()) == 1


def test_chains_the_broker_lost_are_taken_over_and_their_attempts_still_count(
    cast, sim, azure_once, monkeypatch, settings
):
    settings.WORKSPACE_RETRY_MAX = 3
    ws = _running(cast)
    broker = Broker(monkeypatch, advance_workspace)
    sim.inject("nic.delete", "server_error", count=100)
    with time_machine.travel(timezone.now(), tick=True) as clock:
        workspace_delete(user=cast.researcher, workspace=ws, now=timezone.now())
        for _ in range(30):
            broker.run_due()
            broker.lose()  # every retry is lost: only the sweep carries the operation on
            clock.shift(timedelta(seconds=60))
            reconcile_workspaces()

    assert len(_nic_deletes(sim)) == settings.WORKSPACE_RETRY_MAX + 1
    ws.refresh_from_db()
    assert ws.status == Status.FAILED and ws.error_message == AZURE_500


def test_the_pool_sweep_starts_no_second_chain_while_one_waits_for_its_retry(
    cast,
    cluster,  # noqa: F811 (the fixture imported above)
    sim,
    azure_once,
    monkeypatch,
):
    pool = make_pool(cast, cluster)
    broker = Broker(monkeypatch, advance_pool)
    sim.inject("aks.pool.delete", "unavailable", count=50, retry_after=300)
    with time_machine.travel(timezone.now(), tick=True) as clock:
        cluster_services.pool_delete(actor=cast.platform_admin, pool=pool, now=timezone.now())
        broker.run_due()  # the pool's DELETE: Azure says come back in 5 minutes
        assert len(_pool_deletes(sim, pool)) == 1 and len(broker.waiting()) == 1
        clock.shift(timedelta(seconds=200))
        assert reconcile_pools() == 0
        assert len(broker.waiting()) == 1


def test_a_pool_delete_azure_keeps_refusing_fails_after_the_bound_across_lost_chains(
    cast,
    cluster,  # noqa: F811 (the fixture imported above)
    sim,
    azure_once,
    monkeypatch,
    settings,
):
    settings.WORKSPACE_RETRY_MAX = 3
    pool = make_pool(cast, cluster)
    broker = Broker(monkeypatch, advance_pool)
    sim.inject("aks.pool.delete", "server_error", count=100)
    with time_machine.travel(timezone.now(), tick=True) as clock:
        cluster_services.pool_delete(actor=cast.platform_admin, pool=pool, now=timezone.now())
        for _ in range(30):
            broker.run_due()
            broker.lose()
            clock.shift(timedelta(seconds=60))
            reconcile_pools()

    assert len(_pool_deletes(sim, pool)) == settings.WORKSPACE_RETRY_MAX + 1
    pool = NodePool.objects.get(pk=pool.pk)
    assert pool.status == PoolStatus.FAILED and pool.error_message == AZURE_500
