"""Notices that resolve themselves once what they say has passed, the owner told (notice and
email) when a workspace was stopped automatically and why, and the compact notice area."""

import html
import importlib
import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from billing import budget_alerts
from notifications.models import Notice, NoticeKind
from notifications.notice_text import in_zone
from notifications.selectors import notice_area
from teams import limits, quota_requests
from teams.limits import team_increase_request, team_limits_set
from teams.memberships import membership_change_role, membership_invite, membership_remove
from teams.models import GpuQuota, IdlePolicy, Team
from teams.quota_requests import quota_request_reject, quota_requests_expire
from tests.factories import SSH_KEY, OfferingFactory, WorkspaceFactory
from workspaces import heartbeats, states, telemetry
from workspaces.actions import workspace_keep_running, workspace_start
from workspaces.backends.vm_request import workspace_request
from workspaces.states import Status
from workspaces.sweep import idle_sweep

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def _at(minutes):
    return T0 + timedelta(minutes=minutes)


def _shown(client, user) -> str:
    """The text of the notice area on the workspace list, as ``user`` sees it."""
    client.force_login(user)
    page = client.get(reverse("workspaces:list")).content.decode()
    area = re.search(r'<section id="notices".*?</section>', page, re.S)
    text = re.sub(r"<[^>]+>", "", area[0]) if area else ""
    return re.sub(r"\s+", " ", html.unescape(text))


# --- Approval of a request above quota ------------------------------------------------------


def _pending(cast, name="big-train"):
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=0)
    return workspace_request(
        user=cast.researcher,
        team=cast.team,
        name=name,
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        justification="Paper deadline on Friday",
        now=timezone.now(),
    )


@pytest.mark.django_db
@pytest.mark.parametrize("decide,done", [("approve", "approved"), ("reject", "rejected")])
def test_approval_notices_resolve_once_the_request_is_decided(
    client, cast, decide, done, time_machine
):
    # The notices page shows what was resolved in the week before the request's clock.
    time_machine.move_to(T0, tick=False)
    ws = _pending(cast)
    assert "big-train waits for a platform admin" in _shown(client, cast.researcher)
    assert "alice asks for" in _shown(client, cast.platform_admin)

    decision = getattr(quota_requests, f"quota_request_{decide}")
    decision(
        quota_request_id=ws.quota_request.pk, actor=cast.platform_admin, comment="", now=_at(1)
    )

    time_machine.move_to(_at(2), tick=False)
    assert "waits for a platform admin" not in _shown(client, cast.researcher)
    assert "asks for" not in _shown(client, cast.platform_admin)
    gone = html.unescape(client.get(reverse("notice-list")).content.decode())
    pattern = rf"alice asks for .*No longer true since .*: {done.title()} by pat"
    assert re.search(pattern, gone, re.S)  # the platform admin's notices page says why
    waited = Notice.objects.get(user=cast.researcher, kind=NoticeKind.AWAITING_APPROVAL)
    assert waited.resolved_by == cast.platform_admin
    assert waited.resolved_reason == f"{done.title()} by pat"
    # The decision itself is news, and stays until read.
    assert f"was {done}" in _shown(client, cast.researcher)


@pytest.mark.django_db
def test_approval_notices_resolve_when_the_request_expires_and_not_before(client, cast):
    ws = _pending(cast)
    expires = ws.quota_request.expires_at
    assert quota_requests_expire(now=expires - timedelta(minutes=1)) == 0
    assert "alice asks for" in _shown(client, cast.platform_admin)
    assert quota_requests_expire(now=expires) == 1
    assert "alice asks for" not in _shown(client, cast.platform_admin)
    assert "waits for a platform admin" not in _shown(client, cast.researcher)


@pytest.mark.django_db
@pytest.mark.parametrize("decide", ["approve", "reject"])
def test_a_quota_increase_ask_resolves_once_decided(client, cast, decide):
    increase = team_increase_request(
        actor=cast.team_admin,
        team=cast.team,
        gpu_model="A100",
        gpus=8,
        monthly_budget=None,
        justification="New students",
        now=_at(0),
    )
    assert "victor asks for Vision Lab: 8 A100 GPUs" in _shown(client, cast.platform_admin)
    getattr(limits, f"team_increase_{decide}")(
        increase_id=increase.pk, actor=cast.platform_admin, comment="", now=_at(1)
    )
    assert "asks for" not in _shown(client, cast.platform_admin)


