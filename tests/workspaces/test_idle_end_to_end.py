"""End to end: the emulator's simulated agent posts heartbeats from the VM's custom_data to
the live portal over HTTP, its GPU goes idle, the owner is warned, and the sweep (as beat runs
it) has the VM deallocated in the emulator. Only Azure and the agent are simulated."""

import time
import uuid

import pytest
from django.utils import timezone

from notifications.models import Notice
from tests.factories import SSH_KEY, OfferingFactory
from workspaces.backends.vm_request import workspace_request
from workspaces.models import TelemetrySample, Workspace
from workspaces.states import Status
from workspaces.sweep import idle_sweep

pytestmark = pytest.mark.django_db(transaction=True)


def _wait(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


# tab_open: a JupyterLab tab left open, whose polling keeps Jupyter's and code-server's own
# last activity fresh in every sample (docs/agent-protocol.md, "IDE activity").
@pytest.mark.parametrize("profile", ["idle", "tab_open"])
def test_the_simulated_agent_drives_a_vm_to_idle_and_the_portal_stops_it(
    live_server, cast, sim, settings, celery_worker_thread, profile
):
    settings.PORTAL_URL = live_server.url
    settings.AGENT_INTERVAL_SECONDS = 0.2
    settings.HEARTBEAT_FLUSH_SECONDS = 0.25  # the buffered path, as in production
    settings.IDLE_TIME_SCALE = 0.005  # 30 min idle -> 9 s, 10 min warning -> 3 s
    sim.set_default_agent_profile(profile)
    ws = workspace_request(
        user=cast.researcher,
        team=cast.team,
        name="idle-e2e",
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
    )
    _wait(lambda: Workspace.objects.get(pk=ws.pk).status == Status.RUNNING, 30, "running")
    _wait(lambda: TelemetrySample.objects.filter(workspace=ws).count() >= 5, 15, "heartbeats")

    def stopped():
        idle_sweep(now=timezone.now())  # what beat runs every IDLE_SWEEP_SECONDS
        return Workspace.objects.get(pk=ws.pk).status == Status.STOPPED

    _wait(stopped, 60, "the idle stop")
    assert Notice.objects.filter(user=cast.researcher, text__contains="is idle").exists()
    event = Workspace.objects.get(pk=ws.pk).events.get(to_status=Status.STOPPING)
    assert event.actor is None and event.reason.startswith("Stopped for idleness: GPU < 5%")
    vm = next(v for v in sim.state()["virtualMachines"] if v["tags"]["workspace"] == str(ws.pk))
    assert vm["powerState"] == "deallocated"
    agent = next(a for a in sim.agents() if a["workspace"] == str(ws.pk))
    assert agent["last_status"] == 202
