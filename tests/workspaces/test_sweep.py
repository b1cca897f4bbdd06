"""The idle sweep: warnings, stops with their evidence, keep-running extensions, silent
agents, constant queries, and two sweeps at once."""

import dataclasses
import json
import threading
import uuid
from datetime import UTC, datetime, time, timedelta

import pytest
import time_machine
from django.core import mail
from django.db import OperationalError, connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from common.permissions import ActionNotAllowed
from notifications.models import Notice, NoticeKind
from notifications.notice_text import in_zone
from teams.models import IdlePolicy
from tests.factories import WorkspaceFactory
from workspaces import heartbeats, telemetry
from workspaces.actions import ExtensionRefused, workspace_keep_running
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Lease, Workspace, WorkspaceAgent, WorkspaceExtension
from workspaces.states import Status
from workspaces.sweep import idle_sweep

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def _at(minutes):
    return T0 + timedelta(minutes=minutes)


def _running(cast, owner=None, name="train"):
    ws = WorkspaceFactory(
        team=cast.team,
        owner=owner or cast.researcher,
        name=name,
        status=Status.RUNNING,
        status_changed_at=T0,
        gpu_model="A100",
        gpu_count=1,
    )
    return ws, telemetry.agent_token_issue(workspace_id=ws.pk, now=T0)


def _sample(at, util=0, ssh=0):
    return {
        "at": at.isoformat(),
        "nvml": "ok",
        "gpus": [{"util_percent": util, "mem_used_mib": 1, "mem_total_mib": 2}],
        "ssh_sessions": ssh,
        "jupyter_busy_kernels": 0,
        "cpu_percent": 1,
    }


def _report(ws, token, start, minutes, util=0, ssh=0):
    """Heartbeats every 30 s from ``start`` for ``minutes``, as the agent sends them."""
    for i in range(int(minutes * 2)):
        at = start + timedelta(seconds=30 * i)
        body = {"samples": [_sample(at, util, ssh)]}
        heartbeats.heartbeat_ingest(
            workspace_id=ws.pk, token=token, body=json.dumps(body).encode(), now=at
        )


@pytest.mark.django_db
def test_an_idle_workspace_is_warned_once_then_stopped_with_its_evidence(
    cast, django_capture_on_commit_callbacks
):
    ws, token = _running(cast)
    _report(ws, token, _at(0), 10, util=90)  # busy until 12:09:30
    _report(ws, token, _at(10), 30, util=0)  # idle since
    with django_capture_on_commit_callbacks(execute=True):  # emails leave on commit
        first = idle_sweep(now=_at(30))
    assert first.warned == [ws.pk] and first.stopped == []
    assert (
        "train is idle and stops in about 10 min" in Notice.objects.get(user=cast.researcher).text
    )
    assert [m.to for m in mail.outbox] == [["alice@example.org"]]
    assert idle_sweep(now=_at(31)).warned == []  # once
    assert len(mail.outbox) == 1

    stopped = idle_sweep(now=_at(40))
    assert stopped.stopped == [ws.pk]
    event = Workspace.objects.get(pk=ws.pk).events.get(to_status=Status.STOPPING)
    assert event.actor is None
    assert event.reason == (
        "Stopped for idleness: GPU < 5% and no interactive session for 30 min, "
        "from 12:09 UTC to 12:39 UTC."
    )
    assert event.detail["rule"] == "idle"
    assert idle_sweep(now=_at(41)).stopped == []  # it is no longer running


@pytest.mark.django_db
def test_a_busy_workspace_keeps_running(cast):
    ws, token = _running(cast)
    _report(ws, token, _at(0), 60, util=95)
    result = idle_sweep(now=_at(60))
    assert result.evaluated == 1 and not result.warned and not result.stopped


@pytest.mark.django_db
def test_the_evidence_uses_the_teams_time_zone(cast):
    IdlePolicy.objects.create(team=cast.team, timezone="Europe/Berlin", idle_minutes=20)
    ws, token = _running(cast)
    _report(ws, token, _at(0), 25, util=0)
    idle_sweep(now=_at(25))
    reason = ws.events.get(to_status=Status.STOPPING).reason
    assert "for 20 min, from 13:00 CET to 13:20 CET" in reason


