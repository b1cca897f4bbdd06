"""What the storage tasks do in Azure (cloud.azure_storage), one volume at a time: reload by
id, check the state, act, then move the state with a compare-and-set update, so that a task
run twice does no harm. Raises CloudError for the task to retry (transient) or record."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from cloud import azure_storage
from cloud.costs import CHARGE_TAG
from storage.models import (
    PersonalHome,
    ProvisionedSpan,
    Snapshot,
    SnapshotReason,
    TeamShare,
    VolumeState,
)
from storage.selectors import team_storage_get
from workspaces.azure import azure_settings

Volume = TeamShare | PersonalHome
MODELS: dict[str, type[TeamShare] | type[PersonalHome]] = {"share": TeamShare, "home": PersonalHome}


def _load(kind: str, volume_id: int) -> Volume | None:
    return MODELS[kind].objects.select_related("team").filter(pk=volume_id).first()


def _move(volume: Volume, expected: str, **fields: object) -> bool:
    """Set the fields if the volume is still in state ``expected``; whether it was."""
    model = type(volume)
    return bool(model.objects.filter(pk=volume.pk, state=expected).update(**fields))


def _account(volume: Volume) -> str:
    storage = team_storage_get(team=volume.team)
    azure_storage.ensure_account(
        azure_settings(),
        name=storage.account_name,
        location=settings.AZURE_LOCATION,
        # CHARGE_TAG: Azure's cost of the shares reconciles with the team's storage.
        tags={
            "portal": "gpu-workspace-portal",
            "team": volume.team.slug,
            CHARGE_TAG: volume.team.slug,
        },
        subnet_ids=[settings.AZURE_SUBNET_ID],
        retention_days=storage.retention_days,
    )
    return storage.account_name


def _span_open(volume: Volume, now: datetime) -> None:
    """Azure bills the share's provisioned size from now on (one open span per volume)."""
    owner: dict[str, Volume]
    if isinstance(volume, TeamShare):
        owner, label = {"share": volume}, f"share {volume.name}"
    else:
        owner, label = {"home": volume}, f"home of {volume.owner.username}"
    if ProvisionedSpan.objects.filter(**owner, ended_at=None).exists():
        return
    ProvisionedSpan.objects.create(
        team_id=volume.team_id,
        label=label,
        region=settings.AZURE_LOCATION,
        size_gib=volume.size_gib,
        started_at=now,
        **owner,
    )


def _span_close(volume: Volume, now: datetime) -> None:
    key = "share" if isinstance(volume, TeamShare) else "home"
    ProvisionedSpan.objects.filter(**{key: volume}, ended_at=None).update(ended_at=now)


def volume_provision(*, kind: str, volume_id: int, now: datetime) -> None:
    """Create the volume's private account (idempotent) and its NFS share; then ready, and
    billed from ``now`` (ProvisionedSpan)."""
    volume = _load(kind, volume_id)
    if volume is None or volume.state != VolumeState.CREATING:
        return
    account = _account(volume)
    azure_storage.put_share(
        azure_settings(), account=account, name=volume.azure_name, quota_gib=volume.size_gib
    )
    with transaction.atomic():
        if _move(volume, VolumeState.CREATING, state=VolumeState.READY, error="", attempts=0):
            _span_open(volume, now)


def volume_failed(*, kind: str, volume_id: int, error: str) -> None:
    """Record a create, delete or restore Azure refused, for people to read."""
    volume = _load(kind, volume_id)
    if volume is not None and volume.state in (VolumeState.CREATING, VolumeState.DELETING):
        _move(volume, volume.state, state=VolumeState.FAILED, error=error[:300])


def volume_remove(*, kind: str, volume_id: int, now: datetime) -> None:
    """Delete the share with its snapshots; Azure keeps it restorable (soft delete), and so
    does the row, with the version a restore names. Its provisioned size stops billing at
    ``now`` (a soft-deleted share bills only its used GiB, which is not metered here)."""
    volume = _load(kind, volume_id)
    if volume is None or volume.state != VolumeState.DELETING:
        return
    account = team_storage_get(team=volume.team).account_name
    azure = azure_settings()
    azure_storage.delete_share(azure, account=account, name=volume.azure_name)
    deleted = [
        s.version
        for s in azure_storage.list_shares(azure, account=account, deleted=True)
        if s.deleted and s.name == volume.azure_name and s.version
    ]
    version = max(deleted, key=int, default="")
    with transaction.atomic():
        _span_close(volume, now)
        _move(volume, VolumeState.DELETING, state=VolumeState.DELETED, deleted_version=version)


def volume_restore(*, kind: str, volume_id: int, now: datetime) -> None:
    """Undelete the share; billed again from ``now``."""
    volume = _load(kind, volume_id)
    if volume is None or volume.state != VolumeState.CREATING or not volume.deleted_version:
        return
    account = team_storage_get(team=volume.team).account_name
    azure_storage.restore_share(
        azure_settings(), account=account, name=volume.azure_name, version=volume.deleted_version
    )
    with transaction.atomic():
        if _move(
            volume, VolumeState.CREATING, state=VolumeState.READY, deleted_version="", error=""
        ):
            _span_open(volume, now)


def snapshot_take(
    *, kind: str, volume_id: int, user_id: int | None, reason: str, now: datetime
) -> Snapshot | None:
    """Snapshot a ready volume now and record it."""
    volume = _load(kind, volume_id)
    if volume is None or volume.state != VolumeState.READY:
        return None
    account = team_storage_get(team=volume.team).account_name
    stamp = azure_storage.snapshot_share(azure_settings(), account=account, name=volume.azure_name)
    return Snapshot.objects.create(
        share=volume if isinstance(volume, TeamShare) else None,
        home=volume if isinstance(volume, PersonalHome) else None,
        snapshot_time=stamp,
        reason=reason,
        taken_at=now,
        taken_by=User.objects.filter(pk=user_id).first() if user_id else None,
    )


def snapshots_scheduled(*, now: datetime) -> int:
    """Beat: snapshot each ready share and home whose team's schedule is due, then delete the
    oldest scheduled snapshots beyond the team's ``snapshot_keep``. Returns how many were
    taken."""
    taken = 0
    for kind, model in MODELS.items():
        for volume in model.objects.filter(state=VolumeState.READY).select_related("team"):
            taken += _snapshot_if_due(kind, volume, now)
    return taken


def _snapshot_if_due(kind: str, volume: Volume, now: datetime) -> int:
    storage = team_storage_get(team=volume.team)
    if not storage.snapshot_every_hours:
        return 0
    scheduled = Snapshot.objects.filter(**{kind: volume}, reason=SnapshotReason.SCHEDULED)
    last = scheduled.order_by("-taken_at").first()
    if last and last.taken_at > now - timedelta(hours=storage.snapshot_every_hours):
        return 0
    snapshot_take(
        kind=kind, volume_id=volume.pk, user_id=None, reason=SnapshotReason.SCHEDULED, now=now
    )
    for old in scheduled.order_by("-taken_at")[storage.snapshot_keep :]:
        azure_storage.delete_share_snapshot(
            azure_settings(),
            account=storage.account_name,
            name=volume.azure_name,
            snapshot_time=old.snapshot_time,
        )
        old.delete()
    return 1


def volumes_purge(*, now: datetime) -> int:
    """Beat: deleted volumes whose soft-delete retention is over are gone for good."""
    total = 0
    for model in MODELS.values():
        with transaction.atomic():
            total += model.objects.filter(state=VolumeState.DELETED, purge_after__lte=now).update(
                state=VolumeState.PURGED
            )
    return total
