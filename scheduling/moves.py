"""What people change in the queue besides their own workspaces: a platform admin moves an
item to the front or the back (or back to its fair place), a team admin sets the team's
priority within the limits a platform admin sets. Each change is audited.

Errors raised: QueueChangeRefused (the message is shown as is), ActionNotAllowed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from django.contrib.auth.models import User
from django.db import transaction

from common.permissions import access_require
from scheduling.models import QueueEntry, TeamQueuePolicy
from teams.audit import audit_record
from teams.models import Team
from workspaces.models import Workspace
from workspaces.requests import WorkspaceActionError
from workspaces.states import Status

Where = Literal["front", "back", "fair"]
WHERE: tuple[Where, ...] = ("front", "back", "fair")


class QueueChangeRefused(WorkspaceActionError):
    """A change the queue does not take; the message says why."""


def queue_move(*, actor: User, workspace: Workspace, where: Where, now: datetime) -> None:
    """Move a queued workspace to the ``front`` (before every entry not moved, after those
    moved to the front before it), the ``back``, or back to its ``fair`` place. Audited
    (``queue.moved``). Raises QueueChangeRefused (not queued), ActionNotAllowed."""
    access_require(user=actor, perm="scheduling.move_in_queue", obj=workspace)
    if where not in ("front", "back", "fair"):
        raise QueueChangeRefused("Move it to the front, the back, or its fair place.")
    with transaction.atomic():
        if not Workspace.objects.filter(pk=workspace.pk, status=Status.QUEUED).exists():
            raise QueueChangeRefused(f"{workspace.name} is no longer in the queue.")
        entry, _ = QueueEntry.objects.select_for_update().get_or_create(workspace=workspace)
        before = {"pinned": entry.pinned_at is not None, "held_back": entry.held_back}
        entry.pinned_at = now if where == "front" else None
        entry.held_back = where == "back"
        entry.moved_by = actor
        entry.save(update_fields=["pinned_at", "held_back", "moved_by"])
        after = {"pinned": where == "front", "held_back": where == "back", "to": where}
        audit_record(
            actor=actor,
            team=workspace.team,
            action="queue.moved",
            obj=entry,
            before=before,
            after=after,
            now=now,
        )


def team_priority_set(*, actor: User, team: Team, priority: int, now: datetime) -> None:
    """Set the team's priority in the queue, within the limits a platform admin set (-2..2
    unless set). Audited (``queue.priority``). Raises QueueChangeRefused, ActionNotAllowed."""
    access_require(user=actor, perm="scheduling.set_priority", obj=team)
    with transaction.atomic():
        policy = _policy(team, now)
        if not policy.lowest <= priority <= policy.highest:
            raise QueueChangeRefused(
                f"The priority must be from {policy.lowest} to {policy.highest}; a platform "
                "admin sets those limits."
            )
        before = {"priority": policy.priority}
        policy.priority, policy.updated_at = priority, now
        policy.save(update_fields=["priority", "updated_at"])
        audit_record(
            actor=actor,
            team=team,
            action="queue.priority",
            obj=policy,
            before=before,
            after={"priority": priority},
            now=now,
        )


def team_priority_limits_set(
    *, actor: User, team: Team, lowest: int, highest: int, now: datetime
) -> None:
    """Set the limits of the team's priority (a platform admin); a priority outside them is
    brought within. Audited (``queue.priority_limits``). Raises QueueChangeRefused,
    ActionNotAllowed."""
    access_require(user=actor, perm="scheduling.set_priority_limits", obj=team)
    if not -5 <= lowest <= highest <= 5:
        raise QueueChangeRefused("The limits must be from -5 to 5, the lowest first.")
    with transaction.atomic():
        policy = _policy(team, now)
        before = {"lowest": policy.lowest, "highest": policy.highest, "priority": policy.priority}
        policy.lowest, policy.highest, policy.updated_at = lowest, highest, now
        policy.priority = min(max(policy.priority, lowest), highest)
        policy.save()
        after = {"lowest": lowest, "highest": highest, "priority": policy.priority}
        audit_record(
            actor=actor,
            team=team,
            action="queue.priority_limits",
            obj=policy,
            before=before,
            after=after,
            now=now,
        )


def _policy(team: Team, now: datetime) -> TeamQueuePolicy:
    policy, _ = TeamQueuePolicy.objects.select_for_update().get_or_create(
        team=team, defaults={"updated_at": now}
    )
    return policy
