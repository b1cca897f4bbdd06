"""Budget alerts at 50/80/100 % of a team's monthly budget, approval of new requests once the
budget is used up, and the per-team option to stop running workspaces at 100 %."""

import threading
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core import mail
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from billing.budget_alerts import budget_alerts_check
from notifications.models import Notice
from teams.models import AuditEntry, BudgetAlert, IdlePolicy, Team
from tests.factories import SSH_KEY, OfferingFactory, TeamFactory, WorkspaceFactory
from workspaces import states
from workspaces.actions import workspace_start
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace, WorkspaceEvent
from workspaces.requests import JustificationNeeded, WorkspaceActionError
from workspaces.states import Status

NOV_1 = datetime(2026, 11, 1, tzinfo=UTC)
RUN = [Status.REQUESTED, Status.PROVISIONING, Status.RUNNING]


def _budget(team, usd, stop=False):
    Team.objects.filter(pk=team.pk).update(monthly_budget=Decimal(usd), stop_at_budget=stop)


def _workspace(cast, path=RUN, at=NOV_1, team=None, name="train", price="10"):
    """A $10/hour workspace of ``team`` moved along ``path`` at ``at`` (billing from there)."""
    ws = WorkspaceFactory(
        team=team or cast.team, owner=cast.researcher, name=name, price_per_hour=Decimal(price)
    )
    for expected, to in zip(path, path[1:], strict=False):
        assert states.transition(workspace_id=ws.pk, expected=expected, to=to, now=at)
    return ws


@pytest.fixture
def check(django_capture_on_commit_callbacks):
    """Run the check at NOV_1 + ``hours`` and its after-commit emails, as the beat task does.
    Tests that stop workspaces call budget_alerts_check itself: their Stop tasks would call
    Azure, which test_stop_at_100_deallocates_through_celery_and_the_state_machine does."""

    def run(hours):
        with django_capture_on_commit_callbacks(execute=True):
            return budget_alerts_check(now=NOV_1 + timedelta(hours=hours))

    return run


def _check(hours):
    return budget_alerts_check(now=NOV_1 + timedelta(hours=hours))


def _sent():
    return sorted(BudgetAlert.objects.values_list("threshold", flat=True))


@pytest.mark.django_db
def test_each_threshold_is_alerted_once_as_spend_crosses_it(cast, check):
    _budget(cast.team, 1000)
    _workspace(cast)  # $10/hour from 1 Nov: $500 after 50 hours
    assert check(49).sent == [] and not mail.outbox
    assert check(50).sent == [(cast.team.pk, [50])]
    assert check(51).sent == [] and check(79).sent == []
    assert check(80).sent == [(cast.team.pk, [80])]
    assert check(100).sent == [(cast.team.pk, [100])]
    assert check(130).sent == []
    assert _sent() == [50, 80, 100]
    subjects = [m.subject for m in mail.outbox if m.to == ["victor@example.org"]]
    assert subjects == [
        "Vision Lab has spent 50% of its November budget",
        "Vision Lab has spent 80% of its November budget",
        "Vision Lab has spent 100% of its November budget",
    ]
    alert = BudgetAlert.objects.get(threshold=80)
    assert alert.spent == Decimal("800.00") and alert.budget == Decimal("1000.00")
    assert alert.month == NOV_1.date() and alert.sent_at == NOV_1 + timedelta(hours=80)


@pytest.mark.django_db
def test_team_admins_and_platform_admins_are_told_by_email_and_notice(cast, check):
    _budget(cast.team, 1000)
    _budget(cast.other_team, 1000)
    _workspace(cast)
    check(55)
    told = {"victor", "pat"}
    assert set(Notice.objects.values_list("user__username", flat=True)) == told
    assert sorted(to for m in mail.outbox for to in m.to) == [
        "pat@example.org",
        "victor@example.org",
    ]
    notice = Notice.objects.get(user=cast.team_admin)
    assert (
        notice.text == "Vision Lab passed 50% of its November budget: $550.00 of $1,000.00 spent."
    )
    assert notice.link == "/teams/vision/spend/" == reverse("team-spend", kwargs={"slug": "vision"})
    assert "http://" in mail.outbox[0].body and "/teams/vision/spend/" in mail.outbox[0].body


@pytest.mark.django_db
def test_a_jump_past_two_thresholds_sends_one_message_naming_both(cast, check):
    _budget(cast.team, 1000)
    _workspace(cast)
    assert check(85).sent == [(cast.team.pk, [50, 80])]
    assert _sent() == [50, 80]
    assert Notice.objects.filter(user=cast.team_admin).count() == 1
    text = Notice.objects.get(user=cast.team_admin).text
    assert text.startswith("Vision Lab passed 50% and 80% of its November budget: $850.00 of")
    assert mail.outbox[0].subject == "Vision Lab has spent 80% of its November budget"
    assert check(90).sent == []  # the 50 % alert counts as sent


