"""A researcher in real Chromium: request -> running -> stop -> start -> delete.

Runs Debian's /usr/bin/chromium through Playwright against the live server, with a Celery worker
in a thread and the Azure emulator; nothing in the portal is faked.
"""

import os
import shutil
from pathlib import Path

import pytest
from django.db import connections
from playwright.sync_api import expect, sync_playwright

from tests.factories import SSH_KEY, OfferingFactory

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason="needs Debian's chromium (make test)"),
]


@pytest.fixture
def browser_page(monkeypatch):
    # Playwright's sync API keeps an event loop in this thread; the test's own ORM calls are sync.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        yield page
        browser.close()
        # The ORM calls made inside Playwright's loop got their own connection; close it here.
        connections.close_all()


def _screenshot(page, name):
    target = os.environ.get("SCREENSHOT_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(target) / f"{name}.png"), full_page=True)


def _log_in(page, base, username):
    page.goto(f"{base}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw-for-tests-1")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Workspaces")).to_be_visible()


def _assert_every_field_has_a_label(page):
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll('input, select, textarea')]
             .filter(el => el.type !== 'hidden' && el.labels.length === 0
                     && !el.getAttribute('aria-label'))
             .map(el => el.name)"""
    )
    assert unlabelled == []


def _request_workspace(page, base):
    page.goto(f"{base}/workspaces/new/")
    _assert_every_field_has_a_label(page)
    page.get_by_label("Workspace name").fill("vision-train")
    page.get_by_label("Standard_NC24ads_A100_v4").check()
    page.get_by_label("SSH public key").fill(SSH_KEY)
    _screenshot(page, "request")
    page.get_by_role("button", name="Request workspace").click()
    expect(page.get_by_role("heading", name="vision-train")).to_be_visible()


def test_researcher_runs_a_vm_through_its_whole_life(
    live_server, cast, sim, celery_worker_thread, browser_page
):
    sim.set_latency(1.0)
    OfferingFactory()
    page, base = browser_page, live_server.url
    _log_in(page, base, "alice")
    _request_workspace(page, base)
    page.evaluate("window.__notReloaded = true")
    panel = page.locator("#status-panel")
    expect(panel.locator(".badge").first).to_have_text("Running", timeout=30_000)
    assert page.evaluate("window.__notReloaded") is True  # htmx polling, no reload
    expect(panel).to_contain_text("ssh researcher@10.0.0.")
    _screenshot(page, "running")

    page.get_by_role("button", name="Stop (deallocate)").click()
    expect(panel.locator(".badge").first).to_have_text("Stopped", timeout=30_000)
    page.get_by_role("button", name="Start", exact=True).click()
    expect(panel.locator(".badge").first).to_have_text("Running", timeout=30_000)

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete").click()
    expect(panel.locator(".badge").first).to_have_text("Deleted", timeout=30_000)
    history = panel.locator("table").inner_text()
    for step in ("Requested", "Provisioning", "Stopping", "Starting", "Deleting"):
        assert step in history
    assert sim.state()["virtualMachines"] == []


def test_a_researcher_of_another_team_sees_none_of_it(live_server, cast, sim, browser_page):
    from tests.factories import WorkspaceFactory

    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, name="vision-secret")
    page, base = browser_page, live_server.url
    _log_in(page, base, "bob")
    expect(page.get_by_text("vision-secret")).to_have_count(0)
    response = page.goto(f"{base}/workspaces/{ws.pk}/")
    assert response.status == 404


def test_a_request_above_quota_is_approved_in_one_click_and_provisions(
    live_server, cast, sim, celery_worker_thread, browser_page
):
    from teams.models import GpuQuota

    GpuQuota.objects.filter(team=cast.team).update(gpus=0)
    OfferingFactory()
    page, base = browser_page, live_server.url
    _log_in(page, base, "alice")
    page.goto(f"{base}/workspaces/new/")
    page.get_by_label("Workspace name").fill("vision-train")
    page.get_by_label("Standard_NC24ads_A100_v4").check()
    page.get_by_label("SSH public key").fill(SSH_KEY)
    page.get_by_label("Justification").fill("CVPR deadline on Friday")
    page.get_by_role("button", name="Request workspace").click()
    panel = page.locator("#status-panel")
    expect(panel.locator(".badge").first).to_have_text("Pending approval")
    workspace_url = page.url

    page.context.clear_cookies()
    _log_in(page, base, "pat")
    page.goto(f"{base}/approvals/")
    row = page.locator("tr", has_text="CVPR deadline on Friday")
    expect(row).to_contain_text("vCPUs of standardNCADSA100v4Family left in eastus")
    _screenshot(page, "approvals")
    page.evaluate("window.__notReloaded = true")
    row.get_by_label("Comment").fill("Go ahead")
    row.get_by_role("button", name="Approve").click()
    expect(page.get_by_role("status")).to_contain_text("Approved (Go ahead)")
    assert page.evaluate("window.__notReloaded") is True

    page.context.clear_cookies()
    _log_in(page, base, "alice")
    page.goto(workspace_url)
    expect(panel.locator(".badge").first).to_have_text("Running", timeout=30_000)
    expect(page.get_by_text("approved", exact=False).first).to_be_visible()


def test_a_member_reads_the_spend_chart_and_its_numbers_match_the_page(
    live_server, cast, browser_page
):
    from datetime import UTC, datetime, timedelta

    from django.utils import timezone

    from tests.billing.test_spend import A100, price, run

    price(A100, "3.00", datetime(2026, 1, 1, tzinfo=UTC))
    now = timezone.now()
    run(cast, start=now - timedelta(hours=3), stop=now, name="chart-run")
    page, base = browser_page, live_server.url
    _log_in(page, base, "alice")

    page.goto(f"{base}/teams/{cast.team.slug}/spend/")

    # A series per workspace kind (vm, mig, namespace), then storage and reservation.
    expect(page.locator("#spend-chart")).to_have_attribute("data-ready", "5")
    chart = page.evaluate(
        "() => Chart.getChart('spend-chart').data.datasets"
        ".map(d => d.data.reduce((a, b) => a + b, 0))"
    )
    data = page.evaluate(
        "(url) => fetch(url).then(r => r.json())", f"/teams/{cast.team.slug}/spend/data/"
    )
    total = page.get_by_test_id("spend-total").inner_text()
    assert total == f"${float(data['total']):,.2f}" and float(data["total"]) > 0
    assert round(sum(chart), 2) == float(data["total"])
    expect(page.get_by_role("table", name="Spend per day by workspace kind")).to_be_visible()
    expect(page.get_by_role("link", name="chart-run")).to_be_visible()
    # The reconciliation panel comes after the page, by htmx: Azure's costs are not in yet.
    expect(page.locator("#reconciliation")).to_contain_text("is not in for these days yet")
    _screenshot(page, "spend")


def test_the_equivalents_tick_box_follows_the_panel(live_server, cast, browser_page):
    # Issue 29, item 9: the panel said no size is equivalent, yet the box could be ticked.
    from decimal import Decimal

    OfferingFactory()  # Standard_NC24ads_A100_v4 at $3.673: the default ceiling is $5.51
    OfferingFactory(
        vm_size="Standard_NC40ads_H100_v5", gpu_model="H100", gpu_memory_gib=94, vcpus=40,
        price_per_hour=Decimal("6.98"),
    )  # fmt: skip
    page, base = browser_page, live_server.url
    _log_in(page, base, "alice")
    page.goto(f"{base}/workspaces/new/")
    tick = page.get_by_label("Accept equivalent sizes")
    page.get_by_label("Standard_NC24ads_A100_v4").check()
    expect(page.get_by_test_id("equivalents")).to_contain_text("No offered size in eastus")
    expect(tick).to_be_disabled()
    page.get_by_label("Price ceiling (USD/hour)").fill("7.50")
    expect(page.get_by_test_id("equivalents")).to_contain_text("Standard_NC40ads_H100_v5")
    expect(tick).to_be_enabled()
    tick.check()
    expect(tick).to_be_checked()
