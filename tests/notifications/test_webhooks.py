"""Team webhooks delivered to a local receiver: each service's payload, the generic hook's
signature and timestamp, retries with back-off, the delivery log, automatic disabling with
the admins' notice, 410 Gone, one bad hook beside a good one, and secrets never in clear."""

import hashlib
import hmac
import json
import time
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core import mail
from django.core.management import call_command

from notifications import webhook_crypto, webhooks
from notifications.models import DeliveryState, Notice, Webhook, WebhookAttempt, WebhookDelivery
from notifications.tasks import retry_webhook_deliveries
from notifications.webhook_payloads import verify
from teams import webhook_settings
from teams.models import AuditEntry
from tests.webhook_receiver import start_receiver

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
ALL = [e.value for e in webhooks.CHOOSABLE]
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
    _server.answers.clear()
    _server.delay.clear()
    settings.PORTAL_URL = "https://portal.example.org"
    return _server


@pytest.fixture
def emit(django_capture_on_commit_callbacks):
    """Emit an event of the cast's team at ``now`` (frozen there) and run what it queues
    after commit, as the worker would (eager Celery)."""

    def run(cast, now=T0, event="approval_needed", title="Approval needed: A100", text=""):
        with (
            time_machine.travel(now, tick=False),
            django_capture_on_commit_callbacks(execute=True),
        ):
            return webhooks.webhook_event_emit(
                team_id=cast.team.pk,
                event=event,
                title=title,
                text=text or "alice asks for 1 A100 in eastus for Vision Lab: deadline",
                link="/approvals/",
                data={"workspace_name": "big-train"},
                now=now,
            )

    return run


def _hook(cast, receiver, kind="generic", path="/hook", events=None, name=None):
    return webhook_settings.webhook_create(
        actor=cast.team_admin,
        team=cast.team,
        kind=kind,
        name=name or f"{kind} {path}",
        url=receiver.url(path),
        events=events or ALL,
        now=T0,
    )


def _retry_at(at):
    with time_machine.travel(at, tick=False):
        retry_webhook_deliveries.delay()


