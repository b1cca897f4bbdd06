"""Idle stays honest (issue 32, item 5): an open JupyterLab or VS Code tab is not work, a kernel
busy training is, and so is a notebook whose cells ran a few minutes ago. Heartbeats as the
agent 1.1 sends them (docs/agent-protocol.md, "IDE activity"), played by the emulator's agent
profiles, go through ingestion and the idle sweep, with the time passed in."""

import json
import random
from datetime import UTC, datetime, timedelta

import pytest

from cloudsim.agent_protocol import GpuModel, make_sample
from tests.factories import WorkspaceFactory
from workspaces import heartbeats, idle, telemetry
from workspaces.models import Workspace, WorkspaceAgent
from workspaces.states import Status
from workspaces.sweep import idle_sweep

pytestmark = pytest.mark.django_db

EVENING = datetime(2026, 11, 20, 18, 0, tzinfo=UTC)  # the last cell ran, then the user left
A100 = GpuModel("NVIDIA A100 80GB PCIe", 81920)


def _running(cast, since=EVENING):
    ws = WorkspaceFactory(
        team=cast.team,
        owner=cast.researcher,
        name="notebook",
        status=Status.RUNNING,
        status_changed_at=since,
        gpu_model="A100",
        gpu_count=1,
    )
    return ws, telemetry.agent_token_issue(workspace_id=ws.pk, now=since)


def _post(ws, token, sample, at):
    body = json.dumps({"agent_version": "1.1", "samples": [sample]}).encode()
    heartbeats.heartbeat_ingest(workspace_id=ws.pk, token=token, body=body, now=at)


def _play(ws, token, profile, start, minutes, mig=None):
    """The emulator's agent playing ``profile`` from ``start`` (when it began: its last cell
    for tab_open, its long cell for training), a sample every 30 s for ``minutes``."""
    rng = random.Random(1)
    for i in range(int(minutes * 2)):
        at = start + timedelta(seconds=30 * i)
        sample = make_sample(profile, rng, A100, 1, i + 1, 10, mig, now=at, started=start)
        _post(ws, token, sample, at)
    return start + timedelta(seconds=30 * (int(minutes * 2) - 1))


def _sweep_until(now, end, step=timedelta(minutes=5)):
    stopped = []
    while now <= end and not stopped:
        stopped = idle_sweep(now=now).stopped
        now += step
    return stopped


def test_a_jupyterlab_tab_left_open_overnight_with_nothing_running_is_stopped(cast):
    ws, token = _running(cast)
    # Every sample says Jupyter's /api/status and code-server's heartbeat are fresh: the tab
    # polls. Its kernel last ran a cell at EVENING.
    last = _play(ws, token, "tab_open", EVENING, 45)
    assert WorkspaceAgent.objects.get(pk=ws.pk).active_at == EVENING
    assert idle_sweep(now=last).stopped == [ws.pk]  # 30 min after the last cell, warned at 20
    event = Workspace.objects.get(pk=ws.pk).events.get(to_status=Status.STOPPING)
    assert event.detail["rule"] == "idle"
    assert "from 18:00 UTC to 18:30 UTC" in event.reason


def test_a_kernel_busy_training_on_a_mig_slice_keeps_running_through_the_night(cast):
    ws, token = _running(cast)
    # A MIG device has no utilisation counter: the busy kernel is the only evidence of work.
    end = EVENING + timedelta(hours=3)
    last = _play(ws, token, "training", EVENING, 180, mig="1g.10gb")
    assert WorkspaceAgent.objects.get(pk=ws.pk).gpus[0]["util"] is None
    assert _sweep_until(EVENING + timedelta(minutes=5), end) == []
    assert (
        idle.verdict(
            idle.activity_of(vars(WorkspaceAgent.objects.get(pk=ws.pk))),
            idle.Policy(),
            last,
            running_since=EVENING,
        ).state
        is idle.State.ACTIVE
    )


