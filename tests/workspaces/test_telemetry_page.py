"""What the workspace page says about telemetry and idleness, and the Keep running button."""

from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone
from django.utils.html import strip_tags

from tests.workspaces.test_sweep import T0, _at, _report, _running
from workspaces import heartbeats
from workspaces.models import WorkspaceExtension

pytestmark = pytest.mark.django_db


def _text(response) -> str:
    """What a person reads on the card: its text without the markup."""
    return " ".join(strip_tags(response.content.decode()).split())


def _page(client, user, ws, when):
    client.force_login(user)
    with time_machine.travel(when, tick=False):
        return client.get(reverse("workspaces:telemetry", args=[ws.pk]), HTTP_HX_REQUEST="true")


def test_a_busy_workspace_says_why_it_runs_with_gpus_and_a_sparkline(client, cast):
    ws, token = _running(cast)
    _report(ws, token, T0, 10, util=87)
    response = _page(client, cast.researcher, ws, _at(10))
    page = response.content.decode()
    assert "Active: GPU 87% at 12:09 UTC." in _text(response)
    assert "<polyline" in page and "GPU utilisation, last 24 hours" in page


def test_an_idle_workspace_says_since_when_and_when_it_stops(client, cast):
    ws, token = _running(cast)
    _report(ws, token, T0, 5, util=90)
    _report(ws, token, _at(5), 20, util=0)
    page = _text(_page(client, cast.researcher, ws, _at(25)))
    assert "Idle since 12:04 UTC" in page
    assert "stops at 12:34 UTC unless you keep it" in page
    assert "This workspace stops at 12:34 UTC." in page  # inside the 10-minute warning
    assert "Keep running for 4 hours" in page


def test_a_silent_agent_shows_no_telemetry(client, cast):
    ws, token = _running(cast)
    _report(ws, token, T0, 2, util=90)
    page = _text(_page(client, cast.researcher, ws, _at(20)))
    assert "No telemetry since 12:01 UTC; stops at 13:01 UTC" in page


def test_while_the_portal_fails_to_store_telemetry_the_page_says_so_and_waits(client, cast):
    ws, token = _running(cast)
    _report(ws, token, T0, 2, util=90)
    heartbeats.telemetry_outage_record(now=_at(18))
    page = _text(_page(client, cast.researcher, ws, _at(20)))
    assert "No telemetry since 12:01 UTC; stops at 13:18 UTC" in page
    assert "The portal failed to store telemetry at 12:18 UTC" in page


def test_times_show_in_the_users_time_zone(client, cast):
    ws, token = _running(cast)
    _report(ws, token, T0, 10, util=87)
    client.cookies["tz"] = "Asia/Tokyo"
    response = _page(client, cast.researcher, ws, _at(10))
    assert "GPU 87% at 21:09 JST." in _text(response)
    assert 'title="2026-11-20 12:09 UTC"' in response.content.decode()  # UTC on hover


def test_keep_running_from_the_page_is_logged_and_shown(client, cast):
    ws, token = _running(cast)
    _report(ws, token, T0, 25, util=0)
    client.force_login(cast.researcher)
    with time_machine.travel(_at(25), tick=False):
        answer = client.post(reverse("workspaces:action", args=[ws.pk, "keep"]))
    assert answer.status_code == 302
    extension = WorkspaceExtension.objects.get(workspace=ws)
    assert extension.user == cast.researcher and extension.hours == 4
    page = _page(client, cast.researcher, ws, _at(26)).content.decode()
    assert "alice kept it for 4 hours" in page and "1 extension left today" in page


def test_a_teammate_sees_the_telemetry_but_no_keep_button(client, cast):
    ws, token = _running(cast)
    _report(ws, token, T0, 5, util=90)
    page = _page(client, cast.teammate, ws, _at(5)).content.decode()
    assert "Active:" in page and "Keep running" not in page


def test_the_card_stops_polling_once_the_workspace_is_deleted(client, cast):
    ws, _ = _running(cast)
    ws.status = "deleted"
    ws.save()
    assert _page(client, cast.researcher, ws, timezone.now() + timedelta(0)).status_code == 286


def test_the_stop_warning_is_at_the_top_of_the_workspace_page_above_its_history(client, cast):
    # Issue 29 item 19: it sat below the whole history, ~1,870 px down a 900 px window.
    ws, token = _running(cast)
    _report(ws, token, T0, 25, util=0)
    client.force_login(cast.researcher)
    with time_machine.travel(_at(25), tick=False):
        page = client.get(reverse("workspaces:detail", args=[ws.pk])).content.decode()
    warning = page.index("This workspace stops at ")
    text = " ".join(strip_tags(page).split())
    assert "This workspace stops at 12:30 UTC." in text
    assert warning < page.index('id="workspace-facts"') < page.index("<h3>History</h3>")
    keep = page.index("Keep running for 4 hours")
    assert keep < page.index('id="workspace-facts"')
    assert page.count("Keep running for 4 hours") == 1  # one button, beside the warning
    assert page.count('id="stop-warning"') == 1 and 'id="stop-warning" data-live' in page
