"""The design system as a person sees it, in Debian's Chromium: no page scrolls sideways on a
390 px phone, for each role, and 403 and 404 are the portal's own styled pages with its
navigation. Pages come from the RBAC matrix (tests/test_rbac_matrix.py), so a new page is
checked here as soon as it has a row there.
"""

import shutil

import pytest
from django.conf import settings
from django.db import connections
from django.test import Client
from django.urls import reverse
from playwright.sync_api import sync_playwright

from tests import test_rbac_matrix as matrix
from tests.test_browser import CHROMIUM, CHROMIUM_ARGS, _screenshot
from workspaces.models import Workspace

PHONE = {"width": 390, "height": 844}
objects = matrix.objects  # the RBAC matrix's fixture: one object of each kind in the URLs
# GETs that answer with a file or JSON, not a page.
NOT_PAGES = {
    "healthz",
    "team-spend-data",
    "team-spend-csv",
    "platform-spend-csv",
    "workspaces:kubeconfig",
}
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason="needs Debian's chromium (make test)"),
]


@pytest.fixture
def phone(monkeypatch):
    """A Chromium page 390 px wide, as an iPhone 12-15 shows the portal."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport=PHONE)
        yield context
        browser.close()
        connections.close_all()


def _log_in(context, base, user):
    """Give the browser a session of ``user`` (the login form has its own tests)."""
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    context.clear_cookies()
    context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": base}])


def _pages_of(role, found):
    """URLs of every page ``role`` may GET, by the RBAC matrix (``found``: its objects)."""
    index = matrix.ROLES.index(role)
    for name, row in sorted(matrix.EXPECTED.items()):
        # The JSON API's routes are not pages; its docs page (openapi-view) is.
        json_api = name.startswith("api-v1:") and name != "api-v1:openapi-view"
        if row.method == "GET" and row.statuses[index] == 200 and name not in NOT_PAGES:
            if json_api:
                continue
            yield name, matrix._url(name, matrix.URLS[name], row, found)


def _overflow(page) -> dict:
    """How wide the document is, and the widest elements that stick out past the viewport."""
    return page.evaluate(
        """() => ({
             width: document.documentElement.scrollWidth,
             culprits: [...document.querySelectorAll('body *')]
               .filter(el => el.getBoundingClientRect().right > window.innerWidth + 1)
               .filter(el => !el.closest('.table-responsive, pre, .navbar-collapse:not(.show)'))
               .slice(0, 3)
               .map(el => `${el.tagName}.${el.className} ${el.getBoundingClientRect().right}`)
           })"""
    )


@pytest.mark.parametrize("role", ["researcher", "team_admin", "platform_admin"])
def test_no_page_scrolls_sideways_on_a_390_px_phone(live_server, cast, objects, phone, role):
    # A running VM shows its connect box and ssh command, the widest text on its page.
    Workspace.objects.filter(pk=objects["workspace"].pk).update(private_ip="10.0.0.4")
    page = phone.new_page()
    _log_in(phone, live_server.url, getattr(cast, role))
    wide = {}
    for name, url in _pages_of(role, objects):
        response = page.goto(live_server.url + url)
        assert response.status == 200, f"{name} as {role}: {response.status}"
        page.wait_for_load_state("networkidle")  # htmx loads (Azure quota, reconciliation)
        found = _overflow(page)
        if found["width"] > PHONE["width"]:
            wide[name] = found
            _screenshot(page, f"wide-{role}-{name.replace(':', '-')}")
    assert wide == {}, f"pages wider than {PHONE['width']} px as {role}: {wide}"


def test_the_login_page_fits_a_phone(live_server, db, phone):
    page = phone.new_page()
    page.goto(live_server.url + "/accounts/login/")
    assert _overflow(page)["width"] <= PHONE["width"]


def _assert_styled(page):
    """The portal's navbar is there and Bootstrap's stylesheet is applied to it."""
    navbar = page.locator("nav.navbar")
    assert navbar.count() == 1
    assert navbar.evaluate("el => getComputedStyle(el).display") == "flex"
    assert page.evaluate(
        "() => [...document.styleSheets].some(s => (s.href || '').includes('bootstrap'))"
    )
    assert page.get_by_role("link", name="GPU Workspace Portal").is_visible()


def test_403_and_404_are_the_portals_styled_pages(live_server, cast, objects, phone):
    page = phone.new_page()
    _log_in(phone, live_server.url, cast.researcher)

    response = page.goto(live_server.url + reverse("approvals"))
    assert response.status == 403
    _assert_styled(page)
    assert page.get_by_role("heading", name="You may not do this").is_visible()
    _screenshot(page, "403")

    response = page.goto(live_server.url + "/workspaces/no-such-page/")
    assert response.status == 404
    _assert_styled(page)
    assert page.get_by_role("heading", name="Page not found").is_visible()

    # Another team's workspace is not found, rather than forbidden: its name stays unknown.
    _log_in(phone, live_server.url, cast.outsider)
    response = page.goto(f"{live_server.url}/workspaces/{objects['workspace'].pk}/")
    assert response.status == 404
    _assert_styled(page)
    assert objects["workspace"].name not in page.content()
    # The phone's menu opens from its toggler, as Bootstrap's script is loaded too.
    page.get_by_role("button", name="Menu").click()
    assert page.get_by_role("link", name="Workspaces", exact=True).is_visible()
    _screenshot(page, "404")


def test_the_platform_admin_sees_every_team_in_the_spend_chart(live_server, cast, phone):
    page = phone.new_page()
    _log_in(phone, live_server.url, cast.platform_admin)
    page.goto(live_server.url + reverse("platform-spend"))
    chart = page.locator("#all-teams-chart")
    chart.wait_for()
    page.wait_for_function("document.getElementById('all-teams-chart').dataset.ready === '2'")
    teams = page.evaluate("() => Chart.getChart('all-teams-chart').data.labels")
    assert sorted(teams) == ["NLP", "Vision Lab"]
    assert _overflow(page)["width"] <= PHONE["width"]
    _screenshot(page, "all-teams-chart")


def test_the_ssh_command_is_copied_with_one_click(live_server, cast, objects, phone):
    Workspace.objects.filter(pk=objects["workspace"].pk).update(private_ip="10.0.0.4")
    phone.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page = phone.new_page()
    _log_in(phone, live_server.url, cast.researcher)
    page.goto(f"{live_server.url}/workspaces/{objects['workspace'].pk}/")
    button = page.get_by_role("button", name="Copy the ssh command")
    button.click()
    assert page.evaluate("() => navigator.clipboard.readText()") == "ssh researcher@10.0.0.4"
    assert button.inner_text() == "Copied"
    assert page.locator("#copy-status").inner_text() == "Copied"  # said to screen readers
