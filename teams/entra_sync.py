"""The periodic Graph sync (Celery beat every ENTRA_SYNC_SECONDS, or ``manage.py entra_sync``):
what Entra ID changed between sign-ins reaches the portal without the user signing in again.

- Each group linked to a team (teams.entra._linked_teams) is read from Graph:
  GET /v1.0/groups/{id}/members?$select=id,accountEnabled&$top=999, all pages (teams.graph).
- A portal member of a linked team who signed in through Entra ID (Profile.signin_object_id)
  and is in none of the team's groups loses the membership (as at sign-in: entra.membership_end).
  Accounts without signin_object_id (invited local accounts) and service accounts (a managed
  identity's, Profile.service_account) are never touched.
- An active Entra ID account seen with accountEnabled false, or missing (404 on GET
  /v1.0/users/{id}?$select=id,accountEnabled, asked only for accounts in no group read), is
  deactivated: is_active false (Django refuses its session at the next request), its session
  auth hash changed (set_unusable_password: old sessions stay dead even once reactivated), and
  Profile.entra_disabled_at set, so that its next successful sign-in reactivates it.
- Every change is audited with Entra ID as the actor and announces member_left (the team's
  leaver policy applies to the user's workspaces).

Failures: no Graph token -> nothing is changed, the run is aborted (logged). A group Graph
cannot read (404 gone, 5xx, still throttled) is logged and skipped, and nobody leaves a team
whose groups were not all read; the other groups sync as usual. A user lookup that fails
leaves that user as they are. One change that fails is logged and never blocks the others.
"""

import logging
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction

from live import stamps
from teams import entra, entra_oidc
from teams.audit import audit_record
from teams.graph import GraphClient, GraphError
from teams.hooks import LeaveReason, member_left_announce
from teams.models import Membership, Profile, Team

log = logging.getLogger(__name__)


@dataclass
class SyncResult:
    """Counts of one run: groups read (all pages), users checked (Entra ID accounts looked at),
    members removed, users deactivated, graph calls (HTTP requests to Graph, retries included,
    not the token), failures (groups, lookups or changes that failed), aborted (no token, or
    sign-in with Entra ID off: nothing done)."""

    groups_read: int = 0
    users_checked: int = 0
    members_removed: int = 0
    users_deactivated: int = 0
    graph_calls: int = 0
    failures: int = 0
    aborted: bool = False


def _read_groups(
    graph: GraphClient, groups: set[str], result: SyncResult
) -> tuple[dict[str, set[str]], dict[str, bool]]:
    """({group id: member ids, for the groups read}, {object id: accountEnabled seen})."""
    members: dict[str, set[str]] = {}
    enabled: dict[str, bool] = {}
    for group in sorted(groups):
        try:
            found = graph.group_members(group)
        except GraphError as err:
            log.warning("Entra sync: group %s skipped: %s", group, err)
            result.failures += 1
            continue
        result.groups_read += 1
        members[group] = {str(m.get("id", "")).lower() for m in found}
        for m in found:
            enabled[str(m.get("id", "")).lower()] = m.get("accountEnabled") is not False
    return members, enabled


def _entra_accounts() -> dict[str, User]:
    """Object id (lower case) -> active user, for accounts made by Entra ID sign-in (not the
    service accounts of managed identities: Graph knows no user by their id)."""
    profiles = Profile.objects.select_related("user").filter(
        signin_object_id__isnull=False, user__is_active=True, service_account=False
    )
    return {str(p.signin_object_id).lower(): p.user for p in profiles}


def _look_up_unseen(
    graph: GraphClient, accounts: dict[str, User], enabled: dict[str, bool], result: SyncResult
) -> None:
    """Fill ``enabled`` for accounts in no group read: one GET /users/{id} each."""
    for oid in accounts.keys() - enabled.keys():
        try:
            found = graph.user(oid)
        except GraphError as err:
            log.warning("Entra sync: user %s not checked: %s", oid, err)
            result.failures += 1
            continue
        enabled[oid] = found is not None and found.get("accountEnabled") is not False


def _deactivate(user: User, now: datetime) -> None:
    with transaction.atomic():
        audit_record(
            actor=None,
            team=None,
            action="entra.user.deactivate",
            obj=user,
            before={"user": user.username, "active": True},
            after={"user": user.username, "active": False, "by": entra.ACTOR},
            now=now,
        )
        user.is_active = False
        user.set_unusable_password()  # a new session auth hash: every session of theirs ends
        user.save(update_fields=["is_active", "password"])
        Profile.objects.filter(user=user).update(entra_disabled_at=now)
        stamps.bump(stamps.topic("session", user.pk))  # open live streams end (live.streams)
        for membership in Membership.objects.filter(user=user).select_related("team"):
            member_left_announce(
                team=membership.team, user=user, reason=LeaveReason.DEACTIVATED_BY_ENTRA, now=now
            )


def _deactivate_disabled(
    accounts: dict[str, User], enabled: dict[str, bool], result: SyncResult, now: datetime
) -> None:
    for oid, user in accounts.items():
        if enabled.get(oid, True):
            continue
        try:
            _deactivate(user, now)
            result.users_deactivated += 1
        except Exception:
            log.exception("Entra sync: deactivating user %s failed", user.pk)
            result.failures += 1


def _remove_leavers(
    linked: dict[int, tuple[Team, set[str]]],
    members: dict[str, set[str]],
    result: SyncResult,
    now: datetime,
) -> None:
    """Remove Entra ID members of linked teams that are in none of the team's groups, judged
    only when every one of the team's groups was read. One query for all the teams."""
    held: dict[int, set[str]] = {}
    for team_id, (_team, team_groups) in linked.items():
        groups = {g.lower() for g in team_groups}
        if groups <= members.keys():  # else a group unread: nobody leaves on its account
            held[team_id] = set().union(*(members[g] for g in groups))
    memberships = Membership.objects.filter(
        team_id__in=held,
        user__profile__signin_object_id__isnull=False,
        user__profile__service_account=False,
    ).select_related("team", "user", "user__profile")
    for membership in memberships:
        if str(membership.user.profile.signin_object_id).lower() in held[membership.team_id]:
            continue
        try:
            with transaction.atomic():
                entra.membership_end(membership=membership, now=now)
            result.members_removed += 1
        except Exception:
            log.exception("Entra sync: removing membership %s failed", membership.pk)
            result.failures += 1


def entra_sync(*, now: datetime, graph: GraphClient | None = None) -> SyncResult:
    """One run of the sync as the module says; ``graph`` for a caller's own client (the
    benchmark's), else one with the portal's Graph token. Never raises for Graph's failures."""
    result = SyncResult()
    if not entra_oidc.enabled():
        result.aborted = True
        return result
    if graph is None:
        try:
            graph = GraphClient(token=entra_oidc.graph_token())
        except entra_oidc.SignInError as err:
            log.error("Entra sync aborted, nothing changed: %s", err)
            result.aborted, result.failures = True, 1
            return result
    linked = entra._linked_teams()
    groups = {g.lower() for _team, team_groups in linked.values() for g in team_groups}
    members, enabled = _read_groups(graph, groups, result)
    accounts = _entra_accounts()
    result.users_checked = len(accounts)
    _look_up_unseen(graph, accounts, enabled, result)
    _deactivate_disabled(accounts, enabled, result, now)
    _remove_leavers(linked, members, result, now)
    result.graph_calls = graph.calls
    log.info("Entra sync: %s", result)
    return result
