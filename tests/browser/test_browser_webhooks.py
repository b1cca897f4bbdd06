"""The team's Webhooks page in Chromium: the Add a webhook form keeps its event check boxes
inside the card, each label on one line beside its box, and no control over another, at
1280 and 390 px; its help says the URL rule; and a test message shows in the open delivery
log without a reload (a live region)."""

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from teams import webhook_settings
from tests.browser.test_browser import _log_in, _screenshot, browser_page, pytestmark  # noqa: F401
from tests.webhook_receiver import start_receiver

# Where each control of the add form is, in CSS pixels (getBoundingClientRect).
LAYOUT = """() => {
  // Page coordinates (scroll added), so boxes below the fold compare with the card.
  const box = el => { const r = el.getBoundingClientRect();
                      return {x: r.x, y: r.y + scrollY, right: r.right, bottom: r.bottom + scrollY,
                              h: r.height}; };
  const lands = b => {  // what a click on the box's centre lands on, with the box in view
    b.scrollIntoView({block: "center", behavior: "instant"});  // Bootstrap scrolls smoothly
    const r = b.getBoundingClientRect();
    const el = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
    return el === b || el === b.labels[0];
  };
  const boxes = [...document.querySelectorAll('form.card input[name=events]')];
  return {
    card: box(document.querySelector('form.card')),
    boxes: boxes.map(b => ({name: b.labels[0].textContent.trim(), box: box(b),
                            label: box(b.labels[0]),
                            line: parseFloat(getComputedStyle(b.labels[0]).lineHeight),
                            hit: lands(b)})),
    button: box([...document.querySelectorAll('form.card button')].at(-1)),
    scroll: document.documentElement.scrollWidth - document.documentElement.clientWidth,
  };
}"""


def _overlap(a, b) -> bool:
    return (
        a["x"] < b["right"]
        and b["x"] < a["right"]
        and a["y"] < b["bottom"]
        and b["y"] < a["bottom"]
    )


@pytest.mark.parametrize("width", [1280, 390])
def test_the_add_form_keeps_its_boxes_in_the_card_at(live_server, cast, browser_page, width):  # noqa: F811
    page = browser_page
    page.set_viewport_size({"width": width, "height": 900})
    _log_in(page, live_server.url, cast.team_admin.username)
    page.goto(f"{live_server.url}/teams/{cast.team.slug}/webhooks/")
    page.get_by_role("heading", name="Add a webhook").scroll_into_view_if_needed()
    _screenshot(page, f"webhook-form-{width}")
    found = page.evaluate(LAYOUT)
    card = found["card"]
    assert found["scroll"] <= 0, "the page scrolls sideways"
    assert len(found["boxes"]) >= 5
    for each in found["boxes"]:
        name, box, label = each["name"], each["box"], each["label"]
        assert card["x"] <= box["x"] and box["right"] <= card["right"], f"{name}: out of the card"
        assert label["h"] < 1.6 * each["line"], f"{name}: its label wraps ({label['h']} px)"
        assert not _overlap(box, found["button"]), f"the button covers {name}"
        assert each["hit"], f"a click on {name}'s box lands elsewhere"
        assert label["x"] >= box["right"] - 1, f"{name}: the label is not beside its box"
    assert found["button"]["y"] >= max(b["label"]["bottom"] for b in found["boxes"])
    help_text = page.locator("#id_url").locator("xpath=..").locator(".form-text")
    expect(help_text).to_contain_text("https:// to a public internet address")
    page.get_by_label("Approval needed").check()  # the click lands on the box itself
    expect(page.get_by_label("Approval needed")).to_be_checked()


@pytest.fixture
def receiver(settings):
    settings.WEBHOOK_ALLOW_LOOPBACK = True  # a local receiver (the embedded demo's rule)
    server = start_receiver()
    server.delay["/hook"] = 1.0  # the log page is open before the attempt is recorded
    yield server
    server.server.shutdown()


def test_a_test_message_shows_in_the_open_delivery_log(
    live_server,
    cast,
    celery_worker_thread,
    browser_page,  # noqa: F811
    receiver,
):
    hook, _ = webhook_settings.webhook_create(
        actor=cast.team_admin, team=cast.team, kind="slack", name="lab-alerts",
        url=receiver.url("/hook"), events=["budget"], now=timezone.now(),
    )  # fmt: skip
    page = browser_page
    _log_in(page, live_server.url, cast.team_admin.username)
    page.goto(f"{live_server.url}/teams/{cast.team.slug}/webhooks/")
    page.locator(f"#webhook-{hook.pk}").get_by_role("button", name="Send a test").click()
    expect(page.get_by_role("heading", name="Delivery log of lab-alerts")).to_be_visible()
    log = page.locator("main")
    expect(log).not_to_contain_text("Nothing sent yet")  # it says the message is waiting
    # The worker posts it a second later; the open page shows it without a reload.
    expect(log.locator("#webhook-log tbody tr")).to_have_count(1, timeout=15_000)
    expect(log.locator("#webhook-log tbody tr").first).to_contain_text("200")
    assert len(receiver.at("/hook")) == 1
