"""The team's Webhooks page: add (hostile input refused with a form error and nothing
saved), the URL shown redacted, a generic hook's secret shown once, events and on/off,
a test message through the delivery log, delete, and an audit row for each change."""

from zoneinfo import ZoneInfo

import pytest
from django.urls import reverse

from notifications.models import Webhook, WebhookAttempt
from teams.models import AuditEntry
from tests.webhook_receiver import start_receiver

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def _server():
    receiver = start_receiver()
    yield receiver
    receiver.server.shutdown()


@pytest.fixture
def receiver(_server, settings):
    settings.WEBHOOK_ALLOW_LOOPBACK = True  # a local receiver, on PostgreSQL runs too
    _server.received.clear()
    return _server


def _page(slug="vision"):
    return reverse("team-webhooks", kwargs={"slug": slug})


def _add(client, **fields):
    data = {"kind": "slack", "name": "lab", "url": "https://hooks.slack.com/services/T/B/xyz"}
    data |= fields
    data.setdefault("events", ["approval_needed", "budget"])
    return client.post(_page(), data)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"url": "http://hooks.slack.com/services/T/B/x"}, "Use an https:// URL."),
        ({"url": "javascript:alert(1)"}, "The URL needs a host."),
        ({"url": "ftp://hooks.slack.com/x"}, "Use an https:// URL."),
        ({"url": "file:///etc/passwd"}, "The URL needs a host."),
        ({"url": "https://user:pw@hooks.slack.com/x"}, "Leave user names and passwords out"),
        ({"url": "https://hooks.slack.com/x y"}, "only printable characters, no spaces"),
        ({"url": "https://hooks.slack.com/\x00"}, "Null characters are not allowed."),
        ({"url": "https://hooks.slack.com:99999/x"}, "This is not a valid URL."),
        ({"url": "https://" + "a" * 2100}, "at most 2048 characters"),
        ({"url": "https://hööks.example/x"}, "only printable characters"),
        ({"name": "a\nb"}, "Use printable characters only."),
        ({"name": "x" * 101}, "at most 100 characters"),
        ({"name": "a\x00b"}, "Null characters are not allowed."),
        ({"kind": "discord"}, "Select a valid choice"),
        ({"events": ["approval_needed", "rm -rf"]}, "Select a valid choice"),
        ({"events": ["test"]}, "Select a valid choice"),
        ({"events": []}, "This field is required."),
    ],
)
def test_hostile_input_is_a_form_error_and_saves_nothing(client, cast, fields, error):
    client.force_login(cast.team_admin)
    response = _add(client, **fields)
    assert response.status_code == 400
    assert error in response.content.decode()
    assert not Webhook.objects.exists() and not AuditEntry.objects.exists()


def test_plain_http_is_allowed_to_loopback_only(client, cast, settings):
    settings.WEBHOOK_ALLOW_LOOPBACK = True  # the embedded demo (test_webhook_addresses: not prod)
    client.force_login(cast.team_admin)
    assert _add(client, url="http://127.0.0.1:8080/hook").status_code == 302
    assert _add(client, name="lan", url="http://10.0.0.1/hook").status_code == 400


def test_a_second_hook_of_the_same_name_is_refused(client, cast):
    client.force_login(cast.team_admin)
    assert _add(client).status_code == 302
    response = _add(client)
    assert response.status_code == 400
    assert "The team has a webhook of this name already." in response.content.decode()


def test_the_page_shows_the_url_redacted_and_the_add_is_audited(client, cast):
    client.force_login(cast.team_admin)
    response = _add(client, kind="teams", url="https://prod.westus.logic.azure.com/workflows/abc")
    assert response.status_code == 302
    page = client.get(_page()).content.decode()
    assert "https://prod.westus.logic.azure.com/…" in page
    assert "workflows/abc" not in page
    entry = AuditEntry.objects.get(action="webhook.add")
    assert entry.actor == cast.team_admin and entry.team == cast.team
    assert entry.after["url"] == "https://prod.westus.logic.azure.com/…"
    assert "workflows/abc" not in str(entry.after)


def test_a_generic_hooks_secret_is_shown_once(client, cast):
    client.force_login(cast.team_admin)
    response = _add(client, kind="generic", url="https://ci.example.org/hooks/portal")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="webhook-secret"' in page
    assert "no-store" in response["Cache-Control"]  # as the token page: kept by no cache
    secret = page.split('<code id="webhook-secret">')[1].split("</code>")[0]
    assert len(secret) >= 40
    assert secret not in client.get(_page()).content.decode()


def test_events_and_switching_off_are_saved_and_audited(client, cast):
    client.force_login(cast.team_admin)
    _add(client)
    hook = Webhook.objects.get()
    change = reverse("team-webhook-change", kwargs={"slug": "vision", "pk": hook.pk})
    assert client.post(change, {"events": ["failure", "eviction"]}).status_code == 302
    hook.refresh_from_db()
    assert hook.events == ["failure", "eviction"] and not hook.enabled
    assert hook.disabled_reason == "Disabled by victor"
    entry = AuditEntry.objects.get(action="webhook.change")
    assert entry.before["enabled"] and not entry.after["enabled"]
    client.post(change, {"events": ["failure"], "enabled": "on"})
    hook.refresh_from_db()
    assert hook.enabled and hook.disabled_at is None and hook.consecutive_failures == 0


def test_a_test_message_reaches_the_hook_and_its_log(
    client, cast, receiver, django_capture_on_commit_callbacks
):
    client.force_login(cast.team_admin)
    client.cookies["tz"] = "Europe/Berlin"
    _add(client, kind="teams", url=receiver.url("/t"), events=["budget"])
    hook = Webhook.objects.get()
    test = reverse("team-webhook-test", kwargs={"slug": "vision", "pk": hook.pk})
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(test)
    assert response.status_code == 302
    [got] = receiver.at("/t")
    card = got.json()["attachments"][0]["content"]
    assert card["body"][0]["text"] == "Test message from the GPU portal for Vision Lab"
    attempt = WebhookAttempt.objects.get()
    assert (attempt.outcome, attempt.status_code, attempt.event) == ("ok", 200, "test")
    log = client.get(response["Location"]).content.decode()
    assert "Test message" in log and "Delivered" in log and "200" in log
    local = attempt.at.astimezone(ZoneInfo("Europe/Berlin"))
    assert local.strftime("%H:%M") in log


def test_delete_removes_the_hook_and_is_audited(client, cast):
    client.force_login(cast.team_admin)
    _add(client)
    hook = Webhook.objects.get()
    delete = reverse("team-webhook-delete", kwargs={"slug": "vision", "pk": hook.pk})
    assert client.post(delete).status_code == 302
    assert not Webhook.objects.exists()
    assert AuditEntry.objects.get(action="webhook.delete").before["name"] == "lab"


def test_another_teams_hook_is_not_found(client, cast):
    client.force_login(cast.other_team_admin)
    client.post(
        _page("nlp"),
        {"kind": "slack", "name": "x", "url": "https://h.example/x", "events": ["budget"]},
    )
    theirs = Webhook.objects.get()
    client.force_login(cast.team_admin)
    log = reverse("team-webhook-log", kwargs={"slug": "vision", "pk": theirs.pk})
    assert client.get(log).status_code == 404
