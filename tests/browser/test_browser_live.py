"""Live pages in real Chromium: a workspace's page and the workspace list, left open while the
idle sweep stops the VM, show Stopped, the Start action and no ssh command, without a reload.

Everything but Azure and the agent is real: the emulator's simulated agent reports an idle GPU
to the live server, the sweep (as beat runs it) decides, a Celery worker in a thread
deallocates, and the page hears of it over its live stream (live/streams.py, static/live.js).
Prints the seconds from each change to the open page showing it (measured, not asserted).
"""

import time
import uuid

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.browser.test_browser import _log_in, browser_page, pytestmark  # noqa: F401 (fixture)
from tests.factories import SSH_KEY, OfferingFactory
from workspaces.backends.vm_request import workspace_request
from workspaces.models import TelemetrySample, Workspace
from workspaces.states import Status
from workspaces.sweep import idle_sweep


def _wait(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def _running_idle_vm(cast, settings, live_server, sim):
    settings.PORTAL_URL = live_server.url
    settings.AGENT_INTERVAL_SECONDS = 0.5
    settings.HEARTBEAT_FLUSH_SECONDS = 0.25
    settings.IDLE_TIME_SCALE = 0.005  # 30 min idle -> 9 s, 10 min warning -> 3 s
    sim.set_default_agent_profile("idle")
    ws = workspace_request(
        user=cast.researcher,
        team=cast.team,
        name="vision-idle",
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
    )
    _wait(lambda: Workspace.objects.get(pk=ws.pk).status == Status.RUNNING, 30, "running")
    _wait(lambda: TelemetrySample.objects.filter(workspace=ws).exists(), 15, "a heartbeat")
    return ws


def _seconds_since(ws, status) -> float:
    event = Workspace.objects.get(pk=ws.pk).events.filter(to_status=status).latest("at")
    return time.time() - event.at.timestamp()


def test_open_pages_show_an_idle_stop_without_a_reload(
    live_server,
    cast,
    sim,
    settings,
    celery_worker_thread,
    browser_page,  # noqa: F811
):
    ws = _running_idle_vm(cast, settings, live_server, sim)
    page, base = browser_page, live_server.url
    _log_in(page, base, "alice")
    listing = page.context.browser.new_page()  # a second tab, its own session
    _log_in(listing, base, "alice")  # lands on the workspace list
    row = listing.get_by_role("row").filter(has_text="vision-idle")
    expect(row.locator(".badge")).to_have_text("Running")
    page.goto(f"{base}/workspaces/{ws.pk}/")
    panel = page.locator("#status-panel")
    expect(panel.locator(".badge").first).to_have_text("Running")
    expect(panel).to_contain_text("ssh researcher@10.0.0.")
    for tab in (page, listing):
        tab.evaluate("window.__notReloaded = true")

    def stopping():
        idle_sweep(now=timezone.now())  # what beat runs every IDLE_SWEEP_SECONDS
        return Workspace.objects.get(pk=ws.pk).status != Status.RUNNING

    _wait(stopping, 60, "the idle stop")
    _wait(lambda: Workspace.objects.get(pk=ws.pk).status == Status.STOPPED, 30, "deallocated")
    expect(panel.locator(".badge").first).to_have_text("Stopped", timeout=10_000)
    shown = {"page": _seconds_since(ws, Status.STOPPED)}
    expect(row.locator(".badge")).to_have_text("Stopped", timeout=10_000)
    shown["list"] = _seconds_since(ws, Status.STOPPED)
    print(
        f"\nlive pages: seconds from the idle stop (VM deallocated) to the open page showing "
        f"Stopped: {shown['page']:.1f} s, to the open list showing it: {shown['list']:.1f} s"
    )

    expect(panel.get_by_role("button", name="Start", exact=True)).to_be_visible()
    expect(panel.get_by_role("button", name="Stop (deallocate)")).to_have_count(0)
    expect(panel).not_to_contain_text("ssh researcher@")
    expect(page.locator("#telemetry")).to_be_visible()
    for tab in (page, listing):
        assert tab.evaluate("window.__notReloaded") is True  # swapped in place, not reloaded
