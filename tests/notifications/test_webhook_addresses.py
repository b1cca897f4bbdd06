"""A team admin cannot make the worker request the portal's own network through a webhook:
internal addresses, however spelt or resolved, are refused when a hook is saved and again at
delivery against the address actually connected to (DNS rebinding); plain-http loopback only
where WEBHOOK_ALLOW_LOOPBACK is on (the embedded demo); the delivery log never shows the
remote's body."""

import socket
from datetime import UTC, datetime

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from notifications import webhook_addresses, webhooks
from notifications.models import Webhook, WebhookAttempt
from notifications.webhook_delivery import webhook_deliver
from portal.required_settings import webhook_allow_loopback
from teams import webhook_settings
from tests.webhook_receiver import start_receiver

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
ALL = [e.value for e in webhooks.CHOOSABLE]
PUBLIC = "93.184.215.14"


@pytest.fixture(scope="module")
def _server():
    receiver = start_receiver()
    yield receiver
    receiver.server.shutdown()


@pytest.fixture
def receiver(_server):
    _server.received.clear()
    _server.answers.clear()
    return _server


@pytest.fixture
def dns(monkeypatch):
    """Stand in for DNS (the tests have none): names -> addresses, as the portal's check
    resolves them."""
    names: dict[str, list[str]] = {}
    real = webhook_addresses.resolve
    monkeypatch.setattr(
        webhook_addresses, "resolve", lambda host, port: names.get(host) or real(host, port)
    )
    return names


def _add(client, url):
    data = {"kind": "slack", "name": "lab", "url": url, "events": ["budget"]}
    return client.post(reverse("team-webhooks", kwargs={"slug": "vision"}), data)


INTERNAL = [
    "http://127.0.0.1:5432/",
    "http://[::1]:6379/",
    "http://localhost:8100/_sim/reset",
    "https://127.0.0.1/",
    "https://localhost/",
    "https://169.254.169.254/metadata/instance",
    "https://10.0.0.1/",
    "https://172.16.5.4/",
    "https://192.168.1.1/",
    "https://100.64.0.1/",
    "https://0.0.0.0/",
    "https://[::]/",
    "https://[fd00::1]/",
    "https://[fe80::1]/",
    "https://[::ffff:127.0.0.1]/",
    "https://[::ffff:a9fe:a9fe]/",
    "https://0x7f000001/",
    "https://2130706433/",
    "https://0177.0.0.1/",
    "https://127.1/",
    "https://224.0.0.1/",
    "https://240.0.0.1/",
    "https://kubernetes.default.svc/api/v1/namespaces",
    "https://kubernetes.default/",
    "https://redis.portal.svc.cluster.local/",
    "https://redis/",
    "https://metadata.internal/",
    "https://127.0.0.1.nip.io/",
    "https://internal.example.org/",
]


@pytest.mark.parametrize("url", INTERNAL)
def test_internal_addresses_are_refused_when_saved(client, cast, settings, dns, url):
    settings.WEBHOOK_ALLOW_LOOPBACK = False  # production
    dns["127.0.0.1.nip.io"] = ["127.0.0.1"]
    dns["internal.example.org"] = [PUBLIC, "10.1.2.3"]  # one internal answer is enough
    client.force_login(cast.team_admin)
    response = _add(client, url)
    assert response.status_code == 400
    assert "must lead to a public internet address" in response.content.decode() or (
        "Use an https:// URL." in response.content.decode()
    )
    assert not Webhook.objects.exists()


def test_public_hosts_are_taken(client, cast, settings, dns):
    settings.WEBHOOK_ALLOW_LOOPBACK = False
    dns["hooks.slack.com"] = [PUBLIC]
    client.force_login(cast.team_admin)
    assert _add(client, "https://hooks.slack.com/services/T/B/x").status_code == 302
    assert _add(client, f"https://{PUBLIC}/hook").status_code == 400  # the name is taken
    assert Webhook.objects.count() == 1


