"""What the fair queue keeps beside the workspaces' rows: each team's priority within the
limits a platform admin sets, and, per queued or admitted workspace, a platform admin's move
and the owner's claim window (docs/scarce-gpus.md)."""

from django.conf import settings
from django.db import models


class TeamQueuePolicy(models.Model):
    """A team's place in the fair queue: ``priority`` (set by its team admin) within
    ``lowest``..``highest`` (set by a platform admin). A team's decayed GPU-hours are divided by
    2**priority, so +1 counts its past use as half, -1 as double. No row: priority 0 in -2..2."""

    team = models.OneToOneField(
        "teams.Team", on_delete=models.CASCADE, primary_key=True, related_name="queue_policy"
    )
    priority = models.SmallIntegerField(default=0)
    lowest = models.SmallIntegerField(default=-2)
    highest = models.SmallIntegerField(default=2)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(lowest__lte=models.F("priority"))
                & models.Q(priority__lte=models.F("highest")),
                name="queuepolicy_priority_within_limits",
            )
        ]

    def __str__(self) -> str:
        return f"priority {self.priority} ({self.lowest}..{self.highest})"


class QueueEntry(models.Model):
    """What the queue knows of one workspace beyond its row (created when first needed):
    a platform admin's move (``pinned_at``: to the front, in pin order; ``held_back``: behind
    every other), and once the queue started it (``admitted_at``) the window in which its
    owner claims it (``claim_by``, from when it runs) before it is stopped again."""

    workspace = models.OneToOneField(
        "workspaces.Workspace",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="queue_entry",
    )
    pinned_at = models.DateTimeField(null=True, blank=True)
    held_back = models.BooleanField(default=False)
    moved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    admitted_at = models.DateTimeField(null=True, blank=True)
    claim_by = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    # Queued by its autostart schedule: started for its owner, who has nothing to claim.
    scheduled = models.BooleanField(default=False)
    # Azure refused to start it for lack of room: not started again before this (UTC).
    retry_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["claim_by"], name="queueentry_claim_by")]

    def __str__(self) -> str:
        return f"queue entry of {self.workspace_id}"


class AutostartSchedule(models.Model):
    """Start a stopped workspace on ``weekdays`` (Monday 0 .. Sunday 6, comma-separated) at
    ``at`` in ``timezone`` (its owner's, an IANA name), so it is warm when work starts. The
    start goes through the queue (it waits there when there is no room, and says so);
    ``last_run_at`` is the scheduled instant last handled (UTC)."""

    workspace = models.OneToOneField(
        "workspaces.Workspace", on_delete=models.CASCADE, primary_key=True, related_name="autostart"
    )
    weekdays = models.CharField(max_length=13, default="0,1,2,3,4")
    at = models.TimeField()
    timezone = models.CharField(max_length=64)
    enabled = models.BooleanField(default=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.weekdays} {self.at} {self.timezone}"


class TeamQuietHours(models.Model):
    """Hours in which nothing of the team starts from the queue or a schedule: from ``start``
    to ``end`` (local times in ``timezone``; an ``end`` before ``start`` runs past midnight)
    on ``weekdays`` (of the start)."""

    team = models.OneToOneField(
        "teams.Team", on_delete=models.CASCADE, primary_key=True, related_name="quiet_hours"
    )
    start = models.TimeField()
    end = models.TimeField()
    weekdays = models.CharField(max_length=13, default="0,1,2,3,4,5,6")
    timezone = models.CharField(max_length=64)
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.start}-{self.end} {self.timezone}"
