"""Rules and writes of a team's storage: quota, shares (create, access, delete, restore), homes
and snapshots on demand. Azure is called by the tasks (storage.provisioning), queued once the
transaction commits; every change a person makes is audited (teams.audit)."""

from __future__ import annotations

import re
import secrets
from datetime import datetime, timedelta

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from common.permissions import ActionNotAllowed, Actor, access_require
from storage.models import (
    RESERVED_SHARE_NAMES,
    Access,
    PersonalHome,
    TeamShare,
    TeamStorage,
    VolumeState,
)
from storage.selectors import storage_used_gib, team_storage_get
from teams.audit import audit_record
from teams.guards import team_lock
from teams.models import Team

SHARE_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{1,30}[a-z0-9])$")
MIN_SHARE_GIB, MAX_SHARE_GIB = 100, 102400  # A premium NFS share (cloudsim.storage_state).
SHARE, HOME = "share", "home"  # What a task's volume id names.


def _user(user: Actor) -> User | None:
    return user if isinstance(user, User) else None


def _queue(name: str, *args: object) -> None:
    # The task module imports this one (it calls storage.provisioning): imported here.
    from storage import tasks

    task = getattr(tasks, name)
    transaction.on_commit(lambda: task.delay(*args))


def storage_quota_set(*, user: Actor, team: Team, quota_gib: int, now: datetime) -> TeamStorage:
    """Set the team's storage quota in GiB (platform admins). Raises ActionNotAllowed,
    ValidationError for a negative quota."""
    access_require(user=user, perm="storage.set_quota", obj=team)
    if quota_gib < 0:
        raise ValidationError({"quota_gib": "A quota is 0 GiB or more."})
    with transaction.atomic():
        team_lock(team)
        storage = team_storage_get(team=team)
        before = {"quota_gib": storage.quota_gib}
        storage.quota_gib = quota_gib
        storage.save(update_fields=["quota_gib"])
        audit_record(
            actor=_user(user),
            team=team,
            action="storage.quota",
            obj=storage,
            before=before,
            after={"quota_gib": quota_gib},
            now=now,
        )
    return storage


def _check_room(team: Team, storage: TeamStorage, more_gib: int) -> None:
    used = storage_used_gib(team=team)
    if used + more_gib > storage.quota_gib:
        raise ValidationError(
            {
                "size_gib": f"The team's storage quota is {storage.quota_gib} GiB and "
                f"{used} GiB are in use: {more_gib} GiB more do not fit."
            }
        )


def _account_name(storage: TeamStorage) -> str:
    """The team's storage account name, chosen once: names are global in Azure."""
    if not storage.account_name:
        stem = re.sub(r"[^a-z0-9]", "", storage.team.slug.lower())[:12]
        storage.account_name = f"gp{stem}{secrets.token_hex(4)}"
        storage.save(update_fields=["account_name"])
    return storage.account_name


def share_create(
    *, user: Actor, team: Team, name: str, size_gib: int, researcher_access: str, now: datetime
) -> TeamShare:
    """Ask for a new team share (created in Azure by a task). Raises ActionNotAllowed,
    ValidationError (name, size, access, or the team's quota)."""
    access_require(user=user, perm="storage.manage_shares", obj=team)
    errors = {}
    if not SHARE_NAME.match(name) or "--" in name or name in RESERVED_SHARE_NAMES:
        errors["name"] = "3 to 32 lower-case letters, digits and single hyphens; not 'home'."
    if not MIN_SHARE_GIB <= size_gib <= MAX_SHARE_GIB:
        errors["size_gib"] = f"A share is {MIN_SHARE_GIB} to {MAX_SHARE_GIB} GiB."
    if researcher_access not in Access.values:
        errors["researcher_access"] = "Read-write, read-only or not mounted."
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        team_lock(team)
        storage = team_storage_get(team=team)
        if TeamShare.objects.filter(team=team, name=name, deleted_at__isnull=True).exists():
            raise ValidationError({"name": f"The team already has a share named {name}."})
        _check_room(team, storage, size_gib)
        _account_name(storage)
        share = TeamShare.objects.create(
            team=team,
            name=name,
            size_gib=size_gib,
            researcher_access=researcher_access,
            azure_name=f"{name}-{secrets.token_hex(3)}",
            created_at=now,
            created_by=_user(user),
        )
        audit_record(
            actor=_user(user),
            team=team,
            action="storage.share.create",
            obj=share,
            before={},
            after={"name": name, "size_gib": size_gib, "researcher_access": researcher_access},
            now=now,
        )
        _queue("provision_volume", SHARE, share.pk)
    return share


