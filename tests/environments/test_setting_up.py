"""Ready, not just running: a VM made from an environment is "Setting up" until its driver, its
environment layer and JupyterLab are there, as Azure and the VM's agent (played by the
emulator, posting to the live portal) say; a failed layer fails it with the log's last lines
and Retry makes it again; one that never gets ready fails at the deadline; setting up is
neither idle time nor silence."""

import time
import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.utils import timezone

from environments.demo import seed_demo_environments
from teams.models import GpuQuota
from tests.factories import SSH_KEY, OfferingFactory
from workspaces.actions import workspace_retry
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace, WorkspaceAgent
from workspaces.operations import workspace_advance
from workspaces.states import Status
from workspaces.sweep import idle_sweep

pytestmark = pytest.mark.django_db(transaction=True)
# size -> (GPU model, GPU memory GiB, GPU partition, driver method of its default environment)
FAMILIES = {
    "Standard_NC4as_T4_v3": ("T4", 16, 1, "preinstalled"),
    "Standard_NV12ads_A10_v5": ("A10", 8, 3, "extension"),
    "Standard_NC24ads_A100_v4": ("A100", 80, 1, "preinstalled"),
    "Standard_NC40ads_H100_v5": ("H100", 94, 1, "preinstalled"),
}


@pytest.fixture
def live(live_server, settings, cast, sim):
    """The emulator's agents post to the live portal every 0.2 s; the setup takes 1 s."""
    settings.PORTAL_URL = live_server.url
    settings.AGENT_INTERVAL_SECONDS = 0.2
    settings.SETUP_POLL_SECONDS = 0.2
    sim.extensions(drivers_required=True, setup_seconds=1.0, seconds=0.5)
    for model in ("A10", "H100"):
        GpuQuota.objects.create(team=cast.team, gpu_model=model, gpus=2)
    cast.team.max_workspaces_per_user = 8
    cast.team.save(update_fields=["max_workspaces_per_user"])
    seed_demo_environments(now=timezone.now())
    return sim


def _request(cast, size, name):
    model, memory, partition, _ = FAMILIES[size]
    offering = OfferingFactory(
        vm_size=size,
        gpu_model=model,
        gpu_count=1,
        gpu_partition=partition,
        gpu_memory_gib=memory,
        price_per_hour=Decimal("1.0000"),
    )
    return workspace_request(
        user=cast.researcher,
        team=cast.team,
        name=name,
        offering=offering,
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
    )


def _wait_for(pks, statuses, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = dict(Workspace.objects.filter(pk__in=pks).values_list("pk", "status"))
        if all(found[pk] in statuses for pk in pks):
            return
        time.sleep(0.2)
    pytest.fail(f"still {found} after {seconds} s")


def test_the_default_environment_of_each_family_ends_ready(live, cast, celery_worker_thread):
    made = {size: _request(cast, size, f"ready-{i}").pk for i, size in enumerate(FAMILIES)}
    _wait_for(list(made.values()), {Status.RUNNING, Status.FAILED})
    for size, pk in made.items():
        ws = Workspace.objects.get(pk=pk)
        assert (ws.status, ws.error_message, ws.setup_step) == (Status.RUNNING, "", "")
        assert ws.environment_recipe["driver_method"] == FAMILIES[size][3]
        moves = list(ws.events.order_by("at").values_list("to_status", "reason"))
        assert (Status.SETTING_UP, "VM is running; setting up its environment") in moves
        driver = (
            "the NVIDIA GPU Driver Extension succeeded"
            if FAMILIES[size][3] == "extension"
            else "the image's NVIDIA driver answers"
        )
        assert moves[-1] == (
            Status.RUNNING,
            f"Ready: {driver}, the environment is set up and JupyterLab answers",
        )
        agent = WorkspaceAgent.objects.get(pk=pk)
        assert (agent.driver, agent.setup, agent.jupyter) == (
            "loaded",
            "done: succeeded",
            "answers",
        )


def test_a_failed_layer_fails_with_the_logs_last_lines_and_retry_makes_it_again(
    live, cast, client, celery_worker_thread
):
    live.inject("guest.setup", "setup_failed")
    ws = _request(cast, "Standard_NC4as_T4_v3", "broken-layer")
    _wait_for([ws.pk], {Status.FAILED, Status.RUNNING})
    ws.refresh_from_db()
    assert (ws.status, ws.error_code, ws.failed_operation) == (
        Status.FAILED,
        "EnvironmentSetupFailed",
        "setup",
    )
    # The emulator fails the middle step of packages, conda, pip, jupyterlab, vscode, done.
    assert "ERROR: the jupyterlab step of the environment failed (exit status 1)" in (
        ws.error_message
    )
    # Nothing left billing in Azure.
    assert not [v for v in live.state()["virtualMachines"] if v["name"] == f"ws-{ws.pk.hex[:12]}"]
    client.force_login(cast.researcher)
    page = client.get(f"/workspaces/{ws.pk}/").content.decode()
    assert "The environment&#x27;s setup failed at the jupyterlab step" in page or (
        "setup failed at the jupyterlab step" in page
    )
    assert "exit status 1" in page and "Retry" in page
    workspace_retry(user=cast.researcher, workspace=ws, now=timezone.now())
    _wait_for([ws.pk], {Status.RUNNING, Status.FAILED})
    assert Workspace.objects.get(pk=ws.pk).status == Status.RUNNING


def test_a_setup_that_never_gets_ready_fails_at_the_deadline(cast, sim, settings):
    """No agent ever reports (eager Celery, no live portal): it sets up, then fails."""
    seed_demo_environments(now=timezone.now())
    ws = _request(cast, "Standard_NC4as_T4_v3", "silent-vm")
    assert Workspace.objects.get(pk=ws.pk).status == Status.SETTING_UP
    later = timezone.now() + timedelta(minutes=settings.SETUP_TIMEOUT_MINUTES + 1)
    with time_machine.travel(later):  # ticking: the delete LRO ends on the clock
        workspace_advance(workspace_id=ws.pk, clock=timezone.now)
    ws.refresh_from_db()
    assert (ws.status, ws.error_code) == (Status.FAILED, "EnvironmentSetupTimedOut")
    assert "waiting for the VM to report its environment setup" in ws.error_message


def test_setting_up_is_neither_idle_time_nor_silence(cast, sim, settings):
    seed_demo_environments(now=timezone.now())
    ws = _request(cast, "Standard_NC4as_T4_v3", "slow-setup")
    hours_later = timezone.now() + timedelta(hours=5)
    with time_machine.travel(hours_later, tick=False):
        idle_sweep(now=timezone.now())
    ws.refresh_from_db()
    assert ws.status == Status.SETTING_UP
    assert not ws.events.filter(to_status=Status.STOPPING).exists()
    assert not cast.researcher.notices.exists()