# --- Idle stop warnings and silent agents ---------------------------------------------------


def _running(cast, name="train", at=T0):
    ws = WorkspaceFactory(
        team=cast.team,
        owner=cast.researcher,
        name=name,
        status=Status.RUNNING,
        status_changed_at=at,
        gpu_model="A100",
        gpu_count=1,
    )
    return ws, telemetry.agent_token_issue(workspace_id=ws.pk, now=at)


def _report(ws, token, start, minutes, util=0):
    """Heartbeats every 30 s from ``start`` for ``minutes``, as the agent sends them."""
    for i in range(int(minutes * 2)):
        at = start + timedelta(seconds=30 * i)
        sample = {
            "at": at.isoformat(),
            "nvml": "ok",
            "gpus": [{"util_percent": util, "mem_used_mib": 1, "mem_total_mib": 2}],
            "ssh_sessions": 0,
            "jupyter_busy_kernels": 0,
            "cpu_percent": 1,
        }
        heartbeats.heartbeat_ingest(
            workspace_id=ws.pk, token=token, body=json.dumps({"samples": [sample]}).encode(), now=at
        )


def _warned(cast):
    """A workspace idle since 12:00, warned at 12:21 that it stops at 12:30 (30 min idle)."""
    ws, token = _running(cast)
    _report(ws, token, _at(0), 21)
    assert idle_sweep(now=_at(21)).warned == [ws.pk]
    return ws, token


@pytest.mark.django_db
def test_the_stop_warning_stays_while_true_and_resolves_when_the_workspace_stops(client, cast):
    ws, token = _warned(cast)
    _report(ws, token, _at(21), 4)
    idle_sweep(now=_at(25))  # still idle: the warning holds
    assert "train is idle and stops in about 9 min" in _shown(client, cast.researcher)

    _report(ws, token, _at(25), 5)
    assert idle_sweep(now=_at(30)).stopped == [ws.pk]
    shown = _shown(client, cast.researcher)
    assert "stops in about" not in shown
    assert "train was stopped automatically at 12:30 UTC. Stopped for idleness" in shown
    warning = Notice.objects.get(kind=NoticeKind.STOP_WARNING)
    assert warning.resolved_reason.startswith("Stopped for idleness")


def test_a_resolved_notice_reads_its_reason_with_one_full_stop(client, cast):
    """Issue 29 #26: "No longer true since ...: Stopped for idleness ... to 12:30 UTC.." """
    ws, token = _warned(cast)
    _report(ws, token, _at(21), 4)
    idle_sweep(now=_at(25))
    _report(ws, token, _at(25), 5)
    assert idle_sweep(now=_at(30)).stopped == [ws.pk]
    client.force_login(cast.researcher)
    with time_machine.travel(_at(31), tick=False):
        page = client.get(reverse("notice-list")).content.decode()
    text = re.sub(r"<[^>]+>", "", page)
    assert "No longer true since" in text and "Stopped for idleness" in text
    assert "UTC.." not in text and ".." not in text.split("No longer true since")[1][:300]


@pytest.mark.django_db
def test_times_in_a_notice_follow_the_readers_zone_with_utc_on_hover(client, cast):
    _warned(cast)
    client.cookies["tz"] = "America/New_York"
    assert "stops in about 9 min (07:30 EST)" in _shown(client, cast.researcher)
    page = client.get(reverse("workspaces:list")).content.decode()
    assert '<time datetime="2026-11-20T12:30:00Z" title="2026-11-20 12:30 UTC">' in page


@pytest.mark.django_db
def test_the_stop_warning_resolves_when_the_workspace_is_in_use_again(client, cast):
    ws, token = _warned(cast)
    _report(ws, token, _at(21), 3, util=90)  # two minutes of work: no longer idle
    result = idle_sweep(now=_at(24))
    assert result.resolved == [ws.pk] and result.stopped == []
    assert "stops in about" not in _shown(client, cast.researcher)
    warning = Notice.objects.get(kind=NoticeKind.STOP_WARNING)
    assert warning.resolved_reason.startswith("In use again")
    # Idle again later: warned afresh.
    _report(ws, token, _at(24), 30)
    assert idle_sweep(now=_at(53)).warned == [ws.pk]
    assert "stops in about" in _shown(client, cast.researcher)