def share_access_set(
    *, user: Actor, share: TeamShare, researcher_access: str, now: datetime
) -> None:
    """How researchers mount the share from their next workspace on. Raises
    ActionNotAllowed, ValidationError."""
    access_require(user=user, perm="storage.manage_shares", obj=share.team)
    if researcher_access not in Access.values:
        raise ValidationError({"researcher_access": "Read-write, read-only or not mounted."})
    before = {"researcher_access": share.researcher_access}
    share.researcher_access = researcher_access
    share.save(update_fields=["researcher_access"])
    audit_record(
        actor=_user(user),
        team=share.team,
        action="storage.share.access",
        obj=share,
        before=before,
        after={"researcher_access": researcher_access},
        now=now,
    )


def share_delete(*, user: Actor, share: TeamShare, confirm: str, now: datetime) -> None:
    """Delete a share: only with its name typed as ``confirm``; Azure Files soft delete keeps
    it restorable for the team's retention days. Deleting a workspace never comes here.
    Raises ActionNotAllowed, ValidationError."""
    access_require(user=user, perm="storage.manage_shares", obj=share.team)
    if confirm != share.name:
        raise ValidationError({"confirm": f"Type the share's name, {share.name}, to delete it."})
    with transaction.atomic():
        team_lock(share.team)
        share.refresh_from_db()  # Two admins deleting at once: the second sees the first.
        if share.deleted_at is not None:
            raise ValidationError({"confirm": "This share is already deleted."})
        retention = team_storage_get(team=share.team).retention_days
        share.state, share.deleted_at = VolumeState.DELETING, now
        share.purge_after = now + timedelta(days=retention)
        share.save(update_fields=["state", "deleted_at", "purge_after"])
        audit_record(
            actor=_user(user),
            team=share.team,
            action="storage.share.delete",
            obj=share,
            before={"name": share.name, "size_gib": share.size_gib},
            after={"restorable_until": share.purge_after.isoformat()},
            now=now,
        )
        _queue("remove_volume", SHARE, share.pk)


def share_restore(*, user: Actor, share: TeamShare, now: datetime) -> None:
    """Bring a deleted share back while soft delete keeps it, if its name and the quota allow.
    Raises ActionNotAllowed, ValidationError."""
    access_require(user=user, perm="storage.manage_shares", obj=share.team)
    with transaction.atomic():
        team_lock(share.team)
        share.refresh_from_db()
        if share.state != VolumeState.DELETED or not share.purge_after or share.purge_after <= now:
            raise ValidationError({"share": "This share can no longer be restored."})
        if TeamShare.objects.filter(
            team=share.team, name=share.name, deleted_at__isnull=True
        ).exists():
            raise ValidationError({"share": f"A share named {share.name} exists again."})
        _check_room(share.team, team_storage_get(team=share.team), share.size_gib)
        share.state, share.deleted_at, share.purge_after = VolumeState.CREATING, None, None
        share.save(update_fields=["state", "deleted_at", "purge_after"])
        audit_record(
            actor=_user(user),
            team=share.team,
            action="storage.share.restore",
            obj=share,
            before={},
            after={"name": share.name},
            now=now,
        )
        _queue("restore_volume", SHARE, share.pk)


def home_ensure(*, team: Team, owner: User, now: datetime) -> PersonalHome | None:
    """The owner's home in the team, asked for when missing and the team's quota has room for
    it; None when it has not (workspaces then start without a home)."""
    with transaction.atomic():
        team_lock(team)
        home = PersonalHome.objects.filter(team=team, owner=owner, deleted_at__isnull=True).first()
        if home is not None:
            return home
        storage = team_storage_get(team=team)
        if storage_used_gib(team=team) + storage.home_gib > storage.quota_gib:
            return None
        _account_name(storage)
        stem = re.sub(r"[^a-z0-9]", "", owner.username.lower())[:40] or "user"
        home = PersonalHome.objects.create(
            team=team,
            owner=owner,
            size_gib=storage.home_gib,
            created_at=now,
            azure_name=f"home-{stem}-{secrets.token_hex(3)}",
        )
        _queue("provision_volume", HOME, home.pk)
    return home


def snapshot_request(*, user: Actor, share: TeamShare) -> None:
    """Snapshot a ready share now (a task takes it). Raises ActionNotAllowed,
    ValidationError."""
    access_require(user=user, perm="storage.manage_shares", obj=share.team)
    share.refresh_from_db(fields=["state"])  # A task may have moved it since it was read.
    if share.state != VolumeState.READY:
        raise ValidationError({"share": "Only a ready share can be snapshotted."})
    _queue("take_snapshot", SHARE, share.pk, getattr(_user(user), "pk", None))


def home_snapshot_request(*, user: Actor, home: PersonalHome) -> None:
    """Snapshot one's own home now (its owner only). Raises ActionNotAllowed,
    ValidationError."""
    if home.owner_id != getattr(user, "pk", None):
        raise ActionNotAllowed("Only its owner snapshots a home.")
    home.refresh_from_db(fields=["state"])
    if home.state != VolumeState.READY:
        raise ValidationError({"home": "Only a ready home can be snapshotted."})
    _queue("take_snapshot", HOME, home.pk, home.owner_id)
