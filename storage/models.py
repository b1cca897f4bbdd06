"""Storage that outlives a workspace (docs/storage.md): a team's shares, each researcher's
home per team, and snapshots, all Azure Files NFS shares in the team's private premium
FileStorage account (cloud/azure_storage.py).

A share or home is a row from the moment it is asked for; its ``state`` says how far Azure is
(creating, ready, failed), and deletion is soft: ``deleted_at`` and ``purge_after`` mark a
share that Azure Files soft delete still keeps (``deleted_version`` restores it) until then.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from teams.models import Team

MOUNT_ROOT_SHARES = "/data"  # A team share "datasets" is mounted at /data/datasets.
HOME_MOUNT = "/data/home"  # The researcher's home, the same path in every workspace.
RESERVED_SHARE_NAMES = frozenset({"home"})  # /data/home is the home's mount point.


class VolumeState(models.TextChoices):
    CREATING = "creating", "Creating"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"
    DELETING = "deleting", "Deleting"
    DELETED = "deleted", "Deleted (restorable)"
    PURGED = "purged", "Purged"


class Access(models.TextChoices):
    READ_WRITE = "rw", "Read-write"
    READ_ONLY = "ro", "Read-only"
    NONE = "none", "Not mounted"


class TeamStorage(models.Model):
    """A team's storage settings: its quota over every share and home, its Azure account,
    how long deleted shares stay restorable and how many scheduled snapshots to keep."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="storage")
    quota_gib = models.PositiveIntegerField(
        default=0, help_text="GiB over all the team's shares and homes; 0 means no storage"
    )
    home_gib = models.PositiveIntegerField(
        default=100, help_text="Size of each researcher's home in this team (GiB)"
    )
    account_name = models.CharField(max_length=24, blank=True)
    retention_days = models.PositiveSmallIntegerField(
        default=14, help_text="Days a deleted share or home can be restored (1 to 365)"
    )
    snapshot_every_hours = models.PositiveSmallIntegerField(
        default=24, help_text="Hours between scheduled snapshots of each share; 0: none"
    )
    snapshot_keep = models.PositiveSmallIntegerField(
        default=7, help_text="Scheduled snapshots kept per share; older ones are deleted"
    )

    def __str__(self) -> str:
        return f"storage of {self.team}"


class Volume(models.Model):
    """What shares and homes have in common: an Azure Files NFS share of the team's account."""

    team = models.ForeignKey(Team, on_delete=models.PROTECT)
    size_gib = models.PositiveIntegerField()
    azure_name = models.CharField(max_length=63)
    state = models.CharField(
        max_length=16, choices=VolumeState.choices, default=VolumeState.CREATING
    )
    error = models.CharField(max_length=300, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField()
    deleted_at = models.DateTimeField(null=True, blank=True)
    deleted_version = models.CharField(max_length=32, blank=True)
    purge_after = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True


class TeamShare(Volume):
    """A team's shared folder, e.g. "datasets", mounted at /data/<name> in its workspaces;
    team admins always mount it read-write, researchers as ``researcher_access`` says."""

    name = models.SlugField(max_length=40)
    researcher_access = models.CharField(
        max_length=4, choices=Access.choices, default=Access.READ_WRITE
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["team", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "name"],
                condition=models.Q(deleted_at__isnull=True),
                name="storage_share_unique_live_name",
            )
        ]

    def __str__(self) -> str:
        return f"{self.team}/{self.name}"

    @property
    def mount_path(self) -> str:
        return f"{MOUNT_ROOT_SHARES}/{self.name}"


class PersonalHome(Volume):
    """One researcher's home in one team, mounted at HOME_MOUNT in each of their workspaces of
    that team, VM or pod."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="storage_homes"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "owner"],
                condition=models.Q(deleted_at__isnull=True),
                name="storage_home_unique_live_owner",
            )
        ]

    def __str__(self) -> str:
        return f"home of {self.owner} in {self.team}"


class SnapshotReason(models.TextChoices):
    ON_DEMAND = "on_demand", "On demand"
    SCHEDULED = "scheduled", "Scheduled"


class Snapshot(models.Model):
    """A share snapshot of a team share or a home (read-only, point in time, in Azure Files)."""

    share = models.ForeignKey(TeamShare, null=True, on_delete=models.CASCADE)
    home = models.ForeignKey(PersonalHome, null=True, on_delete=models.CASCADE)
    snapshot_time = models.CharField(max_length=40, help_text="Azure's x-ms-snapshot value")
    reason = models.CharField(max_length=16, choices=SnapshotReason.choices)
    taken_at = models.DateTimeField()
    taken_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-taken_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(share__isnull=False, home__isnull=True)
                | models.Q(share__isnull=True, home__isnull=False),
                name="storage_snapshot_of_one_volume",
            )
        ]

    def __str__(self) -> str:
        return f"snapshot {self.snapshot_time} of {self.share or self.home}"


class ProvisionedSpan(models.Model):
    """A stretch in which Azure held a share or home provisioned at ``size_gib`` (Azure Files
    premium, provisioned v1: billed per provisioned GiB a month, prorated by the hour, used or
    not, whether a workspace mounts it or not). Opened once Azure created (or restored) the
    share, closed once Azure deleted it; ``ended_at`` is None while it exists. Written by
    storage.provisioning only; billing.storage_cost prices them."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    share = models.ForeignKey(TeamShare, null=True, blank=True, on_delete=models.CASCADE)
    home = models.ForeignKey(PersonalHome, null=True, blank=True, on_delete=models.CASCADE)
    label = models.CharField(max_length=80, help_text="share <name> or home of <user>")
    region = models.CharField(max_length=32, help_text="The account's location, e.g. eastus")
    size_gib = models.PositiveIntegerField(help_text="Provisioned GiB")
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["started_at"]
        indexes = [models.Index(fields=["team", "started_at"])]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(share__isnull=False, home__isnull=True)
                | models.Q(share__isnull=True, home__isnull=False),
                name="storage_span_of_one_volume",
            ),
            models.UniqueConstraint(
                fields=["share"],
                condition=models.Q(ended_at__isnull=True, share__isnull=False),
                name="storage_span_one_open_per_share",
            ),
            models.UniqueConstraint(
                fields=["home"],
                condition=models.Q(ended_at__isnull=True, home__isnull=False),
                name="storage_span_one_open_per_home",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.label}: {self.size_gib} GiB from {self.started_at:%Y-%m-%d %H:%M}"
