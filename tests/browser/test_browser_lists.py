"""The workspace list in real Chromium: typing in the search or choosing a filter swaps the
table without reloading the page and keeps the query in the address bar; the next page link
follows on from the last row."""

import pytest
from playwright.sync_api import expect

from tests.browser.test_browser import CHROMIUM, _log_in, browser_page  # noqa: F401
from tests.factories import WorkspaceFactory
from workspaces.states import Status

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not __import__("shutil").which(CHROMIUM), reason="needs chromium"),
]


def test_search_and_filters_swap_the_table_and_stay_in_the_url(live_server, cast, browser_page):  # noqa: F811
    for i in range(60):
        WorkspaceFactory(team=cast.team, owner=cast.researcher, name=f"ws-{i:03d}",
                         status=(Status.RUNNING, Status.STOPPED)[i % 2])  # fmt: skip
    page, base = browser_page, live_server.url
    _log_in(page, base, "alice")
    rows = page.locator("#workspace-list tbody tr")
    expect(rows).to_have_count(50)
    page.evaluate("window.__notReloaded = true")

    page.get_by_label("Search").fill("ws-05")
    expect(rows).to_have_count(10)
    assert "q=ws-05" in page.url and page.evaluate("window.__notReloaded") is True

    page.get_by_label("Status").select_option("running")
    expect(rows).to_have_count(5)
    assert "status=running" in page.url and page.evaluate("window.__notReloaded") is True

    page.get_by_role("link", name="Clear").click()
    expect(rows).to_have_count(50)
    page.get_by_role("link", name="Next page").click()
    expect(rows).to_have_count(10)
    expect(page.locator("#workspace-list")).to_contain_text("ws-009")