@pytest.mark.django_db
def test_a_new_month_starts_fresh_in_the_teams_time_zone(cast, check):
    IdlePolicy.objects.create(team=cast.team, timezone="America/New_York")
    _budget(cast.team, 1000)
    _workspace(cast, at=NOV_1 + timedelta(hours=4))  # 1 Nov 00:00 in New York
    assert check(4 + 60).sent == [(cast.team.pk, [50])]
    # 1 Dec 03:00 UTC is still 30 Nov in New York: November's alerts, 100 % by now.
    assert check(30 * 24 + 3).sent == [(cast.team.pk, [80, 100])]
    # December in New York begins at 05:00 UTC; 50 hours later the team is at 50 % again.
    december = check(30 * 24 + 5 + 50)
    assert december.sent == [(cast.team.pk, [50])]
    months = sorted(BudgetAlert.objects.values_list("month", "threshold"))
    assert months[-1] == (datetime(2026, 12, 1).date(), 50) and len(months) == 4


@pytest.mark.django_db
def test_a_raised_budget_keeps_its_alerts_and_a_lowered_one_adds_alerts(cast, check):
    _budget(cast.team, 1000)
    _workspace(cast)
    assert check(60).sent == [(cast.team.pk, [50])]
    Team.objects.filter(pk=cast.team.pk).update(monthly_budget=Decimal(2000))
    assert check(70).sent == []  # $700 of $2,000: 35 %, and the 50 % alert stays sent
    Team.objects.filter(pk=cast.team.pk).update(monthly_budget=Decimal(800))
    assert check(72).sent == [(cast.team.pk, [80])]  # $720 of $800: 90 %
    assert BudgetAlert.objects.get(threshold=80).budget == Decimal("800.00")


@pytest.mark.django_db
def test_teams_without_a_budget_or_spend_get_nothing(cast, check):
    _workspace(cast)  # no budget: no limit, no alert
    _budget(cast.other_team, 0)  # a $0 budget with nothing spent is not "100 % used"
    assert check(500).sent == [] and not BudgetAlert.objects.exists() and not mail.outbox


@pytest.mark.django_db
def test_the_check_reads_any_number_of_teams_in_the_same_queries(cast):
    counts = []
    for size in (3, 30):
        for i in range(size):
            team = TeamFactory(monthly_budget=Decimal(1_000_000))
            _workspace(cast, team=team, name=f"t{size}-{i}")
        with CaptureQueriesContext(connection) as queries:
            result = budget_alerts_check(now=NOV_1 + timedelta(hours=10))
        assert result.sent == []
        counts.append(len(queries))
    assert counts[0] == counts[1]


def _provisioned(cast):
    """A VM provisioned in the emulator through the request path ($3.673/hour), running."""
    ws = workspace_request(
        user=cast.researcher,
        team=cast.team,
        name="e2e",
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=datetime.now(UTC),
    )
    ws.refresh_from_db()
    assert ws.status == Status.RUNNING
    return ws


@pytest.mark.django_db(transaction=True)
def test_checks_running_at_once_send_each_alert_once(cast, sim, moved_clock):
    # Three hours of spend within one month: not from the real clock, which may be
    # in a month's last hours.
    moved_clock.move_to(datetime(2026, 11, 10, 9, tzinfo=UTC), tick=True)
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need PostgreSQL")
    ws = _provisioned(cast)
    _budget(cast.team, 10, stop=True)
    later = ws.status_changed_at + timedelta(hours=3)  # $11.02 of $10
    results, barrier = [], threading.Barrier(4)

    def run():
        barrier.wait()
        try:
            results.append(budget_alerts_check(now=later))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(4)]
    with time_machine.travel(later, tick=True):
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert len(results) == 4
    assert sum(len(r.sent) for r in results) == 1
    assert sum(len(r.stopped) for r in results) == 1
    assert _sent() == [50, 80, 100]
    assert Notice.objects.filter(user=cast.team_admin).count() == 1
    assert len([m for m in mail.outbox if m.to == ["victor@example.org"]]) == 1
    assert ws.events.filter(to_status=Status.STOPPING).count() == 1
    assert Workspace.objects.get(pk=ws.pk).status == Status.STOPPED


# --- Stop at 100 % -------------------------------------------------------------------------


def _events(ws):
    return list(WorkspaceEvent.objects.filter(workspace=ws, to_status=Status.STOPPING))


