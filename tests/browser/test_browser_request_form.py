"""The request form by keyboard, in Debian's Chromium (issue 29 items 20 and 21): Tab reaches
the workspace's name without passing the GPU memory estimate's fields, and a failed request
opens on its error summary, whose links take the focus to the fields."""

import shutil

import pytest

from tests.browser.test_browser import CHROMIUM
from tests.browser.test_browser_design import _log_in, chromium  # noqa: F401
from tests.factories import OfferingFactory

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason="needs Debian's chromium (make test)"),
]
# From the top of the page: the navbar (brand, 3 sections, name, API tokens, Log out), the
# three kind tabs, the estimate's summary, the team: the name is the 13th stop or so.
MOST_TABS_TO_NAME = 15


def _tabs_to(page, element_id: str) -> tuple[int, list[str]]:
    """Tab presses from the top of the page until ``element_id`` has the focus, and the ids
    or names of the controls passed on the way."""
    passed = []
    for presses in range(1, 60):
        page.keyboard.press("Tab")
        focused = page.evaluate(
            "() => { const el = document.activeElement;"
            " return [el.id, el.name || el.innerText.slice(0, 20),"
            " !!el.closest('#estimate-form')]; }"
        )
        if focused[0] == element_id:
            return presses, passed
        passed.append(f"{focused[1]}{' (estimate)' if focused[2] else ''}")
    raise AssertionError(f"never reached #{element_id}: {passed}")


def test_tab_reaches_the_name_first_and_a_failed_request_focuses_its_errors(
    live_server,
    cast,
    chromium,  # noqa: F811
):
    OfferingFactory()
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    _log_in(context, live_server.url, cast.researcher)
    page = context.new_page()
    page.goto(f"{live_server.url}/workspaces/new/")

    presses, passed = _tabs_to(page, "id_name")
    print(f"{presses} Tab presses to the workspace name")
    assert not [p for p in passed if p.endswith("(estimate)")], passed
    assert presses <= MOST_TABS_TO_NAME, passed

    page.get_by_role("button", name="Request workspace").click()
    page.wait_for_load_state()
    summary = page.locator("#error-summary")
    assert page.evaluate("document.activeElement.id") == "error-summary"
    box = summary.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 900  # seen without scrolling
    summary.get_by_role("link", name="Workspace name:").click()
    assert page.evaluate("document.activeElement.id") == "id_name"
    context.close()
