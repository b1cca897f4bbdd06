"""The fair queue: a request above the team's GPU quota waits queued instead of asking for
approval, holds no GPUs, and starts by itself when room appears; a stopped VM can queue to
start; what the queue started is the owner's to claim within a window."""

import uuid
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from common.permissions import ActionNotAllowed
from notifications.models import Notice
from scheduling.claims import claims_expire, queue_claim
from scheduling.models import QueueEntry
from scheduling.queue import queue_pass, queue_start
from teams.models import GpuQuota, QuotaRequest
from tests.factories import SSH_KEY, OfferingFactory
from workspaces.actions import workspace_delete, workspace_start, workspace_stop
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace
from workspaces.requests import WorkspaceActionError
from workspaces.selectors import team_gpu_usage
from workspaces.states import Status


def _request(cast, user=None, queue=True):
    return Workspace.objects.get(
        pk=workspace_request(
            user=user or cast.researcher,
            team=cast.team,
            name=f"train-{uuid.uuid4().hex[:6]}",
            offering=OfferingFactory(),
            ssh_public_key=SSH_KEY,
            request_key=uuid.uuid4(),
            now=timezone.now(),
            queue_when_full=queue,
        ).pk
    )


def _one_a100(cast):
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=1)


@pytest.mark.django_db(transaction=True)
def test_a_request_above_quota_waits_in_the_queue_holding_no_gpus(cast, sim):
    _one_a100(cast)
    first = _request(cast)
    second = _request(cast, user=cast.teammate)
    assert first.status == Status.RUNNING
    assert second.status == Status.QUEUED
    assert "has 0 of its 1 left" in second.waiting_reason
    assert not QuotaRequest.objects.exists()  # no platform admin is asked
    assert team_gpu_usage(team_ids=[cast.team.pk])[cast.team.pk]["A100"] == 1


@pytest.mark.django_db(transaction=True)
def test_without_the_queue_a_request_above_quota_still_needs_a_reason(cast, sim):
    _one_a100(cast)
    _request(cast)
    with pytest.raises(WorkspaceActionError, match="Say why"):
        _request(cast, user=cast.teammate, queue=False)


@pytest.mark.django_db(transaction=True)
def test_a_stopped_workspace_frees_its_gpu_for_the_next_in_the_queue(cast, sim):
    _one_a100(cast)
    first = _request(cast)
    second = _request(cast, user=cast.teammate)
    workspace_stop(user=cast.researcher, workspace=first, now=timezone.now())
    second.refresh_from_db()
    assert second.status == Status.RUNNING
    assert second.events.filter(from_status=Status.QUEUED, to_status=Status.REQUESTED).count() == 1
    # Its owner is told, with a window to claim it.
    entry = QueueEntry.objects.get(workspace=second)
    assert entry.claim_by is not None and entry.claimed_at is None
    notice = Notice.objects.get(user=cast.teammate, about=f"queue-claim:{second.pk}")
    assert "Claim it by" in notice.text
    assert any(second.name in m.subject for m in mail.outbox)


@pytest.mark.django_db(transaction=True)
def test_a_quota_increase_lets_the_next_pass_start_it(cast, sim):
    _one_a100(cast)
    _request(cast)
    waiting = _request(cast, user=cast.teammate)
    assert queue_pass(now=timezone.now()).admitted == []
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=2)
    assert queue_pass(now=timezone.now()).admitted == [waiting.pk]
    waiting.refresh_from_db()
    assert waiting.status == Status.RUNNING


@pytest.mark.django_db(transaction=True)
def test_a_stopped_vm_queues_to_start_and_starts_when_room_appears(cast, sim):
    _one_a100(cast)
    mine = _request(cast)
    workspace_stop(user=cast.researcher, workspace=mine, now=timezone.now())
    theirs = _request(cast, user=cast.teammate)  # takes the only A100 meanwhile
    mine.refresh_from_db()
    with pytest.raises(WorkspaceActionError):
        workspace_start(user=cast.researcher, workspace=mine, now=timezone.now())
    queue_start(user=cast.researcher, workspace=mine, now=timezone.now())
    assert Workspace.objects.get(pk=mine.pk).status == Status.QUEUED
    workspace_stop(user=cast.teammate, workspace=theirs, now=timezone.now())
    mine.refresh_from_db()
    assert mine.status == Status.RUNNING
    # Started again, not created a second time.
    assert mine.events.filter(from_status=Status.QUEUED, to_status=Status.STARTING).count() == 1
    assert (
        not mine.events.filter(to_status=Status.PROVISIONING)
        .exclude(at__lt=mine.events.get(to_status=Status.QUEUED).at)
        .exists()
    )


