"""Who may open a workspace's apps (django-rules; autodiscovered).

Its JupyterLab runs as its owner: only the owner opens it, and platform admins only while the
owner grants them access (AdminAccess, e.g. for support). Team admins cannot: they manage the
workspace, they do not get its owner's shell. Only the owner shares ports or grants access.
"""

import rules

from apps_proxy.models import AdminAccess
from common.permissions import Actor
from teams.rules import is_platform_admin
from workspaces.models import Workspace
from workspaces.rules import is_owner_of


@rules.predicate
def admins_granted(user: Actor, workspace: Workspace | None) -> bool:
    return bool(
        workspace is not None
        and AdminAccess.objects.filter(workspace=workspace, revoked_at__isnull=True).exists()
    )


rules.add_perm("apps_proxy.open_ide", is_owner_of | (is_platform_admin & admins_granted))
rules.add_perm("apps_proxy.manage_apps", is_owner_of)
