"""Live topics bumped by notices: a notice bumps its user's ``user:<id>``. Notices written
with ``bulk_create`` or ``.update()`` call ``notices_changed`` there."""

from collections.abc import Iterable
from typing import Any

from django.db.models.signals import post_save

from live import stamps
from notifications.models import Notice


def notices_changed(user_ids: Iterable[int | None]) -> None:
    """Bump the notice areas of users ``user_ids`` once the transaction commits."""
    stamps.bump(*(stamps.topic("user", pk) for pk in user_ids if pk is not None))


def _on_notice(sender: type[Notice], instance: Notice, **kwargs: Any) -> None:
    notices_changed([instance.user_id])


def connect() -> None:
    """Called once from NotificationsConfig.ready()."""
    post_save.connect(_on_notice, sender=Notice, dispatch_uid="live-notice")
