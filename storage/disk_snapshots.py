"""Kept snapshots of deleted VMs' OS disks on the team's storage page (docs/storage.md): who
sees them, deleting one (deliberate: its name typed; audited; restorable for the team's
retention days) and restoring it, and the hourly purge that deletes it in Azure
(cloud.azure_snapshots). The VM backend makes them (workspaces.backends.vm_snapshots).
Raises ActionNotAllowed, ValidationError; the purge logs CloudError and tries next hour."""

from __future__ import annotations

from datetime import datetime, timedelta

import structlog
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet

from cloud import azure_snapshots
from cloud.errors import CloudError
from common.permissions import Actor, access_require
from storage.selectors import team_storage_get
from teams.audit import audit_record
from teams.models import Team
from workspaces.azure import azure_settings
from workspaces.models import DiskSnapshot

_log = structlog.get_logger("storage")


def disk_snapshots_kept(*, team: Team) -> QuerySet[DiskSnapshot]:
    """The team's kept disk snapshots not deleted, newest first, with owner and workspace."""
    return DiskSnapshot.objects.filter(team=team, deleted_at__isnull=True).select_related(
        "owner", "workspace"
    )


def disk_snapshots_restorable(*, team: Team, now: datetime) -> QuerySet[DiskSnapshot]:
    """Deleted ones not purged yet (restorable until purge_after)."""
    return DiskSnapshot.objects.filter(
        team=team, deleted_at__isnull=False, purged_at__isnull=True, purge_after__gt=now
    ).select_related("owner", "workspace")


def _may_change(user: Actor, snapshot: DiskSnapshot) -> None:
    """Its owner, or whoever manages the team's storage. Raises ActionNotAllowed."""
    if getattr(user, "pk", None) != snapshot.owner_id:
        access_require(user=user, perm="storage.manage_shares", obj=snapshot.team)


def disk_snapshot_delete(
    *, user: Actor, snapshot: DiskSnapshot, confirm: str, now: datetime
) -> None:
    """Delete a kept snapshot, only with its name typed as ``confirm``: it stays restorable
    (and billed) for the team's retention days, then the purge deletes it in Azure. Audited
    (storage.disk_snapshot.delete). Raises ActionNotAllowed, ValidationError."""
    _may_change(user, snapshot)
    if confirm != snapshot.name:
        raise ValidationError(
            {"confirm": f"Type the snapshot's name, {snapshot.name}, to delete it."}
        )
    with transaction.atomic():
        moved = DiskSnapshot.objects.filter(pk=snapshot.pk, deleted_at__isnull=True)
        retention = team_storage_get(team=snapshot.team).retention_days
        purge_after = now + timedelta(days=retention)
        if not moved.update(deleted_at=now, purge_after=purge_after):
            raise ValidationError({"confirm": "This snapshot is already deleted."})
        audit_record(
            actor=user if isinstance(user, User) else None,
            team=snapshot.team,
            action="storage.disk_snapshot.delete",
            obj=snapshot,
            before={"name": snapshot.name, "size_gb": snapshot.size_gb},
            after={"restorable_until": purge_after.isoformat()},
            now=now,
        )


def disk_snapshot_restore(*, user: Actor, snapshot: DiskSnapshot, now: datetime) -> None:
    """Take back the delete of a snapshot not purged yet. Audited. Raises ActionNotAllowed,
    ValidationError."""
    _may_change(user, snapshot)
    with transaction.atomic():
        moved = DiskSnapshot.objects.filter(
            pk=snapshot.pk, deleted_at__isnull=False, purged_at__isnull=True, purge_after__gt=now
        )
        if not moved.update(deleted_at=None, purge_after=None):
            raise ValidationError({"snapshot": "This snapshot can no longer be restored."})
        audit_record(
            actor=user if isinstance(user, User) else None,
            team=snapshot.team,
            action="storage.disk_snapshot.restore",
            obj=snapshot,
            before={},
            after={"name": snapshot.name},
            now=now,
        )


def disk_snapshots_purge(*, now: datetime) -> int:
    """Beat (hourly, with the shares' purge): delete in Azure the snapshots deleted longer
    than their retention ago; one Azure refuses now is tried again next hour. Returns how
    many were purged."""
    purged = 0
    due = DiskSnapshot.objects.filter(purged_at__isnull=True, purge_after__lte=now)
    for snapshot in due:
        try:
            azure_snapshots.delete_snapshot(azure_settings(), name=snapshot.name)
        except CloudError as error:
            _log.warning("disk snapshot not purged", snapshot=snapshot.name, code=error.code)
            continue
        purged += DiskSnapshot.objects.filter(pk=snapshot.pk, purged_at__isnull=True).update(
            purged_at=now
        )
    return purged
