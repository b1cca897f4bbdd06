"""A team's policies: when idle workspaces are warned and stopped (IdlePolicy), and what
happens to a leaver's workspaces (Team.leaver_policy), audited.
"""

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from common.permissions import access_require
from teams.audit import audit_record
from teams.guards import team_lock
from teams.models import (
    IDLE_FIELDS,
    AuditEntry,
    IdlePolicy,
    Team,
)


def idle_policy_set(
    *, actor: User, team: Team, values: dict[str, Any], now: datetime
) -> AuditEntry | None:
    """Set the team's idle policy (see teams.models.IdlePolicy for units) from ``values``,
    already checked against IdleBounds by the form. Team admins of the team and platform
    admins (ActionNotAllowed otherwise). Audited before and after; None when nothing changed."""
    access_require(user=actor, perm="teams.manage_team", obj=team)
    with transaction.atomic():
        team = team_lock(team)
        policy = IdlePolicy.objects.filter(team=team).first() or IdlePolicy(team=team)
        before = _idle_values(policy)
        for name in IDLE_FIELDS:
            setattr(policy, name, values[name])
        after = _idle_values(policy)
        if after == before:
            return None
        policy.save()
        return audit_record(
            actor=actor,
            team=team,
            action="team.idle_policy",
            obj=team,
            before=before,
            after=after,
            now=now,
        )


def team_leaver_policy_set(
    *, actor: User, team: Team, policy: str, now: datetime
) -> AuditEntry | None:
    """Set what happens to a leaver's workspaces in ``team`` (a LeaverPolicy value, checked
    by the form; workspaces.leavers applies it). Team admins of the team and platform admins
    (ActionNotAllowed otherwise). Audited; None when nothing changed."""
    access_require(user=actor, perm="teams.manage_team", obj=team)
    with transaction.atomic():
        team = team_lock(team)
        if team.leaver_policy == policy:
            return None
        before = {"leaver_policy": team.leaver_policy}
        team.leaver_policy = policy
        team.save(update_fields=["leaver_policy"])
        return audit_record(
            actor=actor,
            team=team,
            action="team.leaver_policy",
            obj=team,
            before=before,
            after={"leaver_policy": policy},
            now=now,
        )


def _idle_values(policy: IdlePolicy) -> dict[str, Any]:
    values = {name: getattr(policy, name) for name in IDLE_FIELDS}
    stop = values["nightly_stop"]
    values["nightly_stop"] = stop.strftime("%H:%M") if stop else None
    return values