def test_microsoft_teams_gets_an_adaptive_card_in_a_message(cast, receiver, emit):
    _hook(cast, receiver, kind="teams", path="/teams")
    emit(cast)
    [got] = receiver.at("/teams")
    body = got.json()
    assert got.headers["Content-Type"] == "application/json; charset=utf-8"
    assert body["type"] == "message"
    [attachment] = body["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert (card["type"], card["version"]) == ("AdaptiveCard", "1.4")
    texts = [b["text"] for b in card["body"]]
    assert texts == [
        "Approval needed: A100",
        "alice asks for 1 A100 in eastus for Vision Lab: deadline",
        "Team Vision Lab",
    ]
    assert card["actions"] == [
        {
            "type": "Action.OpenUrl",
            "title": "Open in the portal",
            "url": "https://portal.example.org/approvals/",
        }
    ]


def test_a_researchers_markdown_stays_text_in_a_teams_card(cast, receiver, emit):
    _hook(cast, receiver, kind="teams", path="/teams-md")
    emit(
        cast,
        title="Approval needed: **urgent**",
        text="Justification: [Approve it here](https://evil.example/login)\n- _now_ `x`",
    )
    card = receiver.at("/teams-md")[0].json()["attachments"][0]["content"]
    title, text, _ = (b["text"] for b in card["body"])
    assert title == "Approval needed: \\*\\*urgent\\*\\*"
    assert text == (
        "Justification: \\[Approve it here\\]\\(https://evil.example/login\\)\n"
        "\\- \\_now\\_ \\`x\\`"
    )
    assert "](" not in text  # no Markdown link left for Teams to render


def test_slack_gets_blocks_with_its_three_characters_escaped(cast, receiver, emit):
    _hook(cast, receiver, kind="slack", path="/slack")
    emit(cast, title="<!channel> & <https://evil.example|click>", text="a > b")
    body = receiver.at("/slack")[0].json()
    assert body["text"] == "&lt;!channel&gt; &amp; &lt;https://evil.example|click&gt;"
    section, context, actions = body["blocks"]
    assert section == {
        "type": "section",
        "text": {
            "type": "mrkdwn",
            "text": "*&lt;!channel&gt; &amp; &lt;https://evil.example|click&gt;*\na &gt; b",
        },
    }
    assert context["type"] == "context"
    assert context["elements"] == [{"type": "mrkdwn", "text": "Team Vision Lab"}]
    [button] = actions["elements"]
    assert button["type"] == "button" and button["url"] == "https://portal.example.org/approvals/"


def test_the_generic_hook_is_signed_over_the_timestamp_and_body(cast, receiver, emit):
    _, secret = _hook(cast, receiver, path="/json")
    [delivery_id] = emit(cast)
    [got] = receiver.at("/json")
    h = got.headers
    assert h["X-Portal-Event"] == "approval_needed" and h["X-Portal-Delivery"] == delivery_id
    assert h["X-Portal-Timestamp"] == str(int(T0.timestamp()))
    assert h["X-Portal-Signature"].startswith("sha256=")
    stamp, sig = h["X-Portal-Timestamp"], h["X-Portal-Signature"]
    # As docs/notifications.md tells a receiver to check it, independently of our code:
    signed = stamp.encode() + b"." + got.body
    assert sig == "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    now = int(T0.timestamp()) + 10
    assert verify(secret, stamp, got.body, sig, now=now, window=300)
    assert not verify(secret, stamp, got.body + b" ", sig, now=now, window=300)  # altered
    assert not verify("another secret", stamp, got.body, sig, now=now, window=300)
    assert not verify(secret, stamp, got.body, sig, now=now + 600, window=300)  # replayed late
    body = got.json()
    assert body == {
        "id": delivery_id,
        "event": "approval_needed",
        "occurred_at": "2026-11-20T12:00:00+00:00",
        "team": {"slug": "vision", "name": "Vision Lab"},
        "data": {
            "title": "Approval needed: A100",
            "text": "alice asks for 1 A100 in eastus for Vision Lab: deadline",
            "url": "https://portal.example.org/approvals/",
            "workspace_name": "big-train",
        },
    }


def test_only_enabled_hooks_that_chose_the_event_are_told(cast, receiver, emit):
    _hook(cast, receiver, path="/chose", events=["approval_needed"])
    _hook(cast, receiver, path="/other", events=["budget"])
    off, _ = _hook(cast, receiver, path="/off")
    Webhook.objects.filter(pk=off.pk).update(enabled=False)
    emit(cast)
    assert [r.path for r in receiver.received] == ["/chose"]


def test_a_failing_service_is_retried_with_back_off_then_given_up(cast, receiver, emit):
    hook, _ = _hook(cast, receiver, path="/down")
    receiver.answer("/down", 500, 502, 503, 500, 500, 200)
    emit(cast)
    at = T0
    for tried, wait in enumerate([30, 60, 120, 240], start=1):
        assert len(receiver.at("/down")) == tried
        _retry_at(at + timedelta(seconds=wait - 1))  # not yet due
        assert len(receiver.at("/down")) == tried
        at += timedelta(seconds=wait)
        _retry_at(at)
    assert len(receiver.at("/down")) == 5
    _retry_at(at + timedelta(hours=2))
    assert len(receiver.at("/down")) == 5  # bounded: 5 attempts
    delivery = WebhookDelivery.objects.get()
    assert (delivery.state, delivery.attempts) == (DeliveryState.FAILED, 5)
    log = list(WebhookAttempt.objects.filter(webhook=hook).order_by("attempt"))
    assert [(a.attempt, a.status_code, a.outcome) for a in log] == [
        (1, 500, "http_error"),
        (2, 502, "http_error"),
        (3, 503, "http_error"),
        (4, 500, "http_error"),
        (5, 500, "http_error"),
    ]
    assert [a.at - T0 for a in log] == [timedelta(seconds=s) for s in (0, 30, 90, 210, 450)]
    assert log[0].error == "HTTP 500 Internal Server Error"  # never the remote's body
    hook.refresh_from_db()
    assert hook.consecutive_failures == 1 and hook.enabled
    # The same delivery id on every retry, so a receiver can drop duplicates.
    assert len({r.headers["X-Portal-Delivery"] for r in receiver.at("/down")}) == 1


def test_a_retry_that_succeeds_resets_the_count_of_failures(cast, receiver, emit):
    hook, _ = _hook(cast, receiver, path="/flaky")
    Webhook.objects.filter(pk=hook.pk).update(consecutive_failures=7)
    receiver.answer("/flaky", 503)
    emit(cast)
    _retry_at(T0 + timedelta(seconds=30))
    delivery = WebhookDelivery.objects.get()
    assert (delivery.state, delivery.attempts) == (DeliveryState.DELIVERED, 2)
    hook.refresh_from_db()
    assert hook.consecutive_failures == 0


def test_ten_failed_deliveries_in_a_row_disable_the_hook_and_tell_its_admins(cast, receiver, emit):
    hook, _ = _hook(cast, receiver, path="/revoked", name="lab-alerts")
    receiver.answer("/revoked", *[403] * 20)  # Slack's invalid_token: not retried
    for i in range(9):
        emit(cast, now=T0 + timedelta(minutes=i))
    hook.refresh_from_db()
    assert hook.enabled and hook.consecutive_failures == 9
    assert not Notice.objects.filter(user=cast.team_admin).exists()
    emit(cast, now=T0 + timedelta(minutes=9))
    hook.refresh_from_db()
    assert not hook.enabled and hook.disabled_at == T0 + timedelta(minutes=9)
    assert hook.disabled_reason.startswith("10 deliveries failed in a row")
    assert len(receiver.at("/revoked")) == 10  # one attempt each: a 403 is not retried
    [notice] = Notice.objects.filter(user=cast.team_admin)
    assert notice.text.startswith("The webhook lab-alerts (http://127.0.0.1:")
    assert "10 deliveries failed in a row" in notice.text
    assert notice.link == "/teams/vision/webhooks/"
    assert not Notice.objects.filter(user=cast.researcher).exists()
    assert ["victor@example.org"] in [m.to for m in mail.outbox]
    emit(cast, now=T0 + timedelta(minutes=10))
    assert len(receiver.at("/revoked")) == 10  # a disabled hook is not called


def test_410_gone_disables_the_hook_at_once(cast, receiver, emit):
    hook, _ = _hook(cast, receiver, kind="slack", path="/gone")
    receiver.answer("/gone", 410)
    emit(cast)
    hook.refresh_from_db()
    assert not hook.enabled and "410 Gone" in hook.disabled_reason
    assert WebhookAttempt.objects.get().outcome == "gone"
    assert Notice.objects.filter(user=cast.team_admin, text__contains="410 Gone").exists()
    _retry_at(T0 + timedelta(hours=1))
    assert len(receiver.at("/gone")) == 1


def test_a_hook_that_times_out_or_refuses_does_not_hold_up_another(cast, receiver, emit, settings):
    settings.WEBHOOK_TIMEOUT_SECONDS = 0.3
    receiver.delay["/slow"] = 1.0
    _hook(cast, receiver, path="/slow")
    webhook_settings.webhook_create(
        actor=cast.team_admin,
        team=cast.team,
        kind="slack",
        name="closed port",
        url="http://127.0.0.1:9/services/T000/B000/SECRETPART",
        events=ALL,
        now=T0,
    )
    _hook(cast, receiver, path="/good")
    started = time.monotonic()
    emit(cast)
    assert time.monotonic() - started < 5
    assert len(receiver.at("/good")) == 1
    outcomes = dict(WebhookAttempt.objects.values_list("webhook__name", "outcome"))
    assert outcomes == {
        "generic /slow": "timeout",
        "closed port": "error",
        "generic /good": "ok",
    }
    refused = WebhookAttempt.objects.get(webhook__name="closed port")
    assert refused.error == "No connection (ConnectionError)"
    assert "SECRETPART" not in refused.error


def test_the_database_holds_no_url_or_secret_in_clear(cast, receiver, emit):
    url = "https://hooks.slack.com/services/T0AAA/B0BBB/xoxSecretToken123"
    hook, _ = webhook_settings.webhook_create(
        actor=cast.team_admin, team=cast.team, kind="slack", name="s", url=url, events=ALL,
        now=T0,
    )  # fmt: skip
    _, secret = _hook(cast, receiver, path="/signed-hook-path", name="ours")
    emit(cast)
    hook.refresh_from_db()
    assert hook.url_redacted == "https://hooks.slack.com/…"
    assert webhook_crypto.decrypt(hook.url_encrypted) == url
    rows = [
        *Webhook.objects.values(),
        *WebhookDelivery.objects.values(),
        *WebhookAttempt.objects.values(),
        *AuditEntry.objects.values(),
    ]
    dump = json.dumps(rows, default=str)
    for clear in ("xoxSecretToken123", "T0AAA/B0BBB", secret, "signed-hook-path"):
        assert clear not in dump


def test_rotating_the_key_keeps_every_hook_readable(cast, receiver, settings, emit):
    from cryptography.fernet import Fernet

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.WEBHOOK_ENCRYPTION_KEYS = [old]
    hook, secret = _hook(cast, receiver, path="/rotated")
    settings.WEBHOOK_ENCRYPTION_KEYS = [new, old]
    call_command("webhook_rotate_keys")
    settings.WEBHOOK_ENCRYPTION_KEYS = [new]  # the old key dropped after rotation
    hook.refresh_from_db()
    assert webhook_crypto.decrypt(hook.url_encrypted) == receiver.url("/rotated")
    assert webhook_crypto.decrypt(hook.secret_encrypted) == secret
    emit(cast)
    assert len(receiver.at("/rotated")) == 1


def test_a_url_no_key_opens_is_logged_and_retried_never_sent(cast, receiver, settings, emit):
    from cryptography.fernet import Fernet

    settings.WEBHOOK_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    _hook(cast, receiver, path="/lost-key")
    settings.WEBHOOK_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]  # dropped too early
    emit(cast)
    attempt = WebhookAttempt.objects.get()
    assert attempt.outcome == "error" and "none of WEBHOOK_ENCRYPTION_KEYS" in attempt.error
    assert WebhookDelivery.objects.get().next_attempt_at == T0 + timedelta(seconds=30)
    assert receiver.received == []
