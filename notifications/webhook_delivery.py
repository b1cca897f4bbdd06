"""Delivering a webhook event: one HTTP attempt per task run, logged; back-off and a bound on
retries; a hook that keeps failing, or that its service says is gone (410), is disabled and
the team's admins are told.

Each attempt first claims its delivery (moves ``next_attempt_at`` past its own timeout in a
short transaction), so the retry the task queued and the beat's safety net
(webhook_deliveries_due) never post the same attempt twice. The POST runs outside any
transaction: a slow service holds no lock.
"""

import http
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F
from django.urls import reverse
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from live import stamps
from notifications import webhook_crypto
from notifications.models import (
    DeliveryState,
    Webhook,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEvent,
)
from notifications.notices import notice_about, notice_send
from notifications.webhook_addresses import address_refusal, peer_refusal
from notifications.webhook_payloads import Facts, build

Outcome = WebhookAttempt.Outcome


@dataclass(frozen=True)
class Sent:
    """What one POST came to: the HTTP status (None without an answer), the outcome, how
    long it took (ms) and a short error text with the URL scrubbed out."""

    status: int | None
    outcome: str
    duration_ms: int
    error: str = ""
    permanent: bool = False  # no retry changes it (an address the portal may not post to)


def backoff_seconds(attempt: int) -> float:
    """The wait after failed attempt ``attempt`` (1-based): WEBHOOK_BACKOFF_SECONDS doubled
    each time (30, 60, 120, 240 s by default), at most an hour."""
    base = float(settings.WEBHOOK_BACKOFF_SECONDS)
    return float(min(base * 2 ** (attempt - 1), 3600.0))


def webhook_deliver(*, delivery_id: str, now: datetime) -> float | None:
    """Make the delivery's next attempt if it is due. Returns the seconds until the next
    attempt when this one failed and another is allowed, else None (delivered, given up,
    not due, or already being tried elsewhere). Never raises for the service's answer."""
    delivery = _claim(delivery_id, now)
    if delivery is None:
        return None
    hook = delivery.webhook
    try:
        url = webhook_crypto.decrypt(hook.url_encrypted)
        secret = webhook_crypto.decrypt(hook.secret_encrypted) if hook.secret_encrypted else ""
    except webhook_crypto.InvalidToken:  # a key dropped before rotation: logged, counted
        why = "The stored URL opens with none of WEBHOOK_ENCRYPTION_KEYS"
        return _record(delivery, Sent(None, Outcome.ERROR, 0, why), now)
    request = build(
        kind=hook.kind,
        facts=Facts.from_json(delivery.payload),
        event=delivery.event,
        delivery_id=str(delivery.pk),
        occurred_at=delivery.created_at,
        secret=secret,
        now=now,
    )
    sent = _post(url, request.body, request.headers)
    return _record(delivery, sent, now)


def _claim(delivery_id: str, now: datetime) -> WebhookDelivery | None:
    """Lock the delivery; None unless it is pending and due and its hook may be used (a
    disabled hook's deliveries are abandoned, a test message excepted)."""
    lease = timedelta(seconds=float(settings.WEBHOOK_TIMEOUT_SECONDS) + 30)
    with transaction.atomic():
        delivery = (
            WebhookDelivery.objects.select_for_update()
            .select_related("webhook__team")
            .filter(pk=delivery_id, state=DeliveryState.PENDING)
            .first()
        )
        if delivery is None or (delivery.next_attempt_at or now) > now:
            return None
        if not delivery.webhook.enabled and delivery.event != WebhookEvent.TEST:
            delivery.state = DeliveryState.ABANDONED
            delivery.save(update_fields=["state"])
            return None
        delivery.attempts += 1
        delivery.next_attempt_at = now + lease
        delivery.save(update_fields=["attempts", "next_attempt_at"])
    return delivery


class AddressRefused(OSError):
    """The socket connected to an address a hook may not reach (notifications.webhook_addresses)."""


def _guarded(base: type[HTTPConnection], scheme: str) -> type[HTTPConnection]:
    class Guarded(base):  # type: ignore[valid-type,misc]
        def _new_conn(self) -> socket.socket:
            # Checked on the connected socket, before TLS or a byte of the request: the name
            # is resolved once, by the connect itself, so DNS rebinding cannot slip past.
            sock: socket.socket = super()._new_conn()
            refusal = peer_refusal(sock, scheme=scheme)
            if refusal:
                sock.close()
                raise AddressRefused(refusal)
            return sock

    return Guarded


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _guarded(HTTPConnection, "http")


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _guarded(HTTPSConnection, "https")  # type: ignore[assignment]


