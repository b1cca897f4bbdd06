"""Live topics bumped by teams' changes: membership, quota, requests and budget alerts bump
``team:<id>``; requests also bump ``approvals`` (notices: notifications.live_topics)."""

from typing import Any

from django.db.models.signals import post_delete, post_save

from live import stamps
from teams import models


def _on_membership(sender: object, instance: Any, **kwargs: Any) -> None:
    stamps.bump(stamps.topic("team", instance.team_id), stamps.topic("user", instance.user_id))


def _on_team_row(sender: object, instance: Any, **kwargs: Any) -> None:
    stamps.bump(stamps.topic("team", instance.team_id))


def _on_request(sender: object, instance: Any, **kwargs: Any) -> None:
    stamps.bump(
        stamps.topic("approvals"),
        stamps.topic("team", instance.team_id),
        stamps.topic("user", getattr(instance, "requester_id", None)),
    )


def _on_team(sender: object, instance: Any, **kwargs: Any) -> None:
    stamps.bump(stamps.topic("team", instance.pk))


def connect() -> None:
    """Called once from TeamsConfig.ready()."""
    for signal in (post_save, post_delete):
        signal.connect(_on_membership, sender=models.Membership, dispatch_uid="live-member")
    for model in (models.GpuQuota, models.BudgetAlert, models.IdlePolicy):
        post_save.connect(_on_team_row, sender=model, dispatch_uid=f"live-{model.__name__}")
    for request_model in (models.QuotaRequest, models.TeamQuotaIncrease):
        post_save.connect(
            _on_request, sender=request_model, dispatch_uid=f"live-{request_model.__name__}"
        )
    post_save.connect(_on_team, sender=models.Team, dispatch_uid="live-team")
