"""Notices in real Chromium: a notice on an open page goes once its state has passed, and the
compact area keeps a phone's first screen (390 px) for the page.

Conventions, fixtures and the skip without Chromium are tests/browser/test_browser.py's.
"""

import uuid

from django.utils import timezone
from playwright.sync_api import expect

from notifications.models import Notice
from teams.models import GpuQuota
from teams.quota_requests import quota_request_reject
from tests.browser import test_browser
from tests.browser.test_browser import _log_in, _screenshot
from tests.factories import SSH_KEY, OfferingFactory
from workspaces.backends.vm_request import workspace_request
from workspaces.models import WorkspaceEvent

pytestmark = test_browser.pytestmark
browser_page = test_browser.browser_page  # the fixture, shared


def _pending(cast):
    GpuQuota.objects.filter(team=cast.team).update(gpus=0)
    return workspace_request(
        user=cast.researcher,
        team=cast.team,
        name="big-train",
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        justification="CVPR deadline on Friday",
        now=timezone.now(),
    )


def test_a_notice_on_an_open_page_goes_once_the_request_is_decided(live_server, cast, browser_page):
    ws = _pending(cast)
    page, base = browser_page, live_server.url
    _log_in(page, base, "alice")
    notices = page.locator("#notices")
    expect(notices).to_contain_text("1 notice")
    expect(notices).to_contain_text("big-train waits for a platform admin")
    page.evaluate("window.notReloaded = true")

    quota_request_reject(
        quota_request_id=ws.quota_request.pk,
        actor=cast.platform_admin,
        comment="No A100s this month",
        now=timezone.now(),
    )
    # No reload: the open page's stream (static/live.js) brings the resolved area.
    expect(notices).not_to_contain_text("waits for a platform admin", timeout=8000)
    expect(notices).to_contain_text("was rejected. Comment: No A100s this month")
    assert page.evaluate("window.notReloaded") is True


def test_the_stop_warning_goes_when_the_owner_keeps_the_workspace_running(
    live_server, cast, sim, browser_page
):
    from datetime import timedelta

    from tests.notifications.test_notices import _report, _running
    from workspaces.sweep import idle_sweep

    now = timezone.now()
    ws, token = _running(cast, at=now - timedelta(minutes=22))
    _report(ws, token, now - timedelta(minutes=22), 22)  # idle all along
    assert idle_sweep(now=now).warned == [ws.pk]
    # A week of stops and starts: the history is long, as a used workspace's is.
    for day in range(7):
        for from_status, to_status in (("running", "stopped"), ("stopped", "running")):
            WorkspaceEvent.objects.create(
                workspace=ws,
                at=now - timedelta(days=7 - day),
                from_status=from_status,
                to_status=to_status,
                reason="by its owner",
            )
    page, base = browser_page, live_server.url
    _log_in(page, base, "alice")
    page.goto(f"{base}/workspaces/{ws.pk}/")
    notices = page.locator("#notices")
    expect(notices).to_contain_text("train is idle and stops in about 8 min")
    # The page's own warning is in the first screenful, not below the history (issue 29).
    warning = page.get_by_role("alert").filter(has_text="This workspace stops at")
    box = warning.bounding_box()
    assert box is not None and box["y"] + box["height"] <= page.viewport_size["height"]

    page.get_by_role("button", name="Keep running for 4 hours").click()
    expect(page.get_by_role("heading", name="train")).to_be_visible()
    expect(notices).not_to_contain_text("stops in about")
    expect(warning).to_have_count(0)


def test_many_notices_take_one_line_at_390_px_and_expand_one_line_each(
    live_server, cast, browser_page
):
    now = timezone.now()
    for i in range(5):
        Notice.objects.create(
            user=cast.researcher,
            text=f"Notice {i}: a long sentence that would wrap over several lines on a phone "
            "screen if it were shown whole, as the banners were before.",
            link="/workspaces/",
            created_at=now,
        )
    page, base = browser_page, live_server.url
    page.set_viewport_size({"width": 390, "height": 844})
    _log_in(page, base, "alice")
    area = page.locator("#notices")
    summary = area.locator("summary")
    expect(summary).to_contain_text("5 notices")
    assert area.bounding_box()["height"] < 50  # one line, however many notices
    _screenshot(page, "notices-390-closed")

    summary.click()
    lines = area.locator("li.notice")
    expect(lines).to_have_count(5)
    heights = [lines.nth(i).bounding_box()["height"] for i in range(5)]
    assert max(heights) < 40, heights  # one line each
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    _screenshot(page, "notices-390-open")

    lines.first.get_by_role("button", name="Dismiss").click()
    expect(page.locator("#notices summary")).to_contain_text("4 notices")

    page.locator("#notices summary").click()
    page.get_by_role("link", name="Read them in full").click()
    expect(page.get_by_role("heading", name="Notices")).to_be_visible()
    full = page.locator("ul.notice-list")
    expect(full.get_by_text("as the banners were before.")).to_have_count(4)  # whole text
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
