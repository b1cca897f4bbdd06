"""Who may do what with a workspace (django-rules; autodiscovered by
rules.apps.AutodiscoverRulesConfig).

Predicates take the user and a Workspace. Views fetch the workspace from
workspaces.selectors.workspace_visible_to first (a stranger gets 404); services check through
common.permissions.access_require (a member without the right gets 403).
"""

import rules

from common.permissions import Actor
from teams.rules import is_platform_admin, is_team_admin_of
from workspaces.models import Workspace


@rules.predicate
def is_owner_of(user: Actor, workspace: Workspace | None) -> bool:
    return bool(workspace is not None and user.is_authenticated and workspace.owner_id == user.pk)


@rules.predicate
def is_team_admin_of_its_team(user: Actor, workspace: Workspace | None) -> bool:
    return workspace is not None and bool(is_team_admin_of(user, workspace.team))


# Stop, start, keep running, delete or retry it, and see its JupyterLab token: its owner, a
# team admin of its team, or a platform admin.
rules.add_perm(
    "workspaces.act_on_workspace", is_owner_of | is_team_admin_of_its_team | is_platform_admin
)

# Resize it (another VM size, another MIG profile): whoever may act on it, as for Stop and Start;
# the quota and budget are checked by the service (workspaces.resizes).
rules.add_perm(
    "workspaces.resize_workspace", is_owner_of | is_team_admin_of_its_team | is_platform_admin
)

# Withdraw its request while it waits for approval: the requester (its owner) or a team admin of
# its team; a platform admin decides requests instead (approve or reject).
rules.add_perm("workspaces.withdraw_request", is_owner_of | is_team_admin_of_its_team)
