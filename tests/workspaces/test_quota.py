"""GPU quota, the per-member cap, and approval of requests above them."""

import uuid
from datetime import timedelta
from decimal import Decimal
from fractions import Fraction

import pytest
from django.core import mail
from django.db import connections
from django.urls import reverse
from django.utils import timezone

from live.stamps import AfterCommit
from notifications.models import Notice
from teams.models import AuditEntry, Decision, GpuQuota, Membership, QuotaRequest, Team
from teams.quota_requests import (
    DecisionError,
    quota_request_approve,
    quota_request_reject,
    quota_requests_expire,
)
from tests.factories import SSH_KEY, OfferingFactory, UserFactory, WorkspaceFactory
from tests.races import race
from workspaces.actions import workspace_start, workspace_stop
from workspaces.backends.vm_request import workspace_request
from workspaces.gpus import mig_slices
from workspaces.models import Workspace
from workspaces.requests import JustificationNeeded, WorkspaceActionError
from workspaces.selectors import quota_check, team_gpu_usage
from workspaces.states import Status


def _request(cast, user=None, justification="", team=None, offering=None):
    return workspace_request(
        user=user or cast.researcher,
        team=team or cast.team,
        name=f"big-train-{uuid.uuid4().hex[:6]}",  # unique per team
        offering=offering or OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        justification=justification,
        now=timezone.now(),
    )


def _set_a100_quota(team, gpus):
    GpuQuota.objects.update_or_create(team=team, gpu_model="A100", defaults={"gpus": gpus})


@pytest.mark.django_db
def test_above_the_gpu_quota_needs_a_reason_and_creates_nothing_without_one(cast):
    _set_a100_quota(cast.team, 0)
    with pytest.raises(JustificationNeeded, match="has 0 of its 0 left"):
        _request(cast)
    assert not Workspace.objects.exists() and not QuotaRequest.objects.exists()


@pytest.mark.django_db
def test_above_the_gpu_quota_waits_for_approval_and_tells_people(
    cast, django_capture_on_commit_callbacks
):
    _set_a100_quota(cast.team, 0)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        ws = _request(cast, justification="Paper deadline on Friday")
    assert ws.status == Status.PENDING_APPROVAL
    qr = ws.quota_request
    assert qr.decision == Decision.PENDING and qr.justification == "Paper deadline on Friday"
    assert "A100" in qr.over_quota[0]
    work = [c for c in callbacks if not isinstance(c, AfterCommit)]  # live pages' bumps aside
    assert len(work) == 1  # the notices, and no provisioning task
    assert Notice.objects.filter(user=cast.researcher).exists()
    assert Notice.objects.filter(user=cast.platform_admin).exists()
    assert {m.to[0] for m in mail.outbox} >= {"alice@example.org", "pat@example.org"}


@pytest.mark.django_db(transaction=True)
def test_stopped_workspaces_hold_no_gpus(cast, sim):
    _set_a100_quota(cast.team, 1)
    first = Workspace.objects.get(pk=_request(cast).pk)
    workspace_stop(user=cast.researcher, workspace=first, now=timezone.now())
    second = _request(cast)
    assert Workspace.objects.get(pk=second.pk).status == Status.RUNNING


@pytest.mark.django_db(transaction=True)
def test_starting_a_stopped_vm_is_refused_while_its_gpus_are_taken(cast, sim):
    _set_a100_quota(cast.team, 1)
    first = Workspace.objects.get(pk=_request(cast).pk)
    workspace_stop(user=cast.researcher, workspace=first, now=timezone.now())
    _request(cast, user=cast.teammate)  # takes the team's only A100 meanwhile
    first.refresh_from_db()
    with pytest.raises(WorkspaceActionError, match="has 0 of its 1 left"):
        workspace_start(user=cast.researcher, workspace=first, now=timezone.now())
    first.refresh_from_db()
    assert first.status == Status.STOPPED
    assert not first.events.filter(to_status=Status.STARTING).exists()


@pytest.mark.django_db(transaction=True)
def test_starting_is_refused_when_the_budget_would_not_last_the_month(cast, sim):
    ws = Workspace.objects.get(pk=_request(cast).pk)
    workspace_stop(user=cast.researcher, workspace=ws, now=timezone.now())
    Team.objects.filter(pk=cast.team.pk).update(monthly_budget=1)
    ws.refresh_from_db()
    with pytest.raises(WorkspaceActionError, match="budget runs out"):
        workspace_start(user=cast.researcher, workspace=ws, now=timezone.now())


@pytest.mark.django_db
def test_starting_ignores_the_per_member_cap_it_already_counts_in(cast, sim):
    Team.objects.filter(pk=cast.team.pk).update(max_workspaces_per_user=1)
    ws = WorkspaceFactory(
        team=cast.team, owner=cast.researcher, status=Status.STOPPED, gpu_model="A100", gpu_count=1
    )
    workspace_start(user=cast.researcher, workspace=ws, now=timezone.now())
    assert Workspace.objects.get(pk=ws.pk).status == Status.STARTING


