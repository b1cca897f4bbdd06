"""Metering from state changes, month-to-date spend, and the monthly budget at request time."""

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.urls import reverse

from billing.models import UsageInterval
from billing.month_spend import team_spend
from live.stamps import AfterCommit
from teams.models import Team
from tests.factories import SSH_KEY, OfferingFactory, WorkspaceFactory
from workspaces import states
from workspaces.backends.vm_request import workspace_request
from workspaces.requests import JustificationNeeded
from workspaces.selectors import team_budget
from workspaces.states import Status

pytestmark = pytest.mark.django_db
NOV_1 = datetime(2026, 11, 1, tzinfo=UTC)


def _walk(workspace, path, start, step=timedelta(hours=1)):
    """Move the workspace along ``path`` of statuses, one ``step`` apart from ``start``."""
    now = start
    for expected, to in zip(path, path[1:], strict=False):
        assert states.transition(workspace_id=workspace.pk, expected=expected, to=to, now=now)
        now += step
    return now


def test_billable_time_opens_and_closes_one_interval(cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, price_per_hour=Decimal("10"))
    path = [Status.REQUESTED, Status.PROVISIONING, Status.RUNNING, Status.STOPPING]
    _walk(ws, [*path, Status.STOPPED], NOV_1 + timedelta(days=1), step=timedelta(hours=2))
    interval = UsageInterval.objects.get(workspace=ws, meter="compute")
    # From Running (Azure said the create succeeded) until Stopped: not while provisioning.
    assert interval.ended_at - interval.started_at == timedelta(hours=4)
    assert interval.price_per_hour == Decimal("10")
    disk = UsageInterval.objects.get(workspace=ws, meter="disk")  # from the first run, kept
    assert disk.started_at == NOV_1 + timedelta(days=1, hours=2) and disk.ended_at is None


def test_spend_counts_only_this_month_and_runs_up_to_now(cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, price_per_hour=Decimal("2.5"))
    # Running since 12 hours before the month began, still running.
    running = [Status.REQUESTED, Status.PROVISIONING, Status.RUNNING]
    _walk(ws, running, NOV_1 - timedelta(hours=12), step=timedelta(0))
    now = NOV_1 + timedelta(days=2)
    spend = team_spend(team_ids=[cast.team.pk], now=now)[cast.team.pk]
    assert spend.spent == Decimal("120.00")  # 48 h x $2.50, none of October's 12 h
    assert spend.burn_per_hour == Decimal("2.5")


def test_the_budget_sentence_says_what_is_left_and_when_it_runs_out(cast):
    Team.objects.filter(pk=cast.team.pk).update(monthly_budget=Decimal("5000"))
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, price_per_hour=Decimal("10"))
    _walk(ws, [Status.REQUESTED, Status.PROVISIONING, Status.RUNNING], NOV_1, step=timedelta(0))
    now = NOV_1 + timedelta(days=10)  # $2,400 spent, $2,600 left at $240/day: 10.8 days
    team = Team.objects.get(pk=cast.team.pk)
    budget = team_budget(teams=[team], now=now)[team.pk]
    assert budget.sentence() == (
        "$2,600.00 of the $5,000.00 November budget is left;"
        " at the current rate that lasts until 21 Nov."
    )


def _request(cast, offering, justification=""):
    return workspace_request(
        user=cast.researcher,
        team=cast.team,
        name="train",
        offering=offering,
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        justification=justification,
        now=NOV_1 + timedelta(days=10),
    )


def test_a_request_that_would_exhaust_the_budget_waits_for_approval(cast):
    Team.objects.filter(pk=cast.team.pk).update(monthly_budget=Decimal("1000"))
    offering = OfferingFactory(price_per_hour=Decimal("3.673"))  # ~$1,778 to month end
    with pytest.raises(JustificationNeeded, match="budget runs out on"):
        _request(cast, offering)
    ws = _request(cast, offering, justification="grant money arrives next week")
    assert ws.status == Status.PENDING_APPROVAL
    assert "budget runs out" in ws.quota_request.over_quota[0]


def test_a_request_inside_the_budget_goes_ahead(cast, django_capture_on_commit_callbacks):
    Team.objects.filter(pk=cast.team.pk).update(monthly_budget=Decimal("5000"))
    with django_capture_on_commit_callbacks() as callbacks:
        ws = _request(cast, OfferingFactory(price_per_hour=Decimal("3.673")))
    tasks = [c for c in callbacks if not isinstance(c, AfterCommit)]  # live pages' bumps aside
    assert ws.status == Status.REQUESTED and len(tasks) == 1


def test_the_request_form_shows_the_budget(client, cast):
    Team.objects.filter(pk=cast.team.pk).update(monthly_budget=Decimal("5000"))
    OfferingFactory()
    client.force_login(cast.researcher)
    with time_machine.travel(NOV_1 + timedelta(days=3), tick=False):
        page = client.get(reverse("workspaces:request")).content.decode()
    assert "$5,000.00 of the $5,000.00 November budget is left" in page
