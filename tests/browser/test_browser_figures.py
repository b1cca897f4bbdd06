"""In real Chromium, a team admin, a platform admin and a researcher visit every page that shows
a team's figures (burn rate, GPUs in use, GPUs left, members) and read the same numbers.

Debian's /usr/bin/chromium through Playwright against the live server; the team has an A100 VM
in every status (tests/billing/test_figures.py), so the rules on what counts are all exercised."""

import re
from decimal import Decimal

from django.urls import reverse
from playwright.sync_api import expect

from tests.billing.test_figures import team_in_every_status
from tests.browser.test_browser import _log_in, browser_page, pytestmark  # noqa: F401


def _numbers(page, figure: str, team: str) -> list[Decimal]:
    """The numbers shown in the page's elements marked with the figure, for the team's A100s
    (or not per model)."""
    found = page.eval_on_selector_all(
        f'[data-figure="{figure}"][data-team="{team}"]',
        "els => els.map(e => [e.innerText, e.dataset.gpuModel || ''])",
    )
    return [
        Decimal(re.search(r"\d[\d,]*(?:\.\d+)?", text).group().replace(",", ""))
        for text, model in found
        if model in ("", "A100")
    ]


def _visit(page, base, user, urls, seen):
    _log_in(page, base, user)
    for url in urls:
        page.goto(f"{base}{url}")
        for figure in seen:
            seen[figure][url] = _numbers(page, figure, "vision")
    # A platform admin's menu is collapsed below 1400 px (templates/_navbar.html): open it.
    toggler = page.locator(".navbar-toggler")
    if toggler.is_visible():
        toggler.click()
    page.get_by_role("button", name="Log out").click()


def test_the_teams_figures_agree_across_pages(live_server, cast, browser_page):  # noqa: F811
    team_in_every_status(cast)
    page, base, slug = browser_page, live_server.url, cast.team.slug
    seen = {"burn-rate": {}, "gpus-in-use": {}, "gpus-left": {}, "members": {}}
    team_pages = [reverse("team-list"), reverse("team-detail", args=[slug])]
    team_pages.append(reverse("team-spend", args=[slug]))
    _visit(page, base, "victor", team_pages, seen)
    staff_pages = [reverse("team-list"), reverse("platform-spend"), reverse("approvals")]
    staff_pages.append(reverse("team-quota", args=[slug]))
    _visit(page, base, "pat", staff_pages, seen)
    _log_in(page, base, "alice")
    page.goto(f"{base}{reverse('workspaces:request')}")
    seen["gpus-left"]["request"] = _numbers(page, "gpus-left", "vision")
    page.goto(f"{base}{reverse('team-detail', args=[slug])}")
    expect(page.locator("#members tbody tr")).to_have_count(3)

    burn = {url: n for url, n in seen["burn-rate"].items() if n}
    assert len(burn) == 5 and {x for n in burn.values() for x in n} == {Decimal("11.1540")}, burn
    gpus = {url: n for url, n in seen["gpus-in-use"].items() if n}
    assert len(gpus) == 4 and {x for n in gpus.values() for x in n} == {Decimal(6)}, gpus
    assert seen["gpus-left"]["request"] == [Decimal(2)]
    members = {url: n for url, n in seen["members"].items() if n}
    assert members and {x for n in members.values() for x in n} == {Decimal(3)}, members