def _mig(cast, profile, status=Status.RUNNING):
    return WorkspaceFactory(
        team=cast.team,
        owner=cast.researcher,
        kind="mig",
        status=status,
        gpu_model="A100",
        mig_profile=profile,
        gpu_slices=mig_slices(profile),
    )


@pytest.mark.django_db
def test_mig_slices_count_as_sevenths_of_a_gpu(cast):
    _set_a100_quota(cast.team, 1)
    _mig(cast, "3g.40gb")
    _mig(cast, "3g.40gb")
    _mig(cast, "1g.10gb", status=Status.STOPPED)  # holds nothing
    usage = team_gpu_usage(team_ids=[cast.team.pk])[cast.team.pk]["A100"]
    assert usage == Fraction(6, 7)

    def check(slices):
        return quota_check(
            team=cast.team,
            user=cast.teammate,
            gpu_model="A100",
            gpus=Fraction(slices, 7),
            price_per_hour=Decimal("0.5"),
            now=timezone.now(),
        )

    assert check(1).fits
    assert check(2).over == ["It needs 2/7 A100 GPU; Vision Lab has 1/7 of its 1 left."]


@pytest.mark.django_db
def test_a_full_gpu_of_slices_leaves_no_room_for_a_vm(cast):
    _set_a100_quota(cast.team, 1)
    _mig(cast, "3g.40gb")
    _mig(cast, "4g.40gb")
    with pytest.raises(JustificationNeeded, match="has 0 of its 1 left"):
        _request(cast)


@pytest.mark.django_db
def test_the_team_page_shows_slices_as_fractions(client, cast):
    _mig(cast, "1g.10gb")
    _mig(cast, "2g.20gb")
    client.force_login(cast.team_admin)
    page = client.get(reverse("team-detail", args=[cast.team.slug])).content.decode()
    assert ">3/7<" in page


@pytest.mark.django_db
def test_the_per_member_cap_counts_held_workspaces(cast):
    Team.objects.filter(pk=cast.team.pk).update(max_workspaces_per_user=1)
    WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.STOPPED)
    with pytest.raises(JustificationNeeded, match="allows 1 per member"):
        _request(cast)


@pytest.mark.django_db(transaction=True)
def test_approval_provisions_and_is_audited_and_told(cast, sim):
    _set_a100_quota(cast.team, 0)
    ws = _request(cast, justification="deadline")
    quota_request_approve(
        quota_request_id=ws.quota_request.pk,
        actor=cast.platform_admin,
        comment="ok for a week",
        now=timezone.now(),
    )
    ws.refresh_from_db()
    assert ws.status == Status.RUNNING
    approved = ws.events.get(to_status=Status.REQUESTED)
    assert approved.actor == cast.platform_admin and "ok for a week" in approved.reason
    entry = AuditEntry.objects.get(action="quota_request.approved")
    assert entry.actor == cast.platform_admin and entry.team == cast.team
    assert entry.before == {"decision": "pending"}
    assert Notice.objects.filter(user=cast.researcher, text__contains="approved").exists()


@pytest.mark.django_db
def test_a_second_decision_is_refused_with_a_clear_message(cast):
    _set_a100_quota(cast.team, 0)
    ws = _request(cast, justification="deadline")
    kwargs = {"quota_request_id": ws.quota_request.pk, "actor": cast.platform_admin}
    quota_request_reject(comment="use T4", now=timezone.now(), **kwargs)
    with pytest.raises(DecisionError, match="already rejected by pat"):
        quota_request_approve(comment="", now=timezone.now(), **kwargs)
    ws.refresh_from_db()
    assert ws.status == Status.DELETED
    assert AuditEntry.objects.count() == 1


@pytest.mark.django_db
def test_unanswered_requests_expire_and_the_requester_is_told(cast):
    _set_a100_quota(cast.team, 0)
    ws = _request(cast, justification="deadline")
    later = timezone.now() + timedelta(days=8)
    assert quota_requests_expire(now=later) == 1
    ws.refresh_from_db()
    assert ws.status == Status.DELETED and ws.quota_request.decision == Decision.EXPIRED
    with pytest.raises(DecisionError, match="already expired"):
        quota_request_approve(
            quota_request_id=ws.quota_request.pk, actor=cast.platform_admin, comment="", now=later
        )


@pytest.mark.django_db
def test_approving_after_the_expiry_time_is_refused(cast):
    _set_a100_quota(cast.team, 0)
    ws = _request(cast, justification="deadline")
    with pytest.raises(DecisionError, match="has expired"):
        quota_request_approve(
            quota_request_id=ws.quota_request.pk,
            actor=cast.platform_admin,
            comment="",
            now=timezone.now() + timedelta(days=30),
        )


@pytest.mark.django_db
def test_the_request_form_shows_the_quota_left(client, cast):
    OfferingFactory()
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:request")).content.decode()
    assert "4 of 4 A100 GPUs left" in page


