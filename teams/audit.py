"""The team audit log: one row per change an actor made (teams.models.AuditEntry)."""

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Model

from teams.models import (
    AuditEntry,
    Team,
)


def audit_record(
    *,
    actor: User | None,
    team: Team | None,
    action: str,
    obj: Model,
    before: dict[str, Any],
    after: dict[str, Any],
    now: datetime,
) -> AuditEntry:
    """Append one audit row: who did ``action`` to ``obj`` in ``team``, with its fields before
    and after (JSON-safe dicts)."""
    return AuditEntry.objects.create(
        at=now,
        actor=actor,
        team=team,
        action=action,
        object_type=obj._meta.label,
        object_id=str(obj.pk),
        before=before,
        after=after,
    )