@pytest.mark.django_db
def test_keep_running_delays_the_stop_and_is_bounded_per_day(cast):
    IdlePolicy.objects.create(team=cast.team, extensions_per_day=2, extension_hours=4)
    ws, token = _running(cast)
    _report(ws, token, _at(0), 25, util=0)
    assert idle_sweep(now=_at(25)).warned == [ws.pk]
    workspace_keep_running(user=cast.researcher, workspace=ws, now=_at(25))
    assert idle_sweep(now=_at(40)).stopped == []
    assert idle_sweep(now=_at(25 + 4 * 60 - 5)).warned == [ws.pk]  # warned again before it
    # Told the stop is near, the owner keeps it again: the second extension is spent.
    workspace_keep_running(user=cast.researcher, workspace=ws, now=_at(25 + 4 * 60 - 4))
    second_ends = 25 + 2 * 4 * 60 - 4
    with pytest.raises(ExtensionRefused, match="allows 2 extension"):
        workspace_keep_running(user=cast.researcher, workspace=ws, now=_at(second_ends - 5))
    assert WorkspaceExtension.objects.filter(workspace=ws, user=cast.researcher).count() == 2
    assert idle_sweep(now=_at(second_ends - 1)).stopped == []
    assert idle_sweep(now=_at(second_ends + 1)).stopped == [ws.pk]


@pytest.mark.django_db
def test_only_the_owner_or_a_team_admin_may_keep_it_running(cast):
    ws, _ = _running(cast)
    with pytest.raises(ActionNotAllowed):
        workspace_keep_running(user=cast.teammate, workspace=ws, now=_at(1))
    workspace_keep_running(user=cast.team_admin, workspace=ws, now=_at(1))


@pytest.mark.django_db
def test_a_silent_agent_is_told_once_and_stopped_after_60_minutes(cast):
    ws, token = _running(cast)
    _report(ws, token, _at(0), 5, util=90)
    told = idle_sweep(now=_at(10))
    assert told.told_silent == [ws.pk]
    told = in_zone(Notice.objects.get(user=cast.researcher).text, UTC)
    assert "has sent no telemetry since 12:04 UTC" in told
    assert idle_sweep(now=_at(11)).told_silent == []
    assert idle_sweep(now=_at(5 + 60)).stopped == [ws.pk]
    assert "no telemetry for 60 min" in ws.events.get(to_status=Status.STOPPING).reason


@pytest.mark.django_db
def test_the_nightly_stop_stops_a_busy_workspace(cast):
    IdlePolicy.objects.create(team=cast.team, nightly_stop=time(13, 30), timezone="Europe/Berlin")
    ws, token = _running(cast)
    _report(ws, token, _at(0), 61, util=99)
    assert idle_sweep(now=_at(61)).stopped == [ws.pk]
    assert ws.events.get(to_status=Status.STOPPING).reason == (
        "Stopped at the team's nightly stop, 13:30 CET."
    )


@pytest.mark.django_db
def test_a_sweep_finding_the_lease_held_does_nothing(cast):
    ws, token = _running(cast)
    _report(ws, token, _at(0), 45, util=0)
    Lease.objects.create(name="idle-sweep", holder="other", expires_at=_at(46))
    assert idle_sweep(now=_at(45)).skipped
    assert Workspace.objects.get(pk=ws.pk).status == Status.RUNNING
    assert idle_sweep(now=_at(47)).stopped == [ws.pk]  # the lease expired


def _fleet(cast, count):
    agents = []
    for i in range(count):
        ws = WorkspaceFactory(
            team=cast.team if i % 2 else cast.other_team,
            owner=cast.researcher if i % 2 else cast.outsider,
            status=Status.RUNNING,
            status_changed_at=T0,
        )
        agents.append(
            WorkspaceAgent(
                workspace=ws,
                token_sha256="x",
                token_created_at=T0,
                last_at=_at(59),
                evidence_since=T0,
                active_at=_at(59),
            )
        )
    WorkspaceAgent.objects.bulk_create(agents)


