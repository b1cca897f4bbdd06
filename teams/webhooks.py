"""A team's webhooks: add, change and delete them (audited), and emit a team event to them.

``webhook_events_emit`` is the one way an event reaches chat: the services that send the
portal's notices (approvals, idle warnings and stops, budget alerts, evictions, failures,
the savings digest) call it with the notice's own words, inside their transaction. It
records one WebhookDelivery per enabled hook that chose the event and queues its delivery
(teams.webhook_delivery) once the transaction commits, so a rolled-back event is never sent.
"""

import ipaddress
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from live import stamps
from teams import notice_text, webhook_crypto
from teams.audit import audit_record
from teams.models import Team, Webhook, WebhookDelivery, WebhookEvent, WebhookKind
from teams.selectors import team_timezones
from teams.webhook_addresses import address_refusal
from teams.webhook_payloads import Facts

URL_MAX = 2048  # Teams workflow URLs run to ~500 characters; Slack's to ~80
NAME_MAX = 100
CHOOSABLE = [e for e in WebhookEvent if e != WebhookEvent.TEST]


class WebhookInvalid(ValueError):
    """A refused field: ``field`` names it, the message says why (shown as a form error)."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _allowed_http(host: str) -> bool:
    """Plain http: only to a loopback address, and only where WEBHOOK_ALLOW_LOOPBACK is on."""
    return bool(settings.WEBHOOK_ALLOW_LOOPBACK) and _loopback(host)


def webhook_url_check(url: str) -> str:
    """``url`` stripped, if a hook may post to it: https to a host on the public internet
    (teams.webhook_addresses: no loopback, private, link-local, reserved or cluster address,
    however spelt or resolved; plain http only to a loopback address where
    WEBHOOK_ALLOW_LOOPBACK is on, i.e. the embedded demo and the tests), no user or password, a
    valid port, printable ASCII without spaces, at most URL_MAX characters. Raises
    WebhookInvalid("url", why)."""
    url = url.strip()
    if not url or len(url) > URL_MAX:
        raise WebhookInvalid("url", f"Give a URL of at most {URL_MAX} characters.")
    if not url.isascii() or not url.isprintable() or any(c.isspace() for c in url):
        raise WebhookInvalid("url", "The URL may hold only printable characters, no spaces.")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a port out of range)
    except ValueError as error:
        raise WebhookInvalid("url", "This is not a valid URL.") from error
    host = parts.hostname or ""
    if not host:
        raise WebhookInvalid("url", "The URL needs a host.")
    if parts.username is not None or parts.password is not None:
        raise WebhookInvalid("url", "Leave user names and passwords out of the URL.")
    if parts.scheme == "http" and _allowed_http(host):
        return url
    if parts.scheme != "https":
        raise WebhookInvalid("url", "Use an https:// URL.")
    refusal = address_refusal(host, scheme="https", port=parts.port or 443)
    if refusal:
        raise WebhookInvalid("url", refusal)
    return url


def webhook_url_redact(url: str) -> str:
    """What a page shows of ``url``: its scheme and host only (the path is the credential)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/…"[:120]


def _name_check(name: str) -> str:
    name = name.strip()
    if not name or len(name) > NAME_MAX or not name.isprintable():
        raise WebhookInvalid("name", f"Give a name of 1 to {NAME_MAX} printable characters.")
    return name


def _events_check(events: Sequence[str]) -> list[str]:
    chosen = list(dict.fromkeys(events))
    if not chosen or any(e not in CHOOSABLE for e in chosen):
        raise WebhookInvalid("events", "Choose one or more of the listed events.")
    return chosen


def _snapshot(hook: Webhook) -> dict[str, Any]:
    """The audited fields: never the URL or the secret, only the redacted URL."""
    return {
        "name": hook.name,
        "kind": hook.kind,
        "url": hook.url_redacted,
        "events": hook.events,
        "enabled": hook.enabled,
    }


def webhook_create(
    *, actor: User, team: Team, kind: str, name: str, url: str, events: Sequence[str], now: datetime
) -> tuple[Webhook, str]:
    """Add a hook to ``team``; returns it and, for a generic hook, its new signing secret
    (shown once; "" otherwise). Raises WebhookInvalid for a refused field or a taken name."""
    if kind not in WebhookKind.values:
        raise WebhookInvalid("kind", "Choose Microsoft Teams, Slack or JSON.")
    name, url, chosen = _name_check(name), webhook_url_check(url), _events_check(events)
    if Webhook.objects.filter(team=team, name=name).exists():
        raise WebhookInvalid("name", "The team has a webhook of this name already.")
    secret = secrets.token_urlsafe(32) if kind == WebhookKind.GENERIC else ""
    with transaction.atomic():
        hook = Webhook.objects.create(
            team=team,
            kind=kind,
            name=name,
            url_encrypted=webhook_crypto.encrypt(url),
            url_redacted=webhook_url_redact(url),
            secret_encrypted=webhook_crypto.encrypt(secret) if secret else "",
            events=chosen,
            created_by=actor,
            created_at=now,
        )
        audit_record(
            actor=actor, team=team, action="webhook.add", obj=hook, before={},
            after=_snapshot(hook), now=now,
        )  # fmt: skip
    return hook, secret


