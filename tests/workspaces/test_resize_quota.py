"""A resize counts its target against the team's GPU quota and budget from the moment it is
accepted until it ends (issue 28, finding 3): no request or other resize takes the GPUs it grows
into, and 50 racing resizes and requests never overshoot the quota."""

import uuid
from decimal import Decimal
from fractions import Fraction

import pytest
from django.db import connection
from django.utils import timezone

from teams.models import GpuQuota, Membership, Team
from tests.factories import SSH_KEY, OfferingFactory, UserFactory, WorkspaceFactory
from tests.races import race
from workspaces import resizes
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace
from workspaces.quota import quota_check, team_gpus_in_use
from workspaces.requests import JustificationNeeded, WorkspaceActionError
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)

ONE_A100, TWO_A100 = "Standard_NC24ads_A100_v4", "Standard_NC48ads_A100_v4"


@pytest.fixture
def offerings():
    one = OfferingFactory()
    OfferingFactory(
        vm_size=TWO_A100, gpu_count=2, vcpus=48, memory_gib=Decimal(440),
        price_per_hour=Decimal("7.3460"),
    )  # fmt: skip
    return one


@pytest.fixture
def worker_behind(monkeypatch):
    """The worker has not picked up the queued operations yet: what a resize or request holds
    between being accepted and being carried out (a busy queue, a slow Azure)."""
    queued: list = []
    monkeypatch.setattr(
        "workspaces.transitions.advance_queue", lambda pk, claim="": queued.append(pk)
    )
    monkeypatch.setattr("workspaces.requests.advance_queue", lambda pk, claim="": queued.append(pk))
    return queued


def _running(team, owner, name=None):
    return WorkspaceFactory(
        team=team, owner=owner, name=name or f"run-{uuid.uuid4().hex[:6]}",
        status=Status.RUNNING, gpu_model="A100", gpu_count=1,
    )  # fmt: skip


def _request(team, user, offering, justification=""):
    return workspace_request(
        user=user,
        team=team,
        name=f"req-{uuid.uuid4().hex[:8]}",
        offering=offering,
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        justification=justification,
        now=timezone.now(),
    )


def test_a_resize_under_way_holds_its_target_so_a_new_request_needs_approval(
    cast, offerings, worker_behind
):
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=2)
    ws = _running(cast.team, cast.researcher)
    resizes.workspace_resize(
        user=cast.researcher, workspace=ws, target=TWO_A100, now=timezone.now()
    )
    assert Workspace.objects.get(pk=ws.pk).status == Status.STOPPING

    assert team_gpus_in_use(team_ids=[cast.team.pk])[cast.team.pk]["A100"] == 2
    with pytest.raises(JustificationNeeded, match="has 0 of its 2 left"):
        _request(cast.team, cast.teammate, offerings)
    # A second resize of another VM into the same GPUs is refused too.
    other = _running(cast.team, cast.teammate)
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=3)
    with pytest.raises(WorkspaceActionError, match="has 0 of its 3 left"):
        resizes.workspace_resize(
            user=cast.teammate, workspace=other, target=TWO_A100, now=timezone.now()
        )


def test_a_resize_under_way_counts_its_target_price_against_the_budget(
    cast, offerings, worker_behind
):
    ws = _running(cast.team, cast.researcher)
    resizes.workspace_resize(
        user=cast.researcher, workspace=ws, target=TWO_A100, now=timezone.now()
    )
    check = quota_check(
        team=cast.team, user=cast.teammate, gpu_model="A100", gpus=1,
        price_per_hour=Decimal("3.6730"), now=timezone.now(),
    )  # fmt: skip
    # 3.6730 asked, plus the 7.3460 - 3.6730 the stopping VM grows into.
    assert check.price_per_hour == Decimal("7.3460")


def test_the_target_stops_counting_once_the_resize_ends(cast, offerings, worker_behind):
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=2)
    ws = _running(cast.team, cast.researcher)
    resizes.workspace_resize(
        user=cast.researcher, workspace=ws, target=TWO_A100, now=timezone.now()
    )
    # Azure refused before the deallocate: the VM runs on at its size, the target is let go.
    from workspaces.backends.vm_resize import refuse_before_deallocate

    refuse_before_deallocate(Workspace.objects.get(pk=ws.pk), "restricted", timezone.now())
    ws.refresh_from_db()
    assert (ws.status, ws.resize_target) == (Status.RUNNING, {})
    assert team_gpus_in_use(team_ids=[cast.team.pk])[cast.team.pk]["A100"] == Fraction(1)


def test_fifty_concurrent_resizes_and_requests_never_overshoot_the_quota(
    cast, sim, offerings, worker_behind
):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serialises writers; the race needs PostgreSQL's concurrent sessions")
    users = [UserFactory(username=f"racer{i}") for i in range(50)]
    for trial in range(5):
        team = Team.objects.create(name=f"Race {trial}", slug=f"race-{trial}")
        Membership.objects.bulk_create([Membership(team=team, user=u) for u in users])
        # 10 running 1-A100 VMs of a quota of 12: 2 GPUs left for 10 resizes to 2 A100s (+1
        # each) and 40 requests for 1 A100.
        GpuQuota.objects.create(team=team, gpu_model="A100", gpus=12)
        running = [_running(team, users[i]) for i in range(10)]

        def resize(ws=None):
            def call():
                try:
                    resizes.workspace_resize(
                        user=ws.owner, workspace=ws, target=TWO_A100, now=timezone.now()
                    )
                    return "accepted"
                except WorkspaceActionError:
                    return "refused"

            return call

        def request(user=None, team=team):
            def call():
                ws = _request(team, user, offerings, justification="race")
                return "accepted" if ws.status != Status.PENDING_APPROVAL else "refused"

            return call

        calls = [resize(ws) for ws in running] + [request(u) for u in users[10:]]
        results = race(calls)
        assert len(results) == 50
        assert results.count("accepted") == 2, results
        assert team_gpus_in_use(team_ids=[team.pk])[team.pk]["A100"] == 12