@pytest.mark.django_db
def test_the_stop_warning_resolves_when_the_owner_keeps_it_running(client, cast):
    ws, _ = _warned(cast)
    workspace_keep_running(user=cast.researcher, workspace=ws, now=_at(22))
    assert "stops in about" not in _shown(client, cast.researcher)
    warning = Notice.objects.get(kind=NoticeKind.STOP_WARNING)
    assert warning.resolved_by == cast.researcher
    assert warning.resolved_reason == "Kept running by alice until 16:22 UTC"


@pytest.mark.django_db
def test_the_silence_notice_resolves_when_the_agent_reports_again(client, cast):
    ws, token = _running(cast)
    _report(ws, token, _at(0), 5, util=90)
    assert idle_sweep(now=_at(10)).told_silent == [ws.pk]
    assert "has sent no telemetry since" in _shown(client, cast.researcher)
    assert idle_sweep(now=_at(11)).resolved == []  # still silent
    _report(ws, token, _at(12), 1, util=90)
    assert idle_sweep(now=_at(13)).resolved == [ws.pk]
    assert "no telemetry" not in _shown(client, cast.researcher)


# --- Budget alerts ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_budget_alert_resolves_when_the_budget_changes_and_ends_with_its_month(
    client, cast, time_machine
):
    # The pages are read in November 2026 too: the alert ends with its month.
    time_machine.move_to(_at(6 * 60 + 1), tick=False)
    Team.objects.filter(pk=cast.team.pk).update(monthly_budget=Decimal("100"))
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, price_per_hour=Decimal("10"))
    path = [Status.REQUESTED, Status.PROVISIONING, Status.RUNNING]
    for expected, to in zip(path, path[1:], strict=False):
        states.transition(workspace_id=ws.pk, expected=expected, to=to, now=_at(0))
    budget_alerts.budget_alerts_check(now=_at(6 * 60))  # $60 of $100
    assert "passed 50% of its November budget" in _shown(client, cast.team_admin)
    # Unchanged at the end of the month's last minute, gone with the month (team zone: UTC).
    december = datetime(2026, 12, 1, tzinfo=UTC)
    user = cast.team_admin
    assert notice_area(user=user, now=december - timedelta(seconds=1)).count == 1
    assert notice_area(user=user, now=december).count == 0

    team = Team.objects.get(pk=cast.team.pk)
    team_limits_set(
        actor=cast.platform_admin,
        team=team,
        gpu_quotas={},
        monthly_budget=Decimal("1000"),
        max_workspaces_per_user=team.max_workspaces_per_user,
        now=_at(6 * 60 + 1),
    )
    assert "budget" not in _shown(client, cast.team_admin)
    alert = Notice.objects.get(user=cast.team_admin, kind=NoticeKind.BUDGET)
    assert alert.resolved_reason == "Budget changed to $1,000.00 a month by pat"


# --- Membership ------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("change", ["remove", "role"])
def test_added_to_a_team_resolves_once_removed_or_the_role_changes(
    client, cast, change, django_capture_on_commit_callbacks
):
    from tests.factories import UserFactory

    dave = UserFactory(username="dave")
    with django_capture_on_commit_callbacks(execute=True):
        membership = membership_invite(
            actor=cast.team_admin, team=cast.team, identifier="dave", role="researcher", now=T0
        )
    assert "victor added you to Vision Lab as Researcher" in _shown(client, dave)
    if change == "remove":
        membership_remove(
            actor=cast.team_admin, team=cast.team, membership_id=membership.pk, now=_at(1)
        )
    else:
        membership_change_role(
            actor=cast.team_admin,
            team=cast.team,
            membership_id=membership.pk,
            role="team_admin",
            now=_at(1),
        )
    assert "added you" not in _shown(client, dave)


# --- Automatic stops: notice and email, with the reason ---------------------------------------


def _provisioned(cast, name="e2e"):
    ws = workspace_request(
        user=cast.researcher,
        team=cast.team,
        name=name,
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=datetime.now(UTC),
    )
    ws.refresh_from_db()
    assert ws.status == Status.RUNNING
    return ws