def webhook_update(
    *, actor: User, hook: Webhook, events: Sequence[str], enabled: bool, now: datetime
) -> Webhook:
    """Change a hook's events and switch it on or off; switching on clears an automatic
    disabling and its count of failures. Audited. Raises WebhookInvalid("events", why)."""
    chosen = _events_check(events)
    before = _snapshot(hook)
    hook.events = chosen
    if enabled and not hook.enabled:
        hook.consecutive_failures, hook.disabled_at, hook.disabled_reason = 0, None, ""
    elif not enabled and hook.enabled:
        hook.disabled_at, hook.disabled_reason = now, f"Disabled by {actor.username}"
    hook.enabled = enabled
    with transaction.atomic():
        hook.save()
        audit_record(
            actor=actor, team=hook.team, action="webhook.change", obj=hook, before=before,
            after=_snapshot(hook), now=now,
        )  # fmt: skip
    return hook


def webhook_delete(*, actor: User, hook: Webhook, now: datetime) -> None:
    """Delete a hook with its deliveries and log. Audited."""
    with transaction.atomic():
        audit_record(
            actor=actor, team=hook.team, action="webhook.delete", obj=hook,
            before=_snapshot(hook), after={}, now=now,
        )  # fmt: skip
        hook.delete()


@dataclass(frozen=True)
class TeamEvent:
    """One event of one team, in the words of its notice: ``title`` (the subject), ``text``
    (times marked with teams.notice_text.mark; written in the team's zone for chat),
    ``link`` (a path of the portal), ``data`` (JSON-safe figures: ids, "12.34" USD, ISO
    times)."""

    team_id: int
    event: str
    title: str
    text: str
    link: str
    data: dict[str, Any] = field(default_factory=dict)


def webhook_event_emit(
    *, team_id: int, event: str, title: str, text: str, link: str, data: dict[str, Any],
    now: datetime,
) -> list[str]:  # fmt: skip
    """One event (TeamEvent's fields); see webhook_events_emit."""
    return webhook_events_emit(events=[TeamEvent(team_id, event, title, text, link, data)], now=now)


def webhook_events_emit(*, events: Sequence[TeamEvent], now: datetime) -> list[str]:
    """Record a delivery per enabled hook of each event's team that chose its event, in the
    caller's transaction, and queue each once it commits. Returns the deliveries' ids. One
    query when no team has a hook; three more, and one INSERT, when some have."""
    team_ids = {e.team_id for e in events}
    hooks = [
        h
        for h in Webhook.objects.filter(team_id__in=team_ids, enabled=True)
        if any(e.team_id == h.team_id and e.event in h.events for e in events)
    ]
    if not hooks:
        return []
    teams = Team.objects.in_bulk({h.team_id for h in hooks})
    zones = team_timezones(team_ids=list(teams))
    deliveries = [
        WebhookDelivery(
            webhook=h,
            event=e.event,
            payload=_facts(e, teams[h.team_id], zones[h.team_id]).as_json(),
            created_at=now,
            next_attempt_at=now,
        )
        for e in events
        for h in hooks
        if e.team_id == h.team_id and e.event in h.events
    ]
    WebhookDelivery.objects.bulk_create(deliveries)
    ids = [str(d.pk) for d in deliveries]
    transaction.on_commit(lambda: _queue(ids))
    return ids


def _facts(event: TeamEvent, team: Team, zone: Any) -> Facts:
    return Facts(
        title=notice_text.in_zone(event.title, zone),
        text=notice_text.in_zone(event.text, zone),
        url=f"{settings.PORTAL_URL}{event.link}",
        data=event.data,
        team={"slug": team.slug, "name": team.name},
    )


def _queue(ids: list[str]) -> None:
    from teams.tasks import deliver_webhook  # the task module imports the services

    for pk in ids:
        deliver_webhook.delay(pk)


def webhook_test_send(*, actor: User, hook: Webhook, now: datetime) -> str:
    """Send a test message to ``hook`` (enabled or not, whatever its events) through the
    same delivery and log as an event. Returns the delivery's id."""
    event = TeamEvent(
        hook.team_id,
        WebhookEvent.TEST,
        f"Test message from the GPU portal for {hook.team.name}",
        f"{actor.username} sent this test at {notice_text.mark(now)} to check the webhook "
        f"{hook.name}.",
        f"/teams/{hook.team.slug}/webhooks/",
        {"sent_by": actor.username},
    )
    zone = team_timezones(team_ids=[hook.team_id])[hook.team_id]
    delivery = WebhookDelivery.objects.create(
        webhook=hook,
        event=event.event,
        payload=_facts(event, hook.team, zone).as_json(),
        created_at=now,
        next_attempt_at=now,
    )
    stamps.bump(stamps.topic("webhook", hook.pk))  # its open delivery log shows it waiting
    transaction.on_commit(lambda: _queue([str(delivery.pk)]))
    return str(delivery.pk)
