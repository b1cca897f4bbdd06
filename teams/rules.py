"""Who may do what with a team (django-rules; autodiscovered by rules.apps.AutodiscoverRulesConfig).

The one definition of a platform admin lives here: an active staff user (``is_platform_admin``
for one user, ``platform_admin_q`` for a query of users); every other module asks these.
Predicates take the user and, where named ``*_of``, a Team. Views fetch the team from
teams.selectors.team_visible_to first (a stranger gets 404), then check the permission through
common.permissions.access_require (a member without the right gets 403).
"""

import rules
from django.db.models import Q

from common.permissions import Actor
from teams.models import Membership, Role, Team


def platform_admin_q() -> Q:
    """The users who are platform admins, as a filter on the user model (is_platform_admin)."""
    return Q(is_active=True, is_staff=True)


@rules.predicate
def is_platform_admin(user: Actor) -> bool:
    return bool(user.is_authenticated and user.is_active and user.is_staff)


def _role(user: Actor, team: Team | None) -> str | None:
    if team is None or not user.is_authenticated:
        return None
    role: str | None = (
        Membership.objects.filter(user=user, team=team).values_list("role", flat=True).first()
    )
    return role


@rules.predicate
def is_researcher_of(user: Actor, team: Team | None) -> bool:
    return _role(user, team) == Role.RESEARCHER


@rules.predicate
def is_team_admin_of(user: Actor, team: Team | None) -> bool:
    return _role(user, team) == Role.TEAM_ADMIN


@rules.predicate
def is_member_of(user: Actor, team: Team | None) -> bool:
    return _role(user, team) is not None


@rules.predicate
def is_a_team_admin(user: Actor) -> bool:
    """Team admin of at least one team (the audit log is then scoped to those teams)."""
    return bool(
        user.is_authenticated
        and Membership.objects.filter(user=user, role=Role.TEAM_ADMIN).exists()
    )


# Pages listing teams: anyone logged in (each sees the teams visible to them).
rules.add_perm("teams.list_teams", rules.is_authenticated)
# A team's page (members, usage against quota and budget), read-only.
rules.add_perm("teams.view_team", is_member_of | is_platform_admin)
# Invite, change roles, remove members, link an Entra ID group, set the idle and leaver policies.
rules.add_perm("teams.manage_team", is_team_admin_of | is_platform_admin)
# Add, change, test and delete the team's chat and JSON webhooks, and read their log.
rules.add_perm("teams.manage_webhooks", is_team_admin_of | is_platform_admin)
# Ask a platform admin for a permanent quota or budget increase.
rules.add_perm("teams.request_increase", is_team_admin_of)
# Set GPU quotas, the monthly budget and the per-member cap directly.
rules.add_perm("teams.set_quota", is_platform_admin)
# Decide workspace requests above quota and teams' increase requests (the Approvals page).
rules.add_perm("teams.decide_requests", is_platform_admin)
# Read the audit log (platform admins: all rows; team admins: their teams' rows).
rules.add_perm("teams.view_audit", is_platform_admin | is_a_team_admin)
# Merge a local account into the Entra ID account of the same person (teams.account_merge).
rules.add_perm("teams.merge_accounts", is_platform_admin)
# Unlock an account or a client address locked out after failed logins (django-axes).
rules.add_perm("teams.unlock_logins", is_platform_admin)
# The Django admin site (common.admin_access.PlatformAdminAccess).
rules.add_perm("teams.use_admin_site", is_platform_admin)