class GuardedAdapter(HTTPAdapter):
    """requests' adapter whose connections refuse internal peers (AddressRefused)."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}


def _refused_in(error: BaseException) -> AddressRefused | None:
    """The AddressRefused that urllib3 and requests wrapped into ``error``, if any."""
    seen: list[BaseException] = [error]
    while seen:
        current = seen.pop()
        if isinstance(current, AddressRefused):
            return current
        seen.extend(a for a in current.args if isinstance(a, BaseException))
        seen.extend(c for c in (current.__cause__, current.__context__) if c is not None)
    return None


def _post(url: str, body: bytes, headers: dict[str, str]) -> Sent:
    """One POST of ``body`` to ``url``. What comes back to the team's log is the status and
    a short reason of our own words: never the remote's body (it could be an internal
    service's answer)."""
    started = time.monotonic()
    parts = urlsplit(url)
    default_port = 443 if parts.scheme == "https" else 80
    refusal = address_refusal(
        parts.hostname or "", scheme=parts.scheme, port=parts.port or default_port
    )
    if refusal:
        return Sent(None, Outcome.ERROR, 0, refusal, permanent=True)
    with requests.Session() as session:
        session.mount("http://", GuardedAdapter())
        session.mount("https://", GuardedAdapter())
        try:
            answer = session.post(
                url,
                data=body,
                headers=headers,
                timeout=float(settings.WEBHOOK_TIMEOUT_SECONDS),
                allow_redirects=False,  # a redirect could lead the body somewhere else
                stream=True,  # the answer's body is never read
            )
        except requests.Timeout:
            return Sent(None, Outcome.TIMEOUT, _ms(started), "No answer within the timeout")
        except requests.RequestException as error:
            refused = _refused_in(error)
            if refused is not None:
                return Sent(None, Outcome.ERROR, _ms(started), str(refused), permanent=True)
            # Never the error's own text: it quotes the URL.
            why = f"No connection ({type(error).__name__})"
            return Sent(None, Outcome.ERROR, _ms(started), why)
        answer.close()  # the body is never read: it is not ours to show
    ms = _ms(started)
    if 200 <= answer.status_code < 300:
        return Sent(answer.status_code, Outcome.OK, ms)
    outcome = Outcome.GONE if answer.status_code == 410 else Outcome.HTTP_ERROR
    return Sent(
        answer.status_code, outcome, ms, f"HTTP {answer.status_code} {_phrase(answer.status_code)}"
    )


def _phrase(code: int) -> str:
    """The standard reason phrase of ``code`` (ours, not the remote's), or ""."""
    try:
        return http.HTTPStatus(code).phrase
    except ValueError:
        return ""


def _ms(started: float) -> int:
    return max(0, round((time.monotonic() - started) * 1000))


def _permanent(sent: Sent) -> bool:
    """A refusal that no retry changes: a 4xx other than 408 (timeout) and 429 (slow down)."""
    code = sent.status or 0
    return sent.permanent or (400 <= code < 500 and code not in (408, 429))


def _record(delivery: WebhookDelivery, sent: Sent, now: datetime) -> float | None:
    hook = delivery.webhook
    with transaction.atomic():
        stamps.bump(stamps.topic("webhook", hook.pk))  # the open delivery log, once committed
        WebhookAttempt.objects.create(
            webhook=hook,
            delivery=delivery,
            event=delivery.event,
            at=now,
            attempt=delivery.attempts,
            status_code=sent.status,
            outcome=sent.outcome,
            duration_ms=sent.duration_ms,
            error=sent.error,
        )
        if sent.outcome == Outcome.OK:
            _finish(delivery, DeliveryState.DELIVERED)
            Webhook.objects.filter(pk=hook.pk).update(consecutive_failures=0)
            return None
        if sent.outcome == Outcome.GONE:
            _finish(delivery, DeliveryState.FAILED)
            _disable(hook, "The service answered 410 Gone: the webhook was removed there.", now)
            return None
        if _permanent(sent) or delivery.attempts >= settings.WEBHOOK_MAX_ATTEMPTS:
            _finish(delivery, DeliveryState.FAILED)
            _count_failure(hook, sent, now)
            return None
        delay = backoff_seconds(delivery.attempts)
        delivery.next_attempt_at = now + timedelta(seconds=delay)
        delivery.save(update_fields=["next_attempt_at"])
    return delay


def _finish(delivery: WebhookDelivery, state: str) -> None:
    delivery.state, delivery.next_attempt_at = state, None
    delivery.save(update_fields=["state", "next_attempt_at"])


def _count_failure(hook: Webhook, sent: Sent, now: datetime) -> None:
    """One more delivery failed in a row; WEBHOOK_DISABLE_AFTER of them disable the hook."""
    counted = Webhook.objects.filter(pk=hook.pk, enabled=True).update(
        consecutive_failures=F("consecutive_failures") + 1
    )
    if not counted:
        return
    failures = Webhook.objects.values_list("consecutive_failures", flat=True).get(pk=hook.pk)
    if failures >= settings.WEBHOOK_DISABLE_AFTER:
        last = sent.error or sent.outcome
        _disable(hook, f"{failures} deliveries failed in a row (the last: {last}).", now)


def _disable(hook: Webhook, reason: str, now: datetime) -> None:
    """Switch the hook off (once) and tell the team's admins in-app and by email."""
    if not Webhook.objects.filter(pk=hook.pk, enabled=True).update(
        enabled=False, disabled_at=now, disabled_reason=reason[:300]
    ):
        return
    # The team's admins, read through the memberships relation ("team_admin" is
    # teams.models.Role.TEAM_ADMIN): notifications sits below teams and imports none of it.
    admins = list(
        User.objects.filter(
            is_active=True, memberships__team_id=hook.team_id, memberships__role="team_admin"
        )
    )
    notice_send(
        users=admins,
        subject=f"Webhook {hook.name} of {hook.team.name} was disabled",
        text=f"The webhook {hook.name} ({hook.url_redacted}) was disabled: {reason} "
        "Check it and switch it on again on the team's Webhooks page.",
        link=reverse("team-webhooks", kwargs={"slug": hook.team.slug}),
        now=now,
        about=notice_about(hook),
    )


def webhook_deliveries_due(*, now: datetime, limit: int = 500) -> list[str]:
    """Beat's safety net: the ids of pending deliveries whose next attempt is due (a retry
    whose queued task was lost, or a first attempt queued before a broker outage), oldest
    first, at most ``limit``."""
    due = WebhookDelivery.objects.filter(state=DeliveryState.PENDING, next_attempt_at__lte=now)
    return [str(pk) for pk in due.order_by("next_attempt_at").values_list("pk", flat=True)[:limit]]
