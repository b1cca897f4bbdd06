"""Each event reaches the team's webhooks from its real trigger, in the words of its notice:
a request above quota, its decision, the idle sweep's warning and stop, a budget threshold,
a Spot eviction, a failed workspace and the weekly savings digest."""

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from billing.budget_alerts import budget_alerts_check
from billing.savings_digest import savings_digest_send
from notifications.tasks import retry_webhook_deliveries
from teams import webhook_settings
from teams.models import GpuQuota, IdlePolicy, Team
from teams.quota_requests import quota_request_reject
from tests.billing.test_budget_alerts import NOV_1
from tests.billing.test_recommendations import NOW as DIGEST_AT
from tests.billing.test_recommendations import catalog, three_savings  # noqa: F401 (fixtures)
from tests.billing.test_spot import request as spot_request
from tests.billing.test_spot import spot_price
from tests.factories import SSH_KEY, OfferingFactory, WorkspaceFactory
from tests.webhook_receiver import start_receiver
from tests.workspaces.test_sweep import _at, _report, _running
from workspaces import states
from workspaces.backends.vm_request import workspace_request
from workspaces.evictions import workspace_evictions_detect
from workspaces.states import Status


@pytest.fixture(scope="module")
def _server():
    receiver = start_receiver()
    yield receiver
    receiver.server.shutdown()


@pytest.fixture
def receiver(_server, settings):
    settings.WEBHOOK_ALLOW_LOOPBACK = True  # a local receiver, on PostgreSQL runs too
    _server.received.clear()
    _server.answers.clear()
    return _server


def _listen(cast, receiver, *events, team=None):
    """A generic hook of the cast's team (or ``team``) for ``events``."""
    webhook_settings.webhook_create(
        actor=cast.platform_admin,
        team=team or cast.team,
        kind="generic",
        name=f"hook {uuid.uuid4().hex[:6]}",
        url=receiver.url("/events"),
        events=list(events),
        now=timezone.now(),
    )


def _deliver():
    """What the beat's safety net sends: every delivery due now (used where the trigger's
    other after-commit work would call Azure)."""
    retry_webhook_deliveries.delay()


def _told(receiver):
    return [r.json() for r in receiver.at("/events")]


def _over_quota_request(cast):
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=0)
    return workspace_request(
        user=cast.researcher,
        team=cast.team,
        name="big-train",
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        justification="Paper deadline on Friday",
        now=timezone.now(),
    )


@pytest.mark.django_db
def test_a_request_above_quota_and_its_decision(cast, receiver, django_capture_on_commit_callbacks):
    _listen(cast, receiver, "approval_needed", "approval_decided")
    with django_capture_on_commit_callbacks(execute=True):
        ws = _over_quota_request(cast)
    [needed] = _told(receiver)
    assert needed["event"] == "approval_needed"
    assert needed["data"]["title"] == f"Approval needed: {ws.quota_request.summary}"
    assert needed["data"]["text"] == (
        f"alice asks for {ws.quota_request.summary}: Paper deadline on Friday"
    )
    assert needed["data"]["workspace_name"] == "big-train"
    assert needed["data"]["price_per_hour_usd"] == str(ws.price_per_hour)
    with django_capture_on_commit_callbacks(execute=True):
        quota_request_reject(
            quota_request_id=ws.quota_request.pk,
            actor=cast.platform_admin,
            comment="use T4",
            now=timezone.now(),
        )
    decided = _told(receiver)[1]
    assert decided["event"] == "approval_decided"
    assert decided["data"]["text"] == (
        f"alice's request for {ws.quota_request.summary} was rejected by pat. Comment: use T4"
    )
    assert decided["data"]["decision"] == "rejected"


