"""A leaver's workspaces follow their team's leaver policy (Team.leaver_policy).

teams announces a leave (teams.hooks.member_left_announce: a team admin's removal, Entra ID's
removal at sign-in or by the Graph sync, a deactivation by the sync), after it committed;
``member_left_receive`` (registered in WorkspacesConfig.ready) applies the policy to the
leaver's workspaces in that team:

- stop: each running one is stopped as an idle stop is (the same transition and task, no
  actor, its owner told why); one provisioning or starting then is checked again after
  LEAVER_RECHECK_SECONDS and stopped if it runs (Azure operations in flight are not cut);
- keep: nothing;
- hand_over: every workspace of theirs not deleted gets a new owner, the team's longest-standing
  active team admin, audited (action workspace.hand_over, no actor) and told by a notice; a MIG
  slice's Kubernetes access is remade for the new owner. A team without another active team
  admin falls back to stop.
A user who is a member again (and active) by the time this runs is left alone.
"""

import logging
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from django.contrib.auth.models import User
from django.db import transaction
from django.urls import reverse

from notifications.notices import notice_send
from teams.audit import audit_record
from teams.hooks import LeaveReason
from teams.models import LeaverPolicy, Membership, Role, Team
from workspaces.actions import workspace_stop_automatically
from workspaces.models import Workspace
from workspaces.states import Status

log = logging.getLogger(__name__)
LEAVER_RECHECK_SECONDS = 600  # a VM create or start on Azure takes a few minutes
IN_FLIGHT = (Status.REQUESTED, Status.PROVISIONING, Status.SETTING_UP, Status.STARTING)


@dataclass
class LeaverOutcome:
    """What was done: the policy applied, workspace ids stopped / handed over, the new owner."""

    policy: str
    stopped: list[UUID] = field(default_factory=list)
    handed_over: list[UUID] = field(default_factory=list)
    new_owner: User | None = None
    in_flight: list[UUID] = field(default_factory=list)


def member_left_receive(*, team: Team, user: User, reason: str, now: datetime) -> None:
    """A teams.hooks member-left callback (registered in WorkspacesConfig.ready())."""
    leaver_workspaces_apply(team_id=team.pk, user_id=user.pk, reason=reason, now=now)


def _still_in(team_id: int, user: User) -> bool:
    return user.is_active and Membership.objects.filter(team_id=team_id, user=user).exists()


def _successor(team: Team, leaver_id: int) -> User | None:
    """The longest-standing active team admin of ``team`` other than the leaver, or None."""
    membership = (
        Membership.objects.filter(team=team, role=Role.TEAM_ADMIN, user__is_active=True)
        .exclude(user_id=leaver_id)
        .select_related("user")
        .order_by("created_at", "pk")
        .first()
    )
    return membership.user if membership else None


def leaver_workspaces_apply(
    *, team_id: int, user_id: int, reason: str, now: datetime, recheck: bool = True
) -> LeaverOutcome:
    """Apply ``team``'s leaver policy to ``user``'s workspaces in it (see the module);
    ``recheck``: queue the one later look at workspaces in flight (not from that look)."""
    team = Team.objects.get(pk=team_id)
    user = User.objects.get(pk=user_id)
    outcome = LeaverOutcome(policy=team.leaver_policy)
    if _still_in(team_id, user) or team.leaver_policy == LeaverPolicy.KEEP:
        return outcome
    if team.leaver_policy == LeaverPolicy.HAND_OVER:
        outcome.new_owner = _successor(team, user.pk)
        if outcome.new_owner is not None:
            outcome.handed_over = _hand_over(team, user, outcome.new_owner, reason, now)
            return outcome
        outcome.policy = LeaverPolicy.STOP  # nobody to hand over to
    outcome.stopped = _stop_running(team, user, reason, now)
    if recheck:
        outcome.in_flight = _recheck_in_flight(team, user, reason)
    return outcome


def _why(user: User, team: Team, reason: str) -> str:
    return f"{user.username} left {team.name} ({LeaveReason(reason).label})"


def _stop_running(team: Team, user: User, reason: str, now: datetime) -> list[UUID]:
    why = _why(user, team, reason)
    stopped = []
    running = Workspace.objects.filter(team=team, owner=user, status=Status.RUNNING)
    for workspace_id in running.values_list("pk", flat=True):
        try:
            if workspace_stop_automatically(
                workspace_id=workspace_id,
                reason=f"Stopped: its owner {why}; the team's leaver policy is stop",
                detail={"rule": "leaver", "leave_reason": reason, "team": team.slug},
                now=now,
            ):
                stopped.append(workspace_id)
        except Exception:  # one workspace never holds back the others
            log.exception("Leaver policy: stopping workspace %s failed", workspace_id)
    return stopped


def _recheck_in_flight(team: Team, user: User, reason: str) -> list[UUID]:
    # A real cycle: workspaces.tasks imports this module (leaver_recheck runs it).
    from workspaces.tasks import leaver_recheck

    ids = list(
        Workspace.objects.filter(team=team, owner=user, status__in=IN_FLIGHT).values_list(
            "pk", flat=True
        )
    )
    if ids:
        transaction.on_commit(
            lambda: leaver_recheck.apply_async(
                args=[team.pk, user.pk, reason], countdown=LEAVER_RECHECK_SECONDS
            )
        )
    return ids


def _hand_over(team: Team, leaver: User, owner: User, reason: str, now: datetime) -> list[UUID]:
    handed = []
    mine = Workspace.objects.filter(team=team, owner=leaver).exclude(status=Status.DELETED)
    for workspace in mine:
        with transaction.atomic():
            if not Workspace.objects.filter(pk=workspace.pk, owner=leaver).update(
                owner=owner, updated_at=now
            ):
                continue  # handed over meanwhile
            audit_record(
                actor=None,
                team=team,
                action="workspace.hand_over",
                obj=workspace,
                before={"workspace": workspace.name, "owner": leaver.username},
                after={"owner": owner.username, "by": "leaver policy", "reason": reason},
                now=now,
            )
            _tell_new_owner(workspace, team, leaver, owner, reason, now)
            _access_later(workspace.pk)
        handed.append(workspace.pk)
    return handed


def _access_later(workspace_id: UUID) -> None:
    """Its provider objects made to grant the new owner (nothing for a kind whose objects do not
    name the owner: WorkspaceBackend.access_refresh)."""
    # A real cycle: workspaces.tasks imports this module (leaver_recheck runs it).
    from workspaces.tasks import refresh_slice_access

    transaction.on_commit(lambda: refresh_slice_access.delay(str(workspace_id)))


def _tell_new_owner(
    workspace: Workspace, team: Team, leaver: User, owner: User, reason: str, now: datetime
) -> None:
    caveat = workspace.backend.hand_over_note.format(leaver=leaver.username)
    notice_send(
        users=[owner],
        subject=f"You now own {workspace.name}",
        text=(
            f"{_why(leaver, team, reason)}, so {workspace.name} is yours now (the team's "
            f"leaver policy). {caveat}"
        ),
        link=reverse("workspaces:detail", args=[workspace.pk]),
        now=now,
    )


def workspaces_hand_to_merged_account(*, local: User, entra: User) -> dict[str, int]:
    """A teams.hooks.account_merged callback: the local account's workspaces (all of them,
    deleted ones too, so their history and spend follow the person) now belong to the Entra
    ID account it was merged into. Their provider objects that name the owner are brought up
    to date by the identity refresh queued once the merge commits."""
    moved = Workspace.objects.filter(owner=local).update(owner=entra)
    return {"workspaces": moved}
