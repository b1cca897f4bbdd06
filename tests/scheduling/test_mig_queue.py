"""MIG slices on a full node pool wait in the fair queue (scheduling.room, clusters.pool_room)
instead of sitting Pending in Kubernetes' own order: the real kubernetes client against the
emulator's cluster, a pass run at a given time."""

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.utils import timezone

from billing.models import UsageInterval
from clusters import aks_services
from clusters import services as cluster_services
from scheduling.queue import queue_pass
from scheduling.selectors import queue_place
from tests.clusters.test_aks_workspaces import cluster, make_pool  # noqa: F401 (a fixture)
from tests.factories import WorkspaceFactory
from workspaces.actions import workspace_delete
from workspaces.models import Workspace
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2031, 3, 4, 9, 0, tzinfo=UTC)


def _slice(cast, team, user, name, **kwargs):
    ws = aks_services.workspace_request_mig(
        user=user,
        team=team,
        name=name,
        profile="1g.10gb",
        gpu_model="A100",
        request_key=uuid.uuid4(),
        now=timezone.now(),
        **kwargs,
    )
    return Workspace.objects.get(pk=ws.pk)


def _used_gpu_hours(team, hours):
    old = WorkspaceFactory(team=team, gpu_model="A100", gpu_count=1, status=Status.DELETED)
    UsageInterval.objects.create(
        workspace=old,
        team=team,
        kind=old.kind,
        sku=old.vm_size,
        region=old.region,
        started_at=T0 - timedelta(hours=2 + hours),
        ended_at=T0 - timedelta(hours=2),
        price_per_hour=Decimal("3.6730"),
    )


def test_a_full_pool_queues_slices_and_a_freed_one_goes_to_the_fairer_team(client, cast, cluster):  # noqa: F811
    """One A100 node: 7 slices of 1g.10gb, all held by Vision. Vision, which used 20
    GPU-hours this morning, queues one more; then NLP, which used none. One slice is deleted:
    the pass gives it to NLP, not to Vision who asked first; Vision waits, first in line.
    NLP asks through the API ("queue_when_full"), Vision through the service."""
    cluster_services.cluster_team_set(
        actor=cast.platform_admin, cluster=cluster, team=cast.other_team, now=timezone.now()
    )
    cast.team.max_workspaces_per_user = 10
    cast.team.save(update_fields=["max_workspaces_per_user"])
    make_pool(cast, cluster)
    _used_gpu_hours(cast.team, 20)
    with time_machine.travel(T0, tick=True):  # the emulator's operations take time
        held = [_slice(cast, cast.team, cast.researcher, f"held-{i}") for i in range(7)]
        assert {w.status for w in held} == {Status.RUNNING}
        vision = _slice(cast, cast.team, cast.researcher, "vision-wait", queue_when_full=True)
        client.force_login(cast.outsider)  # NLP asks through the API, the form's service
        body = {"kind": "mig", "team": "nlp", "name": "nlp-wait", "mig_profile": "1g.10gb"}
        asked = client.post(
            "/api/v1/workspaces",
            {**body, "queue_when_full": True},
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
        )
        assert asked.status_code == 201, asked.content
        nlp = Workspace.objects.get(name="nlp-wait")
        for ws in (vision, nlp):
            assert ws.status == Status.QUEUED
            assert "free 1g.10gb slice on pool mig1g" in ws.waiting_reason
        # No pod was made for either: Kubernetes' scheduler does not choose between them.
        assert queue_place(workspace=vision, now=timezone.now()).position == 2
        workspace_delete(user=cast.researcher, workspace=held[0], now=timezone.now())
        queue_pass(now=timezone.now())
        nlp.refresh_from_db()
        vision.refresh_from_db()
        assert nlp.status == Status.RUNNING
        assert vision.status == Status.QUEUED
        assert queue_place(workspace=vision, now=timezone.now()).position == 1
        # The pool is full again: a later pass leaves Vision's slice where it is.
        assert queue_pass(now=timezone.now() + timedelta(minutes=1)).admitted == []
        vision.refresh_from_db()
        assert vision.status == Status.QUEUED