@pytest.mark.django_db(transaction=True)
def test_an_idle_stop_tells_the_owner_by_notice_and_email_in_their_teams_zone(client, cast, sim):
    cast.researcher.email = "alice@example.org"
    cast.researcher.save()
    IdlePolicy.objects.create(team=cast.team, timezone="Europe/Berlin")
    ws = _provisioned(cast)
    since = ws.status_changed_at
    token = telemetry.agent_token_issue(workspace_id=ws.pk, now=since)
    _report(ws, token, since, 31)
    assert idle_sweep(now=since + timedelta(minutes=31)).stopped == [ws.pk]

    berlin, stopped_at = ZoneInfo("Europe/Berlin"), since + timedelta(minutes=31)
    notice = Notice.objects.get(user=cast.researcher, kind=NoticeKind.AUTO_STOP)
    told = in_zone(notice.text, berlin)
    assert told.startswith(
        f"e2e was stopped automatically at {stopped_at.astimezone(berlin):%H:%M %Z}. "
    )
    assert "Stopped for idleness: GPU < 5% and no interactive session for 30 min" in told
    [email] = [m for m in mail.outbox if m.subject == "e2e was stopped automatically"]
    assert email.to == ["alice@example.org"] and email.body.startswith(told)
    # On a page, the same words with the times in the reader's zone (UTC here: no cookie).
    assert in_zone(notice.text, UTC) in _shown(client, cast.researcher)
    client.cookies["tz"] = "Europe/Berlin"
    assert told in _shown(client, cast.researcher)

    # Started again: the notice has done its work.
    ws.refresh_from_db()
    workspace_start(user=cast.researcher, workspace=ws, now=timezone.now())
    assert "stopped automatically" not in _shown(client, cast.researcher)


@pytest.mark.django_db(transaction=True)
def test_a_budget_stop_tells_the_owner_why(cast, sim, moved_clock):
    # Three hours of spend within one month: not from the real clock, which may be
    # in a month's last hours.
    moved_clock.move_to(datetime(2026, 11, 10, 9, tzinfo=UTC), tick=True)
    cast.researcher.email = "alice@example.org"
    cast.researcher.save()
    ws = _provisioned(cast)
    Team.objects.filter(pk=cast.team.pk).update(monthly_budget=Decimal("10"), stop_at_budget=True)
    later = ws.status_changed_at + timedelta(hours=3)  # $11.02 of $10
    assert budget_alerts.budget_alerts_check(now=later).stopped == [ws.pk]
    notice = Notice.objects.get(user=cast.researcher, kind=NoticeKind.AUTO_STOP)
    told = in_zone(notice.text, UTC)  # the team's zone: no idle policy, UTC
    assert "Team budget of $10.00 used up (stop at 100% is on)." in told
    [email] = [m for m in mail.outbox if m.subject == "e2e was stopped automatically"]
    assert email.to == ["alice@example.org"] and email.body.startswith(told)


# --- The compact area ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_area_counts_notices_and_shows_one_line_per_group(client, cast):
    ws, _ = _running(cast)
    for minutes in (1, 2):  # two warnings about one workspace: one line
        Notice.objects.create(
            user=cast.researcher,
            text=f"train stops in {minutes}",
            created_at=_at(minutes),
            kind=NoticeKind.STOP_WARNING,
            about=f"workspace:{ws.pk}",
        )
    for i in range(3):
        Notice.objects.create(user=cast.researcher, text=f"news {i}", created_at=_at(3 + i))
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:list")).content.decode()
    area = re.search(r'<section id="notices".*?</section>', page, re.S)[0]
    assert area.count("<details") == 1 and area.count('<li class="notice notice-') == 4
    assert re.search(r"<summary>.*5 notices.*news 2", area, re.S)
    assert "×2" in area and "train stops in 1" not in area  # the group shows its newest
    assert re.search(r'<time datetime="2026-11-20T12:05:00Z"', area)

    # Dismissing the group's line dismisses the group; next= stays on the page.
    newest = Notice.objects.get(text="train stops in 2")
    response = client.post(
        reverse("notice-dismiss", args=[newest.pk]), {"next": reverse("workspaces:list")}
    )
    assert response.status_code == 302 and response["Location"] == reverse("workspaces:list")
    assert "3 notices" in _shown(client, cast.researcher)
    assert "train stops" not in _shown(client, cast.researcher)