@pytest.mark.django_db
def test_stop_at_100_stops_the_running_workspaces_and_says_so(cast):
    _budget(cast.team, 1000, stop=True)
    first, second = _workspace(cast, name="first"), _workspace(cast, name="second")
    stopped = _workspace(cast, path=[*RUN, Status.STOPPING, Status.STOPPED], name="parked")
    elsewhere = _workspace(cast, team=cast.other_team, name="nlp")
    assert _check(40).stopped == []  # $800 of $1,000: 50 % and 80 % only
    result = _check(50)
    assert result.sent == [(cast.team.pk, [100])]
    assert sorted(result.stopped) == sorted([first.pk, second.pk])
    for ws in (first, second):
        (event,) = _events(ws)
        assert event.reason == "Team budget of $1,000.00 used up (stop at 100% is on)"
        assert event.actor is None and event.detail["rule"] == "budget"
    assert Workspace.objects.get(pk=stopped.pk).status == Status.STOPPED
    assert Workspace.objects.get(pk=elsewhere.pk).status == Status.RUNNING
    text = Notice.objects.filter(user=cast.team_admin).first().text
    assert "New workspace requests now wait for a platform admin's approval." in text
    assert "Stop at 100% is on, so these running workspaces are being stopped: first, second." in (
        text
    )
    assert BudgetAlert.objects.get(threshold=100).stopped == 2


@pytest.mark.django_db
def test_with_the_option_off_nothing_is_stopped(cast, check):
    _budget(cast.team, 1000, stop=False)
    ws = _workspace(cast)
    assert check(101).stopped == [] and check(200).stopped == []
    assert Workspace.objects.get(pk=ws.pk).status == Status.RUNNING and not _events(ws)
    assert "Stop at 100%" not in Notice.objects.filter(user=cast.team_admin).first().text


@pytest.mark.django_db
def test_a_workspace_still_starting_at_the_alert_is_stopped_once_it_runs(cast):
    _budget(cast.team, 1000, stop=True)
    _workspace(cast, name="burner")
    late = _workspace(cast, path=RUN[:2], at=NOV_1 + timedelta(hours=99), name="late")
    _check(100)
    assert _events(late) == []  # provisioning cannot be stopped yet
    states.transition(
        workspace_id=late.pk,
        expected=Status.PROVISIONING,
        to=Status.RUNNING,
        now=NOV_1 + timedelta(hours=100, minutes=2),
    )
    # Approved by a platform admin after the alert: it runs on.
    approved = _workspace(cast, at=NOV_1 + timedelta(hours=101), name="approved")
    result = _check(102)
    assert result.sent == [] and result.stopped == [late.pk]
    assert Workspace.objects.get(pk=approved.pk).status == Status.RUNNING
    assert _check(103).stopped == []


@pytest.mark.django_db(transaction=True)
def test_stop_at_100_deallocates_through_celery_and_the_state_machine(cast, sim, moved_clock):
    # Three hours of spend within one month: not from the real clock, which may be
    # in a month's last hours.
    moved_clock.move_to(datetime(2026, 11, 10, 9, tzinfo=UTC), tick=True)
    ws = _provisioned(cast)
    _budget(cast.team, 10, stop=True)
    later = ws.status_changed_at + timedelta(hours=3)  # $11.02 of $10
    with time_machine.travel(later, tick=True):
        result = budget_alerts_check(now=later)
    assert result.stopped == [ws.pk]
    ws.refresh_from_db()
    assert ws.status == Status.STOPPED
    reasons = list(ws.events.values_list("reason", flat=True))
    assert "Team budget of $10.00 used up (stop at 100% is on)" in reasons
    assert reasons[-1] == "VM deallocated; OS disk kept"
    assert "these running workspaces are being stopped: e2e." in mail.outbox[-1].body


# --- Who may set it -------------------------------------------------------------------------


def _limits(**overrides):
    data = {"gpus_A100": "4", "gpus_T4": "8", "monthly_budget": "1000", "stop_at_budget": "on"}
    return {**data, "max_workspaces_per_user": "3", **overrides}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "who,status", [("team_admin", 403), ("researcher", 403), ("outsider", 404)]
)
def test_only_a_platform_admin_may_turn_on_stop_at_100(client, cast, who, status):
    client.force_login(getattr(cast, who))
    url = reverse("team-quota", kwargs={"slug": "vision"})
    assert client.get(url).status_code == status
    assert client.post(url, _limits()).status_code == status
    assert not Team.objects.get(pk=cast.team.pk).stop_at_budget
    assert not AuditEntry.objects.exists()


