"""Sign in with Microsoft in real Chromium: the portal's login page, the emulated Entra ID's
account picker, back to the portal on the team of the user's group. Nothing is faked: the
emulator is Entra ID, only ENTRA_AUTHORITY differs from production."""

import shutil

import pytest
from playwright.sync_api import expect

from tests.browser.test_browser import CHROMIUM, browser_page  # noqa: F401
from tests.entra_portal import entra_on_fixture  # noqa: F401

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason="needs Debian's chromium (make test)"),
]


def test_victor_signs_in_with_microsoft_and_lands_on_his_team(
    live_server,
    entra_on,
    browser_page,  # noqa: F811
):
    page, base = browser_page, live_server.url
    page.goto(f"{base}/accounts/login/")
    page.get_by_role("link", name="Sign in with Microsoft").click()

    expect(page.get_by_role("heading", name="Pick an account")).to_be_visible()
    page.get_by_role("button", name="Victor Admin (victor@example.org)").click()

    expect(page.get_by_role("heading", name="Workspaces")).to_be_visible()
    page.goto(f"{base}/teams/")
    expect(page.get_by_role("link", name="Vision Lab")).to_be_visible()
    expect(page.get_by_text("NLP Group")).to_have_count(0)
    page.get_by_role("link", name="Vision Lab").click()
    expect(page.get_by_text("victor@example.org").first).to_be_visible()