@pytest.mark.django_db(transaction=True)
def test_an_unclaimed_start_is_stopped_again_and_a_claimed_one_is_kept(cast, sim):
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=2)
    _request(cast)
    _request(cast)
    waiting = [_request(cast, user=cast.teammate), _request(cast, user=cast.teammate)]
    for ws in Workspace.objects.filter(owner=cast.researcher):
        workspace_stop(user=cast.researcher, workspace=ws, now=timezone.now())
    claimed, unclaimed = (Workspace.objects.get(pk=w.pk) for w in waiting)
    assert claimed.status == unclaimed.status == Status.RUNNING
    queue_claim(user=cast.teammate, workspace=claimed, now=timezone.now())
    later = timezone.now() + timedelta(minutes=31)
    assert claims_expire(now=later) == [unclaimed.pk]
    assert Workspace.objects.get(pk=claimed.pk).status == Status.RUNNING
    assert Workspace.objects.get(pk=unclaimed.pk).status == Status.STOPPED
    with pytest.raises(WorkspaceActionError, match="claim window is closed"):
        queue_claim(user=cast.teammate, workspace=unclaimed, now=later)


@pytest.mark.django_db(transaction=True)
def test_deleting_a_queued_request_closes_it_and_creates_nothing(cast, sim):
    _one_a100(cast)
    _request(cast)
    waiting = _request(cast, user=cast.teammate)
    workspace_delete(user=cast.teammate, workspace=waiting, now=timezone.now())
    waiting.refresh_from_db()
    assert waiting.status == Status.DELETED
    assert not waiting.events.filter(to_status=Status.PROVISIONING).exists()


@pytest.mark.django_db(transaction=True)
def test_only_the_owner_or_an_admin_takes_it_out_of_the_queue(cast, sim):
    _one_a100(cast)
    _request(cast)
    waiting = _request(cast, user=cast.teammate)
    with pytest.raises(ActionNotAllowed):
        workspace_delete(user=cast.outsider, workspace=waiting, now=timezone.now())
    assert Workspace.objects.get(pk=waiting.pk).status == Status.QUEUED


@pytest.mark.django_db(transaction=True)
def test_a_start_azure_refuses_for_room_waits_in_the_queue_not_stopped(cast, sim):
    ws = _request(cast, queue=False)
    workspace_stop(user=cast.researcher, workspace=ws, now=timezone.now())
    ws.refresh_from_db()
    sim.inject("vm.start", "allocation_failed")  # Azure has no room when it is started
    asked = timezone.now()
    workspace_start(user=cast.researcher, workspace=ws, now=asked)
    ws.refresh_from_db()
    assert ws.status == Status.QUEUED
    assert ws.waiting_reason.startswith("Azure has no room to start Standard_NC24ads_A100_v4")
    assert ws.events.filter(from_status=Status.STARTING, to_status=Status.QUEUED).count() == 1
    assert team_gpu_usage(team_ids=[cast.team.pk]).get(cast.team.pk, {}).get("A100", 0) == 0
    assert queue_pass(now=asked + timedelta(minutes=1)).admitted == []  # not asked again yet
    assert queue_pass(now=asked + timedelta(minutes=6)).admitted == [ws.pk]
    ws.refresh_from_db()
    assert ws.status == Status.RUNNING
    # Started again, the same VM: it was created once; its owner claims it as any the queue
    # started (they may be away by now).
    assert ws.events.filter(to_status=Status.PROVISIONING).count() == 1
    assert QueueEntry.objects.get(workspace=ws).claim_by is not None