@pytest.mark.django_db
def test_the_idle_sweeps_warning_and_stop_in_the_teams_time_zone(cast, receiver):
    from workspaces.sweep import idle_sweep

    IdlePolicy.objects.create(team=cast.team, timezone="Europe/Berlin")
    _listen(cast, receiver, "idle_warning", "idle_stop")
    ws, token = _running(cast)
    _report(ws, token, _at(0), 10, util=90)
    _report(ws, token, _at(10), 30, util=0)
    assert idle_sweep(now=_at(30)).warned == [ws.pk]
    _deliver()
    [warning] = _told(receiver)
    assert warning["event"] == "idle_warning"
    assert warning["data"]["title"] == "train stops in 10 min"
    assert warning["data"]["text"] == (
        "train is idle and stops in about 10 min (13:39 CET). "
        "Open it and choose Keep running to keep it."
    )
    assert warning["data"]["stop_at"] == "2026-11-20T12:39:30+00:00"
    assert idle_sweep(now=_at(40)).stopped == [ws.pk]
    _deliver()
    stop = _told(receiver)[1]
    assert stop["event"] == "idle_stop"
    assert stop["data"]["text"].startswith("train was stopped automatically at 13:40 CET.")
    assert stop["data"]["url"].endswith(f"/workspaces/{ws.pk}/")


@pytest.mark.django_db
def test_a_budget_threshold(cast, receiver, django_capture_on_commit_callbacks):
    _listen(cast, receiver, "budget")
    Team.objects.filter(pk=cast.team.pk).update(monthly_budget=Decimal(1000))
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, price_per_hour=Decimal(10))
    path = [Status.REQUESTED, Status.PROVISIONING, Status.RUNNING]
    for expected, to in zip(path, path[1:], strict=False):
        states.transition(workspace_id=ws.pk, expected=expected, to=to, now=NOV_1)
    with django_capture_on_commit_callbacks(execute=True):
        budget_alerts_check(now=NOV_1 + timedelta(hours=55))
    [alert] = _told(receiver)
    assert alert["event"] == "budget"
    assert alert["data"]["title"] == "Vision Lab has spent 50% of its November budget"
    assert alert["data"]["text"] == (
        "Vision Lab passed 50% of its November budget: $550.00 of $1,000.00 spent."
    )
    assert (alert["data"]["spent_usd"], alert["data"]["budget_usd"]) == ("550.00", "1000.00")


@pytest.mark.django_db
def test_a_failed_workspace(cast, receiver, django_capture_on_commit_callbacks):
    _listen(cast, receiver, "failure")
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, name="train")
    with django_capture_on_commit_callbacks(execute=True):
        states.transition(
            workspace_id=ws.pk,
            expected=Status.REQUESTED,
            to=Status.FAILED,
            now=timezone.now(),
            reason="Azure refused the create: SkuNotAvailable",
            error_code="SkuNotAvailable",
        )
    [failed] = _told(receiver)
    assert failed["event"] == "failure"
    assert failed["data"]["text"] == (
        "train of alice failed: Azure refused the create: SkuNotAvailable."
    )
    assert failed["data"]["error_code"] == "SkuNotAvailable"


@pytest.mark.django_db(transaction=True)
def test_a_spot_eviction(cast, receiver, sim):
    _listen(cast, receiver, "eviction", "idle_stop")
    spot_price()
    ws = spot_request(cast)
    sim.evict(f"ws-{ws.short_id}")
    assert workspace_evictions_detect(now=timezone.now()).evicted == [ws.pk]
    [evicted] = receiver.wait_for(1)
    body = evicted.json()
    assert body["event"] == "eviction"  # not idle_stop, though it is an automatic stop
    assert body["data"]["title"] == "spot-train was evicted by Azure"
    assert "deallocated" in body["data"]["text"]


@pytest.mark.django_db
def test_the_weekly_savings_digest(cast, receiver, three_savings):  # noqa: F811
    _listen(cast, receiver, "recommendation")
    _listen(cast, receiver, "budget", team=cast.other_team)  # another team, another event
    savings_digest_send(now=DIGEST_AT)
    _deliver()
    [digest] = _told(receiver)
    assert digest["event"] == "recommendation"
    assert digest["team"]["slug"] == "vision"
    assert digest["data"]["title"] == "Vision Lab could save $2,642.60 a month"
    assert digest["data"]["saving_usd_month"] == "2642.60"
    assert digest["data"]["text"].startswith("Right-sizing 2 of Vision Lab's workspaces")