@pytest.mark.django_db
def test_a_platform_admin_turns_stop_at_100_on_and_off_audited(client, cast):
    client.force_login(cast.platform_admin)
    url = reverse("team-quota", kwargs={"slug": "vision"})
    form = client.get(url).content.decode()
    assert 'name="stop_at_budget"' in form and "every running workspace" in form
    assert client.post(url, _limits()).status_code == 302
    assert Team.objects.get(pk=cast.team.pk).stop_at_budget
    entry = AuditEntry.objects.get(action="team.limits")
    assert entry.before["stop_at_budget"] is False and entry.after["stop_at_budget"] is True
    assert "checked" in client.get(url).content.decode()
    page = client.get(reverse("team-detail", kwargs={"slug": "vision"})).content.decode()
    assert "running workspaces are stopped" in page
    off = _limits()
    del off["stop_at_budget"]  # an unticked checkbox is not posted
    assert client.post(url, off).status_code == 302
    assert not Team.objects.get(pk=cast.team.pk).stop_at_budget
    assert AuditEntry.objects.filter(action="team.limits").count() == 2


# --- At 100 %, new requests need approval --------------------------------------------------


def _request(cast, justification="", at=NOV_1 + timedelta(hours=101)):
    return workspace_request(
        user=cast.researcher,
        team=cast.team,
        name="more",
        offering=OfferingFactory(price_per_hour=Decimal("0.50")),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        justification=justification,
        now=at,
    )


@pytest.mark.django_db
def test_with_the_budget_used_up_a_new_request_waits_for_approval(cast):
    _budget(cast.team, 1000)
    _workspace(cast)  # $10/hour from 1 Nov: $1,010 by 101 hours
    reason = "Vision Lab has used up its $1,000.00 November budget ($1,010.00 spent)."
    with pytest.raises(JustificationNeeded) as refused:
        _request(cast)
    assert str(refused.value).startswith(reason)
    ws = _request(cast, justification="paper deadline")
    assert ws.status == Status.PENDING_APPROVAL
    assert ws.quota_request.over_quota == [reason]


@pytest.mark.django_db
def test_with_the_budget_used_up_a_stopped_workspace_cannot_start(cast):
    _budget(cast.team, 1000)
    _workspace(cast)
    parked = _workspace(cast, path=[*RUN, Status.STOPPING, Status.STOPPED], name="parked")
    parked.refresh_from_db()
    with pytest.raises(WorkspaceActionError, match="has used up its \\$1,000.00"):
        workspace_start(user=cast.researcher, workspace=parked, now=NOV_1 + timedelta(hours=101))
    assert Workspace.objects.get(pk=parked.pk).status == Status.STOPPED


@pytest.mark.django_db
def test_below_the_budget_a_cheap_request_goes_ahead(cast):
    _budget(cast.team, 100_000)
    _workspace(cast)
    assert _request(cast).status == Status.REQUESTED


@pytest.mark.django_db
def test_the_request_form_says_the_budget_is_used_up(client, cast):
    _budget(cast.team, 1000)
    _workspace(cast)
    OfferingFactory()
    client.force_login(cast.researcher)
    with time_machine.travel(NOV_1 + timedelta(hours=101), tick=False):
        page = client.get(reverse("workspaces:request")).content.decode()
    assert "The $1,000.00 November budget is used up: $1,010.00 spent." in page


# --- Pages ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_team_and_spend_pages_list_the_months_alerts(client, cast):
    _budget(cast.team, 1000, stop=True)
    _workspace(cast)
    _check(50 + 1 / 60)
    _check(100)
    client.force_login(cast.researcher)
    with time_machine.travel(NOV_1 + timedelta(hours=101), tick=False):
        team_page = client.get(reverse("team-detail", kwargs={"slug": "vision"})).content.decode()
        spend = client.get(reverse("team-spend", kwargs={"slug": "vision"})).content.decode()
        october = client.get(reverse("team-spend", kwargs={"slug": "vision"}), {"month": "2026-10"})
    for page in (team_page, spend):
        assert "50% alert sent <time" in page and "3 Nov 02:01 UTC</time>" in page
        assert "100% alert sent" in page and "1 running workspace stopped" in page
    assert "No budget alert sent in this month." in october.content.decode()


def test_the_check_runs_on_the_beat_schedule(settings):
    from portal.celery import _beat_schedule, app

    _beat_schedule(app)
    entry = app.conf.beat_schedule["budget-alerts"]
    assert entry["task"] == "teams.tasks.check_budget_alerts"
    assert entry["schedule"] == settings.SPEND_ALERT_SECONDS == 300