def test_plain_http_loopback_only_where_the_demo_allows_it(client, cast, settings):
    client.force_login(cast.team_admin)
    settings.WEBHOOK_ALLOW_LOOPBACK = False
    assert _add(client, "http://127.0.0.1:8080/hook").status_code == 400
    settings.WEBHOOK_ALLOW_LOOPBACK = True
    assert _add(client, "https://10.0.0.1/hook").status_code == 400
    assert _add(client, "https://127.0.0.1/hook").status_code == 400  # https: not the demo's
    assert _add(client, "http://127.0.0.1:8080/hook").status_code == 302


def test_production_refuses_the_loopback_switch():
    with pytest.raises(ImproperlyConfigured, match="WEBHOOK_ALLOW_LOOPBACK"):
        webhook_allow_loopback(configured=True, embedded=False, azure_credential="default")
    assert webhook_allow_loopback(configured=True, embedded=True, azure_credential="default")
    assert not webhook_allow_loopback(configured=False, embedded=False, azure_credential="default")


def _deliver(hook):
    delivery_id = webhooks.webhook_test_send(actor=hook.created_by, hook=hook, now=T0)
    webhook_deliver(delivery_id=delivery_id, now=T0)
    return WebhookAttempt.objects.get(delivery_id=delivery_id)


def test_dns_rebinding_fails_at_the_connected_address(cast, settings, dns, receiver, monkeypatch):
    """Saved while the name resolved to a public address; at delivery the connect resolves
    it to the portal's own host: nothing is sent, and the log says why."""
    settings.WEBHOOK_ALLOW_LOOPBACK = False
    dns["rebind.example.org"] = [PUBLIC]  # what the portal's own look-ups see
    port = receiver.server.server_address[1]
    hook, _ = webhook_settings.webhook_create(
        actor=cast.team_admin, team=cast.team, kind="slack", name="rebind",
        url=f"https://rebind.example.org:{port}/hook", events=ALL, now=T0,
    )  # fmt: skip
    real = socket.getaddrinfo

    def rebound(host, *args, **kwargs):  # the connect's own look-up: now loopback
        return real("127.0.0.1" if host == "rebind.example.org" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebound)
    attempt = _deliver(hook)
    assert attempt.outcome == "error" and attempt.status_code is None
    assert "public internet address" in attempt.error
    assert receiver.received == []
    assert attempt.delivery.state == "failed"  # refused for good, not retried


def test_a_stored_internal_url_is_refused_at_delivery(cast, settings, receiver):
    """A hook saved while loopback was allowed (or before the rule) is not posted to."""
    settings.WEBHOOK_ALLOW_LOOPBACK = True
    hook, _ = webhook_settings.webhook_create(
        actor=cast.team_admin, team=cast.team, kind="generic", name="old",
        url=receiver.url("/old"), events=ALL, now=T0,
    )  # fmt: skip
    settings.WEBHOOK_ALLOW_LOOPBACK = False
    attempt = _deliver(hook)
    assert "public internet address" in attempt.error
    assert receiver.received == []


def test_the_log_shows_the_status_never_the_remotes_body(cast, settings, receiver):
    settings.WEBHOOK_ALLOW_LOOPBACK = True
    hook, _ = webhook_settings.webhook_create(
        actor=cast.team_admin, team=cast.team, kind="generic", name="internal",
        url=receiver.url("/secret-service"), events=ALL, now=T0,
    )  # fmt: skip
    receiver.answer("/secret-service", 500)  # its body: "invalid_token"
    attempt = _deliver(hook)
    assert attempt.error == "HTTP 500 Internal Server Error"
    assert "invalid_token" not in attempt.error


def test_the_forms_help_says_the_rule_where_the_portal_runs(client, cast, settings):
    client.force_login(cast.team_admin)
    page = reverse("team-webhooks", kwargs={"slug": "vision"})
    settings.WEBHOOK_ALLOW_LOOPBACK = False
    text = client.get(page).content.decode()
    assert "public internet address" in text and "http:// to 127.0.0.1" not in text
    settings.WEBHOOK_ALLOW_LOOPBACK = True
    assert "this demo also takes http:// to 127.0.0.1" in client.get(page).content.decode()