@pytest.mark.django_db
def test_the_sweep_makes_the_same_number_of_queries_for_10_and_300_workspaces(cast):
    IdlePolicy.objects.create(team=cast.team)
    idle_sweep(now=T0)  # the lease row exists from the first sweep on
    counts = []
    for size in (10, 300):
        WorkspaceAgent.objects.all().delete()
        _fleet(cast, size)
        with CaptureQueriesContext(connection) as queries:
            assert idle_sweep(now=_at(60)).evaluated == size
        counts.append(len(queries))
    assert counts[0] == counts[1]


@pytest.mark.django_db(transaction=True)
def test_two_sweeps_at_once_neither_double_warn_nor_double_stop(cast):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need PostgreSQL")
    warn_me = [_running(cast, name=f"w{i}") for i in range(5)]
    stop_me = [_running(cast, name=f"s{i}") for i in range(5)]
    for ws, token in warn_me:
        _report(ws, token, _at(5), 25, util=0)
    for ws, token in stop_me:
        _report(ws, token, _at(0), 30, util=0)
    results, barrier = [], threading.Barrier(4)

    def sweep():
        barrier.wait()
        try:
            results.append(idle_sweep(now=_at(30)))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=sweep) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(len(r.warned) for r in results) == 5
    assert sum(len(r.stopped) for r in results) == 5
    told = Notice.objects.filter(user=cast.researcher)
    assert told.filter(kind=NoticeKind.STOP_WARNING).count() == 5  # each warned once
    assert told.filter(kind=NoticeKind.AUTO_STOP).count() == 5  # each stop told once
    stops = Workspace.objects.filter(events__to_status=Status.STOPPING).count()
    assert stops == 5


@pytest.mark.django_db(transaction=True)
def test_under_time_machine_a_provisioned_vm_goes_idle_and_is_deallocated(cast, sim):
    from tests.factories import SSH_KEY, OfferingFactory

    ws = workspace_request(
        user=cast.researcher,
        team=cast.team,
        name="e2e",
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
    )
    ws.refresh_from_db()
    assert ws.status == Status.RUNNING
    token = telemetry.agent_token_issue(workspace_id=ws.pk, now=timezone.now())
    start = ws.status_changed_at
    _report(ws, token, start, 35, util=0)
    with time_machine.travel(start + timedelta(minutes=35), tick=True):
        assert idle_sweep(now=timezone.now()).stopped == [ws.pk]
    ws.refresh_from_db()
    assert ws.status == Status.STOPPED
    vm = next(v for v in sim.state()["virtualMachines"] if v["tags"]["workspace"] == str(ws.pk))
    assert vm["powerState"] == "deallocated"


def _database_down(execute, sql, params, many, context):
    raise OperationalError("connection to server at 127.0.0.1, port 5432 failed")


@pytest.fixture
def buffered(settings, monkeypatch):
    settings.HEARTBEAT_FLUSH_SECONDS = 0.25
    buffer = heartbeats.HeartbeatBuffer(flush_thread=False)
    monkeypatch.setattr(heartbeats, "BUFFER", buffer)
    return buffer


def _agent_posts(ws, token, backlog: list, now) -> None:
    """What the agent does each interval: post its unsent samples, keep them on a refusal."""
    body = {"samples": [_sample(at, util=82) for at in backlog[-120:]]}
    try:
        heartbeats.heartbeat_ingest(
            workspace_id=ws.pk, token=token, body=json.dumps(body).encode(), now=now
        )
    except telemetry.HeartbeatRefused as refused:
        assert refused.status == 503 and refused.retry_after
        return
    backlog.clear()


