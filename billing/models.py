"""Metering: when each workspace was billable, at which price."""

from django.db import models


class UsageInterval(models.Model):
    """A stretch of time in which a workspace's compute was billable (statuses in
    workspaces.states.BILLABLE), at the hourly price it was requested at.

    Opened and closed by workspaces.states.transition only; ``ended_at`` is None while open.
    Spend = sum of hours x price_per_hour (USD).
    """

    workspace = models.ForeignKey(
        "workspaces.Workspace", on_delete=models.CASCADE, related_name="usage_intervals"
    )
    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="+")
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    price_per_hour = models.DecimalField(max_digits=10, decimal_places=4, help_text="USD/hour")

    class Meta:
        ordering = ["started_at"]
        indexes = [models.Index(fields=["team", "started_at"])]
        constraints = [
            # At most one open interval per workspace.
            models.UniqueConstraint(
                fields=["workspace"],
                condition=models.Q(ended_at__isnull=True),
                name="usageinterval_one_open",
            )
        ]

    def __str__(self):
        return f"{self.workspace_id} {self.started_at:%Y-%m-%d %H:%M} - {self.ended_at or 'now'}"