@pytest.mark.django_db
@pytest.mark.parametrize(
    "who,expected",
    [("platform_admin", 200), ("team_admin", 403), ("researcher", 403), ("outsider", 403)],
)
def test_only_platform_admins_see_the_queue(client, cast, who, expected):
    client.force_login(getattr(cast, who))
    assert client.get(reverse("approvals")).status_code == expected


@pytest.mark.django_db
def test_a_team_admin_cannot_approve_a_request(client, cast):
    _set_a100_quota(cast.team, 0)
    ws = _request(cast, justification="deadline")
    client.force_login(cast.team_admin)
    url = reverse("approval-decide", kwargs={"pk": ws.quota_request.pk, "decision": "approve"})
    assert client.post(url).status_code == 403
    assert QuotaRequest.objects.get(pk=ws.quota_request.pk).decision == Decision.PENDING


@pytest.mark.django_db
def test_one_click_approval_by_htmx_answers_with_the_decided_row(client, cast):
    _set_a100_quota(cast.team, 0)
    ws = _request(cast, justification="deadline")
    client.force_login(cast.platform_admin)
    url = reverse("approval-decide", kwargs={"pk": ws.quota_request.pk, "decision": "reject"})
    first = client.post(url, {"comment": "too big"}, HTTP_HX_REQUEST="true").content.decode()
    again = client.post(url, {"comment": "x"}, HTTP_HX_REQUEST="true").content.decode()
    assert "Rejected" in first and "too big" in first and "<html" not in first
    assert "already rejected" in again


def _pending_requests(cast, count):
    offering = OfferingFactory()
    _set_a100_quota(cast.team, 0)
    now = timezone.now()
    users = [cast.researcher, cast.teammate, cast.team_admin]
    workspaces = Workspace.objects.bulk_create(
        [
            WorkspaceFactory.build(
                team=cast.team if i % 2 else cast.other_team,
                owner=users[i % 3] if i % 2 else cast.outsider,
                status=Status.PENDING_APPROVAL,
                gpu_model="A100",
                gpu_count=1,
            )
            for i in range(count)
        ]
    )
    QuotaRequest.objects.bulk_create(
        [
            QuotaRequest(
                team=w.team,
                requester=w.owner,
                workspace=w,
                summary=f"{offering.vm_size} in eastus",
                over_quota=["over"],
                justification="why",
                price_per_hour=offering.price_per_hour,
                created_at=now,
                expires_at=now + timedelta(days=7),
            )
            for w in workspaces
        ]
    )


@pytest.mark.django_db
@pytest.mark.parametrize("url_name", ["approvals", "workspaces:request"])
def test_pages_make_the_same_number_of_queries_for_10_and_1000_requests(client, cast, url_name):
    from django.test.utils import CaptureQueriesContext

    client.force_login(cast.platform_admin)
    Membership.objects.create(team=cast.team, user=cast.platform_admin)
    counts = []
    for total in (10, 1000):
        _pending_requests(cast, total - QuotaRequest.objects.count())
        with CaptureQueriesContext(connections["default"]) as queries:
            assert client.get(reverse(url_name)).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]


def _race_once(team, users, offering, results):
    def one(user):
        return lambda: (
            workspace_request(
                user=user,
                team=team,
                name=f"race-{uuid.uuid4().hex[:8]}",  # the race is for the GPU
                offering=offering,
                ssh_public_key=SSH_KEY,
                request_key=uuid.uuid4(),
                justification="race",
                now=timezone.now(),
            ).status
        )

    results.extend(race([one(u) for u in users]))


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_requests_for_the_last_gpu_never_overshoot(cast, sim):
    # Room in the emulated subscription for every trial's one VM: only the team quota binds.
    sim.set_quota("eastus", "standardNCADSA100v4Family", 10_000)
    sim.set_quota("eastus", "cores", 10_000)
    sim.set_capacity("eastus", "Standard_NC24ads_A100_v4", 100)
    offering = OfferingFactory()
    users = [UserFactory(username=f"racer{i}") for i in range(50)]
    overshoots = 0
    # PostgreSQL runs the fifty sessions at once: twenty trials give the race its chances.
    # SQLite (the embedded default) serialises writers, so no trial can overshoot there; two
    # show that fifty writers waiting on its lock each get an answer, not "database is locked".
    trials = 20 if connections["default"].vendor == "postgresql" else 2
    for trial in range(trials):
        team = Team.objects.create(name=f"Race {trial}", slug=f"race-{trial}")
        GpuQuota.objects.create(team=team, gpu_model="A100", gpus=1)
        Membership.objects.bulk_create([Membership(team=team, user=u) for u in users])
        results: list[str] = []
        _race_once(team, users, offering, results)
        assert len(results) == 50
        admitted = Workspace.objects.filter(team=team).exclude(status=Status.PENDING_APPROVAL)
        overshoots += max(0, admitted.count() - 1)
        assert results.count(Status.PENDING_APPROVAL) == 49
    assert overshoots == 0
