"""Notices: in-app messages with an email copy, each filed under what it is about, and resolved
by the service that ends that state (notice_about, notice_send, notice_resolve).
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import send_mass_mail
from django.db import transaction
from django.db.models import Model

from notifications import notice_text
from notifications.live_topics import notices_changed
from notifications.models import Notice, NoticeKind


def notice_about(obj: Model) -> str:
    """The key a notice about ``obj`` (a model instance) is filed under: "<model>:<pk>",
    e.g. "workspace:12". The service that ends the state the notice reports resolves it by
    this key and the notice's kind."""
    return f"{obj._meta.model_name}:{obj.pk}"


def notice_send(
    *,
    users: Iterable[User | None],
    subject: str,
    text: str,
    link: str,
    now: datetime,
    kind: str = NoticeKind.INFO,
    about: str = "",
    expires_at: datetime | None = None,
    zone: str = "UTC",
) -> None:
    """Tell each user in-app (a Notice of ``kind`` about ``about``, see Notice) and by email
    with ``subject`` (Django's email backend). Times marked in ``text`` (notifications.notice_text)
    show in the reader's zone on a page and in ``zone`` (an IANA name) in the email. The
    notices are written in the caller's transaction, so they exist exactly when the state they
    report does; the emails leave once it commits."""
    messages = [Message(u, subject, text, link, kind, about, zone) for u in users if u is not None]
    notice_send_many(messages=messages, now=now, expires_at=expires_at)


@dataclass(frozen=True)
class Message:
    """One notice for one user: in-app text and an email with the same text and link;
    ``kind`` and ``about`` say what state it reports (Notice)."""

    user: User
    subject: str
    text: str
    link: str
    kind: str = NoticeKind.INFO
    about: str = ""
    zone: str = "UTC"  # the email's time zone for the times marked in text (notice_text)


def notice_send_many(
    *, messages: list[Message], now: datetime, expires_at: datetime | None = None
) -> None:
    """Send many different notices at once: one INSERT in the caller's transaction, and the
    emails over one connection once it commits."""
    Notice.objects.bulk_create(
        [
            Notice(
                user=m.user,
                text=m.text,
                link=m.link,
                kind=m.kind,
                about=m.about,
                created_at=now,
                expires_at=expires_at,
            )
            for m in messages
        ]
    )
    notices_changed(m.user.pk for m in messages)
    mails = [
        (m.subject, f"{_in_zone(m)}\n\n{settings.PORTAL_URL}{m.link}\n", None, [m.user.email])
        for m in messages
        if m.user.email
    ]
    if mails:
        transaction.on_commit(lambda: send_mass_mail(mails))


def _in_zone(message: Message) -> str:
    return notice_text.in_zone(message.text, ZoneInfo(message.zone))


def notice_resolve(
    *,
    about: str,
    kinds: Iterable[str],
    now: datetime,
    by: User | None = None,
    reason: str = "",
    users: Iterable[User] | None = None,
) -> int:
    """Resolve every open notice of one of ``kinds`` about ``about`` (notice_about): what it
    said is no longer true, because of ``reason`` (words, for the history), done by ``by``
    (a user, or None for the portal itself). ``users`` limits it to those users' notices.
    Call it in the transaction that ends the state. Returns how many were resolved; a
    SELECT of the readers (their open pages are told) and one UPDATE."""
    open_ = Notice.objects.filter(about=about, kind__in=list(kinds), resolved_at=None)
    if users is not None:
        open_ = open_.filter(user__in=users)
    readers = list(open_.values_list("user_id", flat=True).distinct())
    if not readers:
        return 0
    resolved = open_.update(resolved_at=now, resolved_by=by, resolved_reason=reason[:300])
    notices_changed(readers)  # .update() sends no signal: tell the open pages
    return resolved


def notice_dismiss(*, user: User, notice_id: int, now: datetime) -> None:
    """Mark one of the user's notices read, with the older open ones of its group (same kind
    about the same thing: the compact area shows a group as one line); another user's notice
    is left alone."""
    notice = Notice.objects.filter(pk=notice_id, user=user).first()
    if notice is None:
        return
    group = Notice.objects.filter(pk=notice.pk)
    if notice.about:
        group = Notice.objects.filter(user=user, kind=notice.kind, about=notice.about)
    if group.filter(read_at=None).update(read_at=now):
        notices_changed([user.pk])
