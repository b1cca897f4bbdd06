"""Which live topics a workspace change bumps, and the receivers that bump them.

A change to workspace W bumps ``ws:W`` (its page), ``team:<team>`` (team page, team lists),
``user:<owner>`` (the owner's list), ``workspaces`` (a platform admin's list) and
``approvals`` (the queue shows teams' GPUs in use). Status changes arrive as WorkspaceEvent
rows (workspaces.states); other visible columns written with ``.update()`` call
``workspaces_changed`` where they are written. Telemetry only bumps ``ws:W``.
"""

from collections.abc import Iterable
from typing import Any
from uuid import UUID

from django.contrib.auth.models import User
from django.db.models.signals import post_save

from live import stamps
from teams.rules import is_platform_admin
from teams.selectors import team_visible_to
from workspaces.models import Workspace, WorkspaceEvent, WorkspaceExtension


def workspaces_changed(ids: Iterable[UUID | None]) -> None:
    """After the current transaction commits: bump the topics of workspaces ``ids`` (one
    query then, for their teams and owners). Nothing on rollback."""
    known = {i for i in ids if i is not None}
    if known:
        stamps.after_commit(_bump, known)


def telemetry_changed(ids: Iterable[UUID]) -> None:
    """New telemetry of workspaces ``ids``: only their own pages show it."""
    stamps.bump(*(stamps.topic("ws", i) for i in ids))


def workspace_topics(*, user: User) -> list[str]:
    """The topics of the workspace list as ``user`` sees it (workspaces.selectors
    .workspace_visible_to): every workspace for a platform admin, else their teams'."""
    if is_platform_admin(user):
        return [stamps.topic("workspaces")]
    teams = team_visible_to(user=user).values_list("pk", flat=True)
    return [stamps.topic("team", pk) for pk in teams]


def _bump(ids: set[UUID]) -> None:
    topics = {stamps.topic("workspaces"), stamps.topic("approvals")}
    for pk, team_id, owner_id in Workspace.objects.filter(pk__in=ids).values_list(
        "pk", "team_id", "owner_id"
    ):
        topics |= {
            stamps.topic("ws", pk),
            stamps.topic("team", team_id),
            stamps.topic("user", owner_id),
        }
    stamps.bump_now(topics)


def _on_workspace(sender: object, instance: Any, **kwargs: Any) -> None:
    workspaces_changed([instance.pk])


def _on_child(sender: object, instance: Any, **kwargs: Any) -> None:
    workspaces_changed([instance.workspace_id])


def connect() -> None:
    """Called once from WorkspacesConfig.ready()."""
    post_save.connect(_on_workspace, sender=Workspace, dispatch_uid="live-workspace")
    post_save.connect(_on_child, sender=WorkspaceEvent, dispatch_uid="live-workspace-event")
    post_save.connect(_on_child, sender=WorkspaceExtension, dispatch_uid="live-extension")
