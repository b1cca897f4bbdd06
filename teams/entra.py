"""Business rules of Entra ID sign-in: which account a validated ID token is, and what the
token's groups and app roles make that account in the portal.

- The account is found by the token's immutable ``oid`` (Profile.signin_object_id), never by
  email or UPN, which change; the first sign-in creates it, username from preferred_username
  made unique. Later sign-ins refresh the UPN and name.
- A team is linked to Entra ID by its group object id (Team.entra_group_id, also the group its
  AKS RoleBindings name): one field for both. At every sign-in the user is made a
  member of each linked team whose group is in the token's ``groups`` claim (or, past the
  overage, Graph's answer) and removed from each linked team whose group is not. Teams with
  no group are left to their team admins.
- Role in those teams: team admin with the app role ENTRA_TEAM_ADMIN_APP_ROLE, else researcher.
- Platform admin (is_staff, teams.rules.is_platform_admin) exactly with the app role
  ENTRA_PLATFORM_ADMIN_APP_ROLE.
- An account the Graph sync deactivated (teams.entra_sync: disabled or deleted in Entra ID)
  is reactivated by its next successful sign-in; one a portal admin deactivated is not.
- A membership Entra ID ends announces teams.hooks.member_left_announce (the leaver policy).
Every change is audited with the action "entra.*" and no user as actor: the audit log shows
"Entra ID" as who did it.
"""

from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction

from teams.audit import audit_record
from teams.hooks import LeaveReason, member_left_announce
from teams.models import Membership, Profile, Role, Team

ACTOR = "Entra ID"  # Shown as the actor of the "entra.*" audit rows.
USERNAME_MAX = 150  # Django's User.username.


def _unique_username(wanted: str) -> str:
    users = get_user_model().objects
    base = (wanted or "entra-user")[: USERNAME_MAX - 4]
    name, n = base, 1
    while users.filter(username=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def user_from_claims(*, claims: dict[str, Any], now: datetime) -> User:
    """The portal user of a validated ID token's claims (oid, preferred_username, name),
    created at the first sign-in; the UPN and name are refreshed at every one."""
    upn = str(claims.get("preferred_username") or claims.get("upn") or "")[:113]
    first, _, last = str(claims.get("name") or "").partition(" ")
    profile = Profile.objects.select_related("user").filter(signin_object_id=claims["oid"]).first()
    if profile is None:
        user = get_user_model().objects.create_user(
            username=_unique_username(upn), email=upn, first_name=first[:150], last_name=last[:150]
        )
        profile, _ = Profile.objects.get_or_create(user=user)
        profile.signin_object_id = claims["oid"]
        audit_record(
            actor=None,
            team=None,
            action="entra.user.create",
            obj=user,
            before={},
            after={"user": user.username, "upn": upn, "by": ACTOR},
            now=now,
        )
    user = profile.user
    user.first_name, user.last_name = first[:150], last[:150]
    user.save(update_fields=["first_name", "last_name"])
    # The verified identity is what AKS knows the user by (Profile.kubernetes_users).
    profile.entra_object_id, profile.entra_upn = claims["oid"], upn
    profile.save()
    return user


def platform_admin_set(*, user: User, roles: list[str], now: datetime) -> None:
    """is_staff exactly when the token carries the platform admin app role; audited."""
    wanted = settings.ENTRA_PLATFORM_ADMIN_APP_ROLE in roles
    if user.is_staff == wanted:
        return
    audit_record(
        actor=None,
        team=None,
        action="entra.platform_admin",
        obj=user,
        before={"user": user.username, "platform_admin": user.is_staff},
        after={"user": user.username, "platform_admin": wanted, "by": ACTOR},
        now=now,
    )
    user.is_staff = wanted
    user.save(update_fields=["is_staff"])


def _linked_teams() -> dict[int, tuple[Team, set[str]]]:
    """team id -> (team, its Entra group ids, lower case), for teams linked to a group
    (Team.entra_group_id; a set, so that callers need not care that it holds one). One query."""
    teams = Team.objects.exclude(entra_group_id=None)
    return {team.pk: (team, {str(team.entra_group_id).lower()}) for team in teams}


def _audit_membership(
    membership: Membership,
    action: str,
    before: dict[str, Any],
    after: dict[str, Any],
    now: datetime,
) -> None:
    after = {**after, "by": ACTOR} if after else {"by": ACTOR}
    audit_record(
        actor=None,
        team=membership.team,
        action=action,
        obj=membership,
        before=before,
        after=after,
        now=now,
    )


def memberships_sync(*, user: User, groups: list[str], roles: list[str], now: datetime) -> None:
    """Make `user` a member of exactly the linked teams whose group is in `groups`, as team
    admin with the team admin app role, else researcher; audited per change."""
    held = {str(g).lower() for g in groups}
    role = Role.TEAM_ADMIN if settings.ENTRA_TEAM_ADMIN_APP_ROLE in roles else Role.RESEARCHER
    current = {m.team_id: m for m in Membership.objects.filter(user=user).select_related("team")}
    for team_id, (team, team_groups) in _linked_teams().items():
        membership = current.get(team_id)
        if team_groups & held and membership is None:
            membership = Membership.objects.create(team=team, user=user, role=role)
            _audit_membership(
                membership, "entra.membership.add", {}, {"user": user.username, "role": role}, now
            )
        elif team_groups & held and membership is not None and membership.role != role:
            before = {"user": user.username, "role": membership.role}
            membership.role = role
            membership.save(update_fields=["role"])
            after = {"user": user.username, "role": role}
            _audit_membership(membership, "entra.membership.role", before, after, now)
        elif not team_groups & held and membership is not None:
            membership_end(membership=membership, now=now)


def membership_end(*, membership: Membership, now: datetime) -> None:
    """Entra ID took the user out of the team's group: the membership goes, audited, and
    member_left is announced (the team's leaver policy applies to their workspaces)."""
    before = {"user": membership.user.username, "role": membership.role}
    _audit_membership(membership, "entra.membership.remove", before, {}, now)
    member_left_announce(
        team=membership.team, user=membership.user, reason=LeaveReason.REMOVED_BY_ENTRA, now=now
    )
    membership.delete()


def user_reactivate(*, user: User, now: datetime) -> None:
    """A successful sign-in of an account the Graph sync deactivated (Entra ID had disabled
    or deleted the user, Profile.entra_disabled_at): active again, audited. An account a
    portal admin deactivated carries no such mark and stays deactivated."""
    profile = Profile.objects.filter(user=user).first()
    if user.is_active or profile is None or profile.entra_disabled_at is None:
        return
    audit_record(
        actor=None,
        team=None,
        action="entra.user.reactivate",
        obj=user,
        before={"user": user.username, "active": False},
        after={"user": user.username, "active": True, "by": ACTOR},
        now=now,
    )
    user.is_active = True
    user.save(update_fields=["is_active"])
    Profile.objects.filter(pk=profile.pk).update(entra_disabled_at=None)


def user_sign_in(*, claims: dict[str, Any], groups: list[str], now: datetime) -> User:
    """The account for a validated ID token, its platform admin flag and linked teams' memberships
    set from the token's app roles and `groups` (the claim, or Graph's answer past the
    overage). One transaction: a failure changes nothing."""
    roles = [str(r) for r in claims.get("roles") or []]
    with transaction.atomic():
        user = user_from_claims(claims=claims, now=now)
        user_reactivate(user=user, now=now)
        platform_admin_set(user=user, roles=roles, now=now)
        memberships_sync(user=user, groups=groups, roles=roles, now=now)
    return user
