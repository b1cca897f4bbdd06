"""/api/v1/docs in Chromium on a private network: Swagger UI comes from the portal's own
static files, so with every request to anything but the portal (loopback) blocked the page
still lists the API's operations, under the Content-Security-Policy (the conftest fails a
browser test on any violation)."""

from urllib.parse import urlsplit

from playwright.sync_api import expect

from tests.browser.test_browser import browser_page, pytestmark  # noqa: F401 (fixture, marks)


def test_the_api_docs_list_the_operations_with_no_internet(live_server, browser_page):  # noqa: F811
    page = browser_page
    blocked: list[str] = []

    def only_the_portal(route):
        if urlsplit(route.request.url).hostname in ("127.0.0.1", "localhost"):  # the portal
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_portal)
    page.goto(f"{live_server.url}/api/v1/docs")
    # An operation of each router, as Swagger UI lists them (method, path).
    for path in ("/api/v1/me", "/api/v1/workspaces", "/api/v1/teams"):
        expect(page.locator(".opblock-summary-path", has_text=path).first).to_be_visible(
            timeout=15_000
        )
    assert page.locator(".opblock").count() >= 10
    assert blocked == []  # nothing was even asked of another origin (no CDN, no validator)
