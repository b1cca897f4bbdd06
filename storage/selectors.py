"""Reads of a team's storage: its settings, live shares and homes, restorable ones, usage."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet, Sum

from storage.models import PersonalHome, Snapshot, TeamShare, TeamStorage, VolumeState
from teams.models import Team

LIVE_STATES = (VolumeState.CREATING, VolumeState.READY, VolumeState.FAILED, VolumeState.DELETING)


def team_storage_get(*, team: Team) -> TeamStorage:
    """The team's storage settings (a row with the defaults the first time)."""
    storage, _ = TeamStorage.objects.get_or_create(team=team)
    return storage


def shares_live(*, team: Team) -> QuerySet[TeamShare]:
    """The team's shares not deleted, by name."""
    return TeamShare.objects.filter(team=team, deleted_at__isnull=True).order_by("name")


def shares_restorable(*, team: Team, now: datetime) -> QuerySet[TeamShare]:
    """Deleted shares Azure Files soft delete still keeps."""
    return TeamShare.objects.filter(
        team=team, state=VolumeState.DELETED, purge_after__gt=now
    ).order_by("-deleted_at")


def homes_live(*, team: Team) -> QuerySet[PersonalHome]:
    return PersonalHome.objects.filter(team=team, deleted_at__isnull=True).select_related("owner")


def storage_used_gib(*, team: Team) -> int:
    """GiB provisioned for the team's live shares and homes (what the quota counts)."""
    shares = shares_live(team=team).aggregate(total=Sum("size_gib"))["total"] or 0
    homes = homes_live(team=team).aggregate(total=Sum("size_gib"))["total"] or 0
    return int(shares) + int(homes)


def snapshots_of_share(*, share: TeamShare) -> QuerySet[Snapshot]:
    return Snapshot.objects.filter(share=share)
