"""Team membership: invite, change role, remove, with the refusals a team admin may meet
(unknown account, Entra-managed team, the last team admin, too many invites naming no account).

Errors raised: MembershipError (refused; the message says why, for the form), InviteThrottled,
ActionNotAllowed (the actor may not manage the team).
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.urls import reverse

from common.permissions import access_require
from notifications.models import NoticeKind
from notifications.notices import notice_about, notice_resolve, notice_send
from teams.audit import audit_record
from teams.guards import team_lock
from teams.hooks import LeaveReason, member_left_announce
from teams.models import AuditEntry, Membership, Profile, Role, Team


class MembershipError(Exception):
    """A membership change that is refused (unknown account, already a member, the last team
    admin); the message says why, for the form."""


class InviteThrottled(MembershipError):
    """The actor's invites named no account too often in the last hour: invites are paused
    for them, and no account is looked up."""


# The one answer to an invite that names no account, whether nobody has that username or email,
# the account is deactivated, or two accounts share the email: a team admin learns no more.
NO_ACCOUNT = (
    "No account can be added as “{}”: check the username or email. People have an account "
    "once they have logged in to the portal."
)
INVITE_REFUSED = "membership.invite_refused"


def _user_by_name_or_email(identifier: str) -> User | None:
    """The one active local account with this username or email (case-insensitive), or None."""
    users = get_user_model().objects.filter(is_active=True)
    matches = list(users.filter(Q(username__iexact=identifier) | Q(email__iexact=identifier))[:2])
    return matches[0] if len(matches) == 1 else None


def _refuse_probing(actor: User, now: datetime) -> None:
    """Raise InviteThrottled once the actor's invites named no account
    TEAM_INVITE_MISSES_PER_HOUR times within the hour before ``now``."""
    misses = AuditEntry.objects.filter(
        actor=actor, action=INVITE_REFUSED, at__gt=now - timedelta(hours=1)
    ).count()
    if misses >= settings.TEAM_INVITE_MISSES_PER_HOUR:
        raise InviteThrottled(
            "Too many invites named no account in the last hour: adding members is paused for "
            "you for up to an hour. A platform admin can add them meanwhile."
        )


def _refuse_entra_managed(team: Team, user: User, what: str) -> None:
    """A linked team's Entra ID accounts are members because of the group (teams/entra.py puts
    them back, or takes them out, at every sign-in): a change here would be silently undone."""
    if team.entra_group_id is None:
        return
    # A service account (Profile.service_account) never signs in: its memberships are managed here.
    entra_managed = Profile.objects.filter(
        user=user, signin_object_id__isnull=False, service_account=False
    )
    if entra_managed.exists():
        group = team.entra_group_name or team.entra_group_id
        raise MembershipError(
            f"{user.username} signs in with Entra ID and {team.name} is linked to the group "
            f"{group}: {what} in Entra ID (the group's members, or the Team.Admin app role)."
        )


def membership_invite(
    *, actor: User, team: Team, identifier: str, role: str, now: datetime
) -> Membership:
    """Add the existing account named by ``identifier`` (username or email) to ``team`` with
    ``role`` ("researcher" | "team_admin"), audit it and tell them. Raises ActionNotAllowed
    (actor may not manage the team), InviteThrottled (too many recent invites named no
    account), MembershipError (no single active account: NO_ACCOUNT, audited and committed
    even so, unless the caller's own transaction rolls back; already a member; an Entra ID
    account while the team is linked to a group, whose membership follows the group)."""
    access_require(user=actor, perm="teams.manage_team", obj=team)
    _refuse_probing(actor, now)
    identifier = identifier.strip()
    user = _user_by_name_or_email(identifier)
    if user is None:
        # Outside any transaction of ours: this audit row is what _refuse_probing counts.
        audit_record(
            actor=actor,
            team=team,
            action=INVITE_REFUSED,
            obj=team,
            before={},
            after={"identifier": identifier},
            now=now,
        )
        raise MembershipError(NO_ACCOUNT.format(identifier))
    _refuse_entra_managed(team, user, "add them to the group")
    return _membership_add(actor=actor, team=team, user=user, role=role, now=now)


def _membership_add(*, actor: User, team: Team, user: User, role: str, now: datetime) -> Membership:
    """Add ``user`` to the locked ``team``, audited; tell them once committed."""
    with transaction.atomic():
        team = team_lock(team)
        if Membership.objects.filter(team=team, user=user).exists():
            raise MembershipError(f"{user.username} is already a member of {team.name}.")
        membership = Membership.objects.create(team=team, user=user, role=Role(role))
        audit_record(
            actor=actor,
            team=team,
            action="membership.add",
            obj=membership,
            before={},
            after={"user": user.username, "role": membership.role},
            now=now,
        )
    link = reverse("team-detail", kwargs={"slug": team.slug})
    transaction.on_commit(
        lambda: notice_send(
            users=[user],
            subject=f"You were added to {team.name}",
            text=f"{actor.username} added you to {team.name} as {membership.get_role_display()}.",
            link=link,
            now=now,
            kind=NoticeKind.MEMBER_ADDED,
            about=notice_about(membership),
        )
    )
    return membership


def _membership_for_change(team: Team, membership_id: int) -> Membership:
    try:
        return Membership.objects.select_related("user").get(pk=membership_id, team=team)
    except Membership.DoesNotExist:
        raise MembershipError("That person is not a member of this team.") from None


def _refuse_last_admin(team: Team, membership: Membership, verb: str) -> None:
    others = Membership.objects.filter(team=team, role=Role.TEAM_ADMIN).exclude(pk=membership.pk)
    if membership.role == Role.TEAM_ADMIN and not others.exists():
        raise MembershipError(
            f"{membership.user.username} is the last team admin of {team.name}; "
            f"make someone else team admin before you {verb} them."
        )


def membership_change_role(
    *, actor: User, team: Team, membership_id: int, role: str, now: datetime
) -> Membership:
    """Give a member of ``team`` the role "researcher" | "team_admin", audited. Raises
    MembershipError (not a member, demoting the last team admin, or an Entra ID account of a
    linked team: its role follows the Team.Admin app role), ActionNotAllowed."""
    access_require(user=actor, perm="teams.manage_team", obj=team)
    with transaction.atomic():
        team = team_lock(team)
        membership = _membership_for_change(team, membership_id)
        role = Role(role)
        if role == membership.role:
            return membership
        _refuse_entra_managed(team, membership.user, "change their role")
        if role != Role.TEAM_ADMIN:
            _refuse_last_admin(team, membership, "demote")
        before = {"user": membership.user.username, "role": membership.role}
        membership.role = role
        membership.save(update_fields=["role"])
        _member_notices_resolve(membership, actor, f"Role changed to {role.label}", now)
        after = {"user": membership.user.username, "role": role.value}
        audit_record(
            actor=actor,
            team=team,
            action="membership.role",
            obj=membership,
            before=before,
            after=after,
            now=now,
        )
    return membership


def membership_remove(*, actor: User, team: Team, membership_id: int, now: datetime) -> None:
    """Remove a member from ``team``, audited; member_left is announced, so their workspaces
    in the team follow its leaver policy (workspaces.leavers). Raises MembershipError (not a
    member, the last team admin, or an Entra ID account of a linked team: its membership
    follows the group), ActionNotAllowed."""
    access_require(user=actor, perm="teams.manage_team", obj=team)
    with transaction.atomic():
        team = team_lock(team)
        membership = _membership_for_change(team, membership_id)
        _refuse_entra_managed(team, membership.user, "remove them from the group")
        _refuse_last_admin(team, membership, "remove")
        before = {"user": membership.user.username, "role": membership.role}
        audit_record(
            actor=actor,
            team=team,
            action="membership.remove",
            obj=membership,
            before=before,
            after={},
            now=now,
        )
        _member_notices_resolve(membership, actor, f"Removed from {team.name}", now)
        member_left_announce(
            team=team, user=membership.user, reason=LeaveReason.REMOVED_BY_ADMIN, now=now
        )
        membership.delete()


def _member_notices_resolve(
    membership: Membership, actor: User, reason: str, now: datetime
) -> None:
    """ "… added you to <team> as <role>" is no longer true once the role or membership ends."""
    notice_resolve(
        about=notice_about(membership),
        kinds=[NoticeKind.MEMBER_ADDED],
        now=now,
        by=actor,
        reason=f"{reason} by {actor.username}",
    )