@pytest.mark.django_db
def test_no_silent_stop_while_the_portal_itself_fails_to_store_telemetry(cast, buffered, settings):
    busy, token = _running(cast, name="busy")
    dead, dead_token = _running(cast, name="dead")
    settings.HEARTBEAT_FLUSH_SECONDS = 0
    _report(busy, token, _at(0), 5, util=82)
    _report(dead, dead_token, _at(0), 5, util=82)
    settings.HEARTBEAT_FLUSH_SECONDS = 0.25
    # From 12:05 the busy VM's agent keeps posting, but the database refuses every flush.
    backlog = []
    for minute in range(5, 66):
        backlog.append(_at(minute))
        _agent_posts(busy, token, backlog, _at(minute))
        with (
            time_machine.travel(_at(minute), tick=False),
            connection.execute_wrapper(_database_down),
        ):
            buffered.flush()

    held = idle_sweep(now=_at(66))

    assert held.stopped == [] and held.told_silent == []
    assert Workspace.objects.get(pk=busy.pk).status == Status.RUNNING
    # Storing works again: what was queued is stored, the agent sends what it kept.
    with time_machine.travel(_at(66), tick=False):
        buffered.flush()
        _agent_posts(busy, token, [*backlog, _at(66)], _at(66))
        buffered.flush()
    assert idle_sweep(now=_at(67)).stopped == []
    settings.HEARTBEAT_FLUSH_SECONDS = 0
    _report(busy, token, _at(67), 3, util=82)
    # The agent that really went silent is stopped 60 min after the portal last failed.
    assert idle_sweep(now=_at(70)).told_silent == [dead.pk]
    _report(busy, token, _at(70), 55, util=82)
    assert idle_sweep(now=_at(124)).stopped == []
    assert idle_sweep(now=_at(125)).stopped == [dead.pk]


@pytest.mark.django_db
def test_a_heartbeat_the_portal_failed_to_store_excuses_only_its_own_workspace(
    cast, buffered, settings
):
    own, own_token = _running(cast, name="own")
    other, other_token = _running(cast, name="other")
    settings.HEARTBEAT_FLUSH_SECONDS = 0
    _report(own, own_token, _at(0), 5, util=82)
    _report(other, other_token, _at(0), 5, util=82)
    # At 12:30 a heartbeat of "own" reaches the buffer that the database then refuses.
    parsed = telemetry.heartbeat_parse(
        json.dumps({"samples": [{"at": _at(30).isoformat(), "nvml": "ok", "gpus": []}]})
    )
    buffered.add(own.pk, [dataclasses.replace(parsed[0], cpu_percent=-1)])
    with time_machine.travel(_at(30), tick=False):
        buffered.flush()

    assert idle_sweep(now=_at(66)).stopped == [other.pk]
    assert idle_sweep(now=_at(89)).stopped == []
    assert idle_sweep(now=_at(90)).stopped == [own.pk]


@pytest.mark.django_db
def test_a_workspace_whose_stop_fails_holds_back_no_other_stop(cast, caplog):
    """One bad item never blocks a queue: the database refuses the first workspace's stop
    (its row locked elsewhere, say), and the sweep still stops the second."""
    stuck, stuck_token = _running(cast, name="stuck")
    idle_ws, idle_token = _running(cast, name="idle")
    for ws, token in ((stuck, stuck_token), (idle_ws, idle_token)):
        _report(ws, token, _at(0), 40, util=0)
    stuck_id = stuck.pk.hex

    def refuse_stuck(execute, sql, params, many, context):
        if sql.lstrip().startswith("UPDATE") and any(
            str(p).replace("-", "") == stuck_id for p in (params or ())
        ):
            raise OperationalError("could not obtain lock on row")
        return execute(sql, params, many, context)

    idle_sweep(now=_at(20))  # the warnings
    with connection.execute_wrapper(refuse_stuck):
        swept = idle_sweep(now=_at(30))

    assert swept.stopped == [idle_ws.pk]
    assert Workspace.objects.get(pk=idle_ws.pk).status != Status.RUNNING
    assert Workspace.objects.get(pk=stuck.pk).status == Status.RUNNING
    assert f"stopping workspace {stuck.pk} failed" in caplog.text
    assert idle_sweep(now=_at(31)).stopped == [stuck.pk]  # the next sweep tries again
