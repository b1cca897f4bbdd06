"""The GPU memory estimate's panel on the request form, in Debian's Chromium: choosing a
preset and a context answers in place (htmx), for the team chosen in the request form."""

import shutil
from decimal import Decimal

import pytest
from playwright.sync_api import expect, sync_playwright

from tests.browser.test_browser import CHROMIUM, CHROMIUM_ARGS, _log_in, _screenshot
from tests.factories import OfferingFactory

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason="needs Debian's chromium (make test)"),
]


def test_the_panel_estimates_in_place_and_marks_what_the_team_may_take(
    live_server, cast, monkeypatch
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    OfferingFactory(
        vm_size="Standard_NC4as_T4_v3",
        gpu_model="T4",
        gpu_memory_gib=16,
        price_per_hour=Decimal("0.5260"),
    )
    OfferingFactory()  # an A100 80 GiB in eastus, inside the team's quota
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        _log_in(page, live_server.url, "alice")
        page.goto(f"{live_server.url}/workspaces/new/")
        page.locator("#estimate-panel > summary").click()  # closed until asked for
        panel = page.locator("#estimate-form")
        panel.get_by_label("Preset").select_option("llama-3-8b")
        # The preset fills the fields it gives, from the model's config.json (issue 29).
        expect(panel.get_by_label("Layers")).to_have_value("32")
        expect(panel.get_by_label("KV heads")).to_have_value("8")
        expect(panel.get_by_label("Parameters (billions)")).to_have_value("8.03")
        panel.get_by_label("Preset").select_option("llama-3-70b")
        expect(panel.get_by_label("Layers")).to_have_value("80")  # follows the preset
        panel.get_by_label("Preset").select_option("llama-3-8b")
        panel.get_by_label("Context (tokens)").fill("8192")
        panel.get_by_role("button", name="Estimate").click()
        result = page.locator("#estimate-result")
        # Llama-3-8B in BF16: 14.96 GiB of weights, 1.00 GiB of KV cache at 8,192 tokens.
        expect(result).to_contain_text("KV cache")
        expect(result.locator("tr", has_text="KV cache")).to_contain_text("1.00")
        expect(result).to_contain_text("19.45 GiB")
        row = result.locator("#estimate-fits tr", has_text="Standard_NC24ads_A100_v4")
        expect(row).to_contain_text("Allowed")
        expect(result).not_to_contain_text("Standard_NC4as_T4_v3")  # 16 GiB: too small
        _screenshot(page, "sizing-estimate-panel")
        browser.close()