def _notebook(at, ran_at, saved_at=None, **extra):
    """A MIG slice's sample (no GPU utilisation) whose kernel is idle between cells."""
    jupyter = {"last_activity": at.isoformat(), "busy_kernels": 0, "connections": 1,
               "kernels_active_at": ran_at.isoformat()}  # fmt: skip
    if saved_at is not None:
        jupyter["saved_at"] = saved_at.isoformat()
    return {
        "at": at.isoformat(),
        "nvml": "ok",
        "gpus": [
            {
                "util_percent": None,
                "mem_used_mib": 600,
                "mem_total_mib": 9728,
                "mig_profile": "1g.10gb",
            }
        ],  # fmt: skip
        "ssh_sessions": 0,
        "jupyter_busy_kernels": 0,
        "cpu_percent": 2,
        "jupyter": jupyter,
        **extra,
    }


def test_cells_run_every_few_minutes_keep_it_running_and_it_stops_30_minutes_after_the_last(
    cast,
):
    ws, token = _running(cast)
    # An hour of work: a short cell every 4 minutes, never running when a sample is taken.
    for i in range(120):
        at = EVENING + timedelta(seconds=30 * i)
        ran = EVENING + timedelta(minutes=4 * (i // 8))
        _post(ws, token, _notebook(at, ran), at)
    assert idle_sweep(now=EVENING + timedelta(minutes=59, seconds=30)).stopped == []
    last_cell = EVENING + timedelta(minutes=56)
    assert WorkspaceAgent.objects.get(pk=ws.pk).active_at == last_cell
    # Then the user leaves the tab open; the kernel's activity stays at the last cell.
    for i in range(120, 200):
        at = EVENING + timedelta(seconds=30 * i)
        _post(ws, token, _notebook(at, last_cell), at)
    result = idle_sweep(now=EVENING + timedelta(minutes=99))
    assert result.stopped == [ws.pk]
    event = Workspace.objects.get(pk=ws.pk).events.get(to_status=Status.STOPPING)
    assert "from 18:56 UTC to 19:26 UTC" in event.reason


@pytest.mark.parametrize(
    "extra",
    [
        {"terminal_input_at": "2026-11-20T18:20:00Z"},  # typing in any terminal
        {"vscode": {"saved_at": "2026-11-20T18:20:00Z", "last_activity": "x"}},  # a save
    ],
)
def test_terminal_input_and_vscode_saves_count_as_work(cast, extra):
    ws, token = _running(cast)
    at = EVENING + timedelta(minutes=21)
    _post(ws, token, _notebook(at, EVENING, **extra), at)
    assert WorkspaceAgent.objects.get(pk=ws.pk).active_at == datetime(
        2026, 11, 20, 18, 20, tzinfo=UTC
    )


def test_what_an_open_tab_moves_is_not_counted():
    at = EVENING + timedelta(hours=9)
    sample = _notebook(at, EVENING, vscode={"last_activity": at.isoformat()})
    (parsed,) = telemetry.heartbeat_parse(json.dumps({"samples": [sample]}).encode())
    assert parsed.user_active_at == EVENING  # not the tab's polls nor code-server's heartbeat
    assert parsed.interactive == 0


def test_work_is_never_later_than_the_sample_saying_so_and_a_busy_kernel_counts():
    at = EVENING + timedelta(minutes=1)
    sample = _notebook(at, at + timedelta(days=3))
    sample["jupyter"]["busy_kernels"] = 2  # an agent that only says it in the new field
    (parsed,) = telemetry.heartbeat_parse(json.dumps({"samples": [sample]}).encode())
    assert parsed.user_active_at == at and parsed.interactive == 2


@pytest.mark.parametrize(
    "ide",
    [
        {"jupyter": "busy"},
        {"jupyter": {"kernels_active_at": "yesterday", "busy_kernels": -1}},
        {"jupyter": {"kernels_active_at": 1764000000, "busy_kernels": True}},
        {"jupyter": {"kernels_active_at": "2026-11-20T18:00:00"}},  # no offset
        {"jupyter": {"saved_at": "0001-01-01T00:00:00+14:00"}},
        {"vscode": ["saved_at"], "terminal_input_at": "9" * 500},
    ],
)
def test_ide_fields_a_portal_cannot_read_are_left_out_not_refused(cast, ide):
    ws, token = _running(cast)
    at = EVENING + timedelta(minutes=1)
    sample = {**_notebook(at, EVENING), **ide}
    (parsed,) = telemetry.heartbeat_parse(json.dumps({"samples": [sample]}).encode())
    assert parsed.interactive == 0
    assert parsed.user_active_at in (None, EVENING)
    _post(ws, token, sample, at)  # taken, not a 400
    assert WorkspaceAgent.objects.get(pk=ws.pk).last_at == at


def test_an_agent_before_1_1_is_judged_as_before(cast):
    ws, token = _running(cast)
    old = _notebook(EVENING, EVENING)
    del old["jupyter"]
    (parsed,) = telemetry.heartbeat_parse(json.dumps({"samples": [old]}).encode())
    assert parsed.user_active_at is None
    _post(ws, token, old, EVENING)
    assert WorkspaceAgent.objects.get(pk=ws.pk).active_at is None


def test_an_older_ide_time_never_moves_the_last_work_back():
    policy = idle.Policy()
    busy = [idle.Sample(EVENING + timedelta(seconds=30 * i), 90) for i in range(5)]
    later = idle.Sample(EVENING + timedelta(minutes=3), 0, 0, EVENING - timedelta(hours=2))
    activity = idle.fold(idle.Activity(), [*busy, later], policy)
    assert activity.active_at == EVENING + timedelta(minutes=2)  # the sustained GPU work


def _ssh_login(at, typed_at=None, agent_1_2=True):
    """A sample with one SSH login open (its agent 1.2 input time, if any) and idle GPUs."""
    sample = {**_notebook(at, EVENING), "ssh_sessions": 1}
    if agent_1_2:
        sample["ssh"] = {"sessions": 1}
        if typed_at is not None:
            sample["ssh"]["input_at"] = typed_at.isoformat()
    return sample


def test_an_ssh_login_left_open_with_nobody_typing_is_stopped_30_minutes_after_the_last_key(
    cast,
):
    ws, token = _running(cast)
    last_key = EVENING + timedelta(minutes=5)
    for i in range(80):  # 40 minutes of samples, the login open all along
        at = EVENING + timedelta(seconds=30 * i)
        _post(ws, token, _ssh_login(at, min(at, last_key)), at)
    assert WorkspaceAgent.objects.get(pk=ws.pk).active_at == last_key
    assert idle_sweep(now=EVENING + timedelta(minutes=34)).stopped == []
    assert idle_sweep(now=EVENING + timedelta(minutes=36)).stopped == [ws.pk]
    event = Workspace.objects.get(pk=ws.pk).events.get(to_status=Status.STOPPING)
    assert "from 18:05 UTC to 18:35 UTC" in event.reason


def test_an_ssh_login_counts_only_by_its_input_and_agents_before_1_2_as_before():
    at = EVENING + timedelta(hours=2)
    samples = [
        _ssh_login(at, at - timedelta(seconds=20)),  # typing now
        _ssh_login(at),  # open, nobody typed since the agent started reading it
        _ssh_login(at, agent_1_2=False),  # an older agent: open counts as work at once
    ]
    parsed = telemetry.heartbeat_parse(json.dumps({"samples": samples}).encode())
    assert [(p.interactive, p.user_active_at) for p in parsed] == [
        (0, at - timedelta(seconds=20)),
        (0, EVENING),  # the kernel's last cell, not the open login
        (1, EVENING),
    ]
