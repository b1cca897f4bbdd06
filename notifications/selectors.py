"""Reads of notices (the compact area on every page, the notices page) and of a team's
webhooks and their delivery log."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth.models import User
from django.db.models import Q, QuerySet

from common.permissions import Actor
from notifications.models import DeliveryState, Notice, Webhook, WebhookAttempt, WebhookDelivery

LOG_ROWS = 200
NOTICE_AREA_LIMIT = 50


@dataclass(frozen=True)
class NoticeGroup:
    """The open notices of one kind about one thing (or one notice about nothing in
    particular): ``notice`` the newest, ``count`` how many."""

    notice: Notice
    count: int


@dataclass(frozen=True)
class NoticeArea:
    """What the compact notice area shows: ``count`` open notices in all, in ``groups``,
    newest group first."""

    count: int = 0
    groups: tuple[NoticeGroup, ...] = ()


def notice_open(*, user: User, now: datetime) -> QuerySet[Notice]:
    """The user's notices still to show: neither dismissed, nor resolved, nor expired at
    ``now`` (a queryset, newest first)."""
    return Notice.objects.filter(user=user, read_at=None, resolved_at=None).filter(
        Q(expires_at=None) | Q(expires_at__gt=now)
    )


def notice_area(*, user: Actor, now: datetime) -> NoticeArea:
    """The user's open notices grouped by kind and subject (Notice.about) for the compact
    area on every page: at most NOTICE_AREA_LIMIT newest are read. No query when logged
    out, one (two past the limit) otherwise."""
    if not isinstance(user, User):  # anonymous
        return NoticeArea()
    notices = list(notice_open(user=user, now=now)[:NOTICE_AREA_LIMIT])
    count = len(notices)
    if count == NOTICE_AREA_LIMIT:
        count = notice_open(user=user, now=now).count()
    groups: dict[tuple[str, object], list[Notice]] = {}
    for notice in notices:
        key = (notice.kind, notice.about) if notice.about else ("", notice.pk)
        groups.setdefault(key, []).append(notice)
    return NoticeArea(count, tuple(NoticeGroup(g[0], len(g)) for g in groups.values()))


def notice_resolved_recent(
    *, user: User, now: datetime, days: int = 7, limit: int = 20
) -> list[Notice]:
    """The user's notices resolved in the ``days`` before ``now``, newest first (at most
    ``limit``), with who resolved them: what the notices page lists as gone by itself."""
    since = now - timedelta(days=days)
    notices = Notice.objects.filter(user=user, resolved_at__gt=since).select_related("resolved_by")
    return list(notices.order_by("-resolved_at", "-id")[:limit])


def webhooks_of_team(*, team_id: int) -> QuerySet[Webhook]:
    """The team's hooks, by name (one query)."""
    return Webhook.objects.filter(team_id=team_id).select_related("team").order_by("name", "pk")


def webhook_attempts(*, hook: Webhook, limit: int = LOG_ROWS) -> list[WebhookAttempt]:
    """The hook's last ``limit`` attempts, newest first (one query on (webhook, at))."""
    return list(WebhookAttempt.objects.filter(webhook=hook).order_by("-at", "-pk")[:limit])


def webhook_waiting_count(*, hook: Webhook) -> int:
    """How many of the hook's deliveries are still pending: queued, or waiting for a retry
    (one COUNT on the delivery's state)."""
    return WebhookDelivery.objects.filter(webhook=hook, state=DeliveryState.PENDING).count()
