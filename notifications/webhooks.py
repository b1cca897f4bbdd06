"""A team's webhooks: the checks of their fields, and a team event emitted to them (adding,
changing and deleting them is teams.webhook_settings', audited in the team's log).

``webhook_events_emit`` is the one way an event reaches chat: the services that send the
portal's notices (approvals, idle warnings and stops, budget alerts, evictions, failures,
the savings digest) call it with the notice's own words, inside their transaction. It
records one WebhookDelivery per enabled hook that chose the event and queues its delivery
(notifications.webhook_delivery) once the transaction commits, so a rolled-back event is never sent.
"""

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F, QuerySet

from live import stamps
from notifications import notice_text
from notifications.models import Webhook, WebhookDelivery, WebhookEvent
from notifications.webhook_addresses import address_refusal
from notifications.webhook_payloads import Facts

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
    (notifications.webhook_addresses: no loopback, private, link-local, reserved or cluster address,
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


def webhook_name_check(name: str) -> str:
    """``name`` stripped, if 1 to NAME_MAX printable characters. Raises
    WebhookInvalid("name", why)."""
    name = name.strip()
    if not name or len(name) > NAME_MAX or not name.isprintable():
        raise WebhookInvalid("name", f"Give a name of 1 to {NAME_MAX} printable characters.")
    return name


def webhook_events_check(events: Sequence[str]) -> list[str]:
    """``events`` without repeats, if one or more, each CHOOSABLE. Raises
    WebhookInvalid("events", why)."""
    chosen = list(dict.fromkeys(events))
    if not chosen or any(e not in CHOOSABLE for e in chosen):
        raise WebhookInvalid("events", "Choose one or more of the listed events.")
    return chosen


@dataclass(frozen=True)
class TeamEvent:
    """One event of one team, in the words of its notice: ``title`` (the subject), ``text``
    (times marked with notifications.notice_text.mark; written in the team's zone for chat),
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
    query when no team has a hook (it reads their teams and zones too), and one INSERT when
    some have."""
    team_ids = {e.team_id for e in events}
    hooks = [
        h
        for h in _with_team_zone(Webhook.objects.filter(team_id__in=team_ids, enabled=True))
        if any(e.team_id == h.team_id and e.event in h.events for e in events)
    ]
    if not hooks:
        return []
    deliveries = [
        WebhookDelivery(
            webhook=h,
            event=e.event,
            payload=_facts(e, h).as_json(),
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


def _with_team_zone(hooks: QuerySet[Webhook]) -> QuerySet[Webhook]:
    """``hooks`` with their team and its time zone (``team_zone``, an IANA name or None), in
    the same query. The zone is the team's idle policy's, else UTC (teams.selectors.
    team_timezones' rule), read through the relation: notifications sits below teams and
    imports none of it."""
    return hooks.select_related("team").annotate(team_zone=F("team__idle_policy__timezone"))


def _facts(event: TeamEvent, hook: Webhook) -> Facts:
    """The event's facts for ``hook`` (one of _with_team_zone's)."""
    zone = ZoneInfo(getattr(hook, "team_zone", None) or "UTC")
    return Facts(
        title=notice_text.in_zone(event.title, zone),
        text=notice_text.in_zone(event.text, zone),
        url=f"{settings.PORTAL_URL}{event.link}",
        data=event.data,
        team={"slug": hook.team.slug, "name": hook.team.name},
    )


def _queue(ids: list[str]) -> None:
    from notifications.tasks import deliver_webhook  # the task module imports the services

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
    hook = _with_team_zone(Webhook.objects.filter(pk=hook.pk)).get()
    delivery = WebhookDelivery.objects.create(
        webhook=hook,
        event=event.event,
        payload=_facts(event, hook).as_json(),
        created_at=now,
        next_attempt_at=now,
    )
    stamps.bump(stamps.topic("webhook", hook.pk))  # its open delivery log shows it waiting
    transaction.on_commit(lambda: _queue([str(delivery.pk)]))
    return str(delivery.pk)