@pytest.mark.django_db
def test_the_notices_page_reads_them_in_full_and_serves_the_area_to_htmx(client, cast):
    text = "A long notice " + "word " * 60
    Notice.objects.create(user=cast.researcher, text=text, created_at=_at(0))
    client.force_login(cast.researcher)
    page = client.get(reverse("notice-list")).content.decode()
    assert "<h1>Notices</h1>" in page and text.strip() in html.unescape(page)

    for here, back in (
        ("http://testserver/teams/vision/", "/teams/vision/"),
        ("https://evil.example/x", "/"),
    ):
        headers = {"HX-Request": "true", "HX-Current-URL": here}
        part = client.get(reverse("notice-list"), headers=headers)
        body = part.content.decode()
        assert body.lstrip().startswith('<section id="notices"') and "<html" not in body
        assert f'name="next" value="{back}"' in body


@pytest.mark.django_db
def test_the_area_is_absent_without_notices_and_reads_in_one_query(
    client, cast, django_assert_num_queries
):
    assert _shown(client, cast.researcher).strip() == ""
    Notice.objects.create(user=cast.researcher, text="hello", created_at=_at(0))
    with django_assert_num_queries(1):
        assert notice_area(user=cast.researcher, now=_at(1)).count == 1


# --- Notices stored before they could resolve ---------------------------------------------------


@pytest.mark.django_db
def test_old_notices_get_their_subject_and_those_already_passed_resolve(cast):
    from django.apps import apps

    migration = importlib.import_module("teams.migrations.0008_notice_resolve_old")
    stopped = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.STOPPED)
    running = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING)
    decided = _pending(cast, name="decided")
    quota_request_reject(
        quota_request_id=decided.quota_request.pk, actor=cast.platform_admin, comment="", now=T0
    )
    Notice.objects.all().delete()

    def old(user, text, link, at=T0):
        return Notice.objects.create(user=user, text=text, link=link, created_at=at)

    idle = "{} is idle and stops in about 1 min (12:01 UTC). Open it and choose Keep running."
    passed = old(cast.researcher, idle.format(stopped.name), f"/workspaces/{stopped.pk}/")
    holds = old(cast.researcher, idle.format(running.name), f"/workspaces/{running.pk}/")
    asked = old(
        cast.platform_admin,
        "alice asks for a VM: Paper deadline on Friday",
        "/approvals/",
        at=decided.quota_request.created_at,
    )
    budget = old(
        cast.team_admin,
        "Vision Lab passed 50% of its November budget: $550.00 of $1,000.00 spent.",
        "/teams/vision/spend/",
    )
    news = old(cast.researcher, "victor added you to Vision Lab as Researcher.", "/teams/vision/")

    class Then:  # today's models under the names the migration knew (Notice was teams')
        def get_model(self, app, name):
            return apps.get_model("notifications" if name == "Notice" else app, name)

    migration.classify(Then(), None)

    for notice in (passed, holds, asked, budget, news):
        notice.refresh_from_db()
    assert (passed.kind, passed.about) == ("stop_warning", f"workspace:{stopped.pk}")
    assert passed.resolved_at is not None and holds.resolved_at is None
    assert (asked.kind, asked.about) == ("approval_asked", f"workspace:{decided.pk}")
    assert asked.resolved_at is not None
    assert budget.expires_at == datetime(2026, 12, 1, tzinfo=UTC) and budget.kind == "budget"
    assert news.kind == "info" and news.resolved_at is None
    assert notice_area(user=cast.team_admin, now=datetime(2026, 12, 1, tzinfo=UTC)).count == 0


def test_a_mark_that_is_no_time_stays_text_and_text_is_escaped():
    from django.utils import timezone as tz

    from notifications.templatetags.notices import notice_html

    tz.activate(ZoneInfo("Europe/Berlin"))
    try:
        html_ = notice_html("<b>x</b> at [[time:2026-11-20T12:30:00+00:00]] [[time:nope]]")
    finally:
        tz.deactivate()
    assert html_.startswith("&lt;b&gt;x&lt;/b&gt; at <time ")
    assert ">13:30 CET</time>" in html_ and html_.endswith("[[time:nope]]")
