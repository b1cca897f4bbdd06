"""Business rules of "link a group": a team admin (or a platform admin) binds a team to one
Entra ID security group (Team.entra_group_id). The same object id is what Entra ID sign-in
makes members of (teams/entra.py) and what the team's AKS namespace RoleBindings name.

Before linking, the portal reads the group through Microsoft Graph with its own identity
(client credentials; ``GET /v1.0/groups/{id}?$select=id,displayName,securityEnabled``, which
needs GroupMember.Read.All or Group.Read.All as an application permission). It refuses a group
Graph does not know, one that is not security-enabled (a Microsoft 365 group: AKS RoleBindings
and the groups claim's security groups do not cover it) and one already linked to another team
(two teams on one group would share every member). A linked team's members with Entra ID
accounts join at their next sign-in. Errors raised: GroupLinkError (message shown as is),
common.permissions.ActionNotAllowed.
"""

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

import requests
from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from common.permissions import access_require
from teams import entra_oidc
from teams.audit import audit_record
from teams.models import Team

log = logging.getLogger(__name__)
GROUP_SELECT = "id,displayName,securityEnabled"
NAME_MAX = 256  # Team.entra_group_name; Graph's limit for displayName.


class GroupLinkError(Exception):
    """A refused link or unlink; str() is the reason, fit for the form."""


@dataclass(frozen=True)
class EntraGroup:
    """A group as Graph answers it: id (lower case), displayName, securityEnabled."""

    id: str
    display_name: str
    security_enabled: bool


def group_get(*, group_id: uuid.UUID) -> EntraGroup | None:
    """The group from Graph's GET /v1.0/groups/{id}, or None when Graph answers 404
    (Request_ResourceNotFound). Raises GroupLinkError when Graph or Entra ID does not answer
    sensibly (never a token or the secret in the message or the log)."""
    url = f"{settings.ENTRA_GRAPH_ENDPOINT.rstrip('/')}/v1.0/groups/{group_id}"
    try:
        response = requests.get(
            url,
            params={"$select": GROUP_SELECT},
            headers={"Authorization": f"Bearer {entra_oidc.graph_token()}"},
            timeout=settings.ENTRA_HTTP_TIMEOUT,
        )
        if response.status_code == 404:
            return None
        response.raise_for_status()
        body = response.json()
        return EntraGroup(
            id=str(uuid.UUID(str(body["id"]))),
            display_name=str(body.get("displayName") or "")[:NAME_MAX],
            security_enabled=body.get("securityEnabled") is True,
        )
    except (entra_oidc.SignInError, requests.RequestException, ValueError, KeyError) as err:
        log.warning("Graph GET group failed: %s", type(err).__name__)
        raise GroupLinkError(
            "Microsoft Graph did not answer about this group; try again in a minute."
        ) from err


def _checked_group(team: Team, group_id: uuid.UUID) -> EntraGroup:
    other = Team.objects.filter(entra_group_id=group_id).exclude(pk=team.pk).first()
    if other is not None:
        raise GroupLinkError(f"This group is linked to {other.name} already; one group, one team.")
    group = group_get(group_id=group_id)
    if group is None:
        raise GroupLinkError(
            f"Entra ID has no group {group_id}: copy the Object ID from the group's Overview."
        )
    if not group.security_enabled:
        raise GroupLinkError(
            f"{group.display_name or group_id} is not a security group (a Microsoft 365 group?): "
            "link a security group, which AKS can also bind."
        )
    return group


def _state(team: Team) -> dict[str, str | None]:
    group = str(team.entra_group_id) if team.entra_group_id else None
    return {"group": group, "group_name": team.entra_group_name}


def team_group_link(*, actor: User, team: Team, group_id: uuid.UUID | None, now: datetime) -> Team:
    """Link ``team`` to the Entra ID security group ``group_id`` (None: unlink), checked in
    Graph; audited as "team.group_link" with before/after. Returns the team as saved. Raises
    ActionNotAllowed (actor may not manage the team), GroupLinkError (sign-in off, unknown or
    non-security group, linked to another team, Graph down)."""
    access_require(user=actor, perm="teams.manage_team", obj=team)
    if not entra_oidc.enabled():
        raise GroupLinkError("Entra ID sign-in is not configured, so no group can be linked.")
    group = _checked_group(team, group_id) if group_id is not None else None
    try:
        with transaction.atomic():
            team = Team.objects.select_for_update().get(pk=team.pk)
            before = _state(team)
            team.entra_group_id = uuid.UUID(group.id) if group else None
            team.entra_group_name = group.display_name if group else ""
            team.save(update_fields=["entra_group_id", "entra_group_name"])
            after = _state(team)
            if before != after:
                audit_record(
                    actor=actor,
                    team=team,
                    action="team.group_link",
                    obj=team,
                    before=before,
                    after=after,
                    now=now,
                )
    except IntegrityError:  # Another team took the group between the check and the save.
        raise GroupLinkError("This group was just linked to another team.") from None
    return team
