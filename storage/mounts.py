"""Which NFS shares a workspace mounts (workspaces.hooks.WorkspaceMounts): the ready shares of
its team the owner chose at the request (Workspace.mount_shares; null: every one their role may
mount), read-write or read-only, at /data/<name>, and the owner's home in that team at
/data/home unless they chose not to (Workspace.mount_home). The same list for a VM
(cloud-init, agent/nfs_mounts.py) and a pod (PersistentVolumes of the Azure Files CSI
driver)."""

from __future__ import annotations

from dataclasses import replace

import structlog
from django.contrib.auth.models import User
from django.utils import timezone

from cloud.azure_storage import nfs_source
from cloud.errors import CloudError
from storage import provisioning
from storage.models import HOME_MOUNT, Access, PersonalHome, TeamShare, VolumeState
from storage.selectors import team_storage_get
from storage.services import home_ensure
from teams.models import Membership, Role, Team
from workspaces.hooks import WorkspaceMount
from workspaces.models import Workspace


def share_access(*, share: TeamShare, role: str | None) -> str:
    """How a member of ``role`` mounts the share: team admins read-write, researchers as the
    share says, others not at all."""
    if role == Role.TEAM_ADMIN:
        return Access.READ_WRITE
    if role == Role.RESEARCHER:
        return share.researcher_access
    return Access.NONE


def _role(team: Team, user: User) -> str | None:
    return Membership.objects.filter(team=team, user=user).values_list("role", flat=True).first()


def mount_options(*, team: Team, user: User) -> list[str]:
    """The names of the team's ready shares ``user`` may mount, by name
    (workspaces.hooks.MountOptions): what a request may choose among."""
    role = _role(team, user)
    shares = TeamShare.objects.filter(team=team, state=VolumeState.READY).order_by("name")
    return [s.name for s in shares if share_access(share=s, role=role) != Access.NONE]


def workspace_mounts(*, workspace: Workspace) -> list[WorkspaceMount]:
    """What the workspace mounts when it is made, the owner's home made first if need be
    (workspaces.hooks.WorkspaceMounts)."""
    return mounts_planned(workspace=workspace, make_home=True)


def mounts_shown(*, workspace: Workspace) -> list[WorkspaceMount]:
    """What the workspace's page lists (workspaces.hooks.WorkspaceMounts, a read)."""
    return mounts_planned(workspace=workspace)


def mounts_planned(*, workspace: Workspace, make_home: bool = False) -> list[WorkspaceMount]:
    """The workspace's mounts; without make_home a read only: the home when it is ready."""
    account = team_storage_get(team=workspace.team).account_name
    if not account:
        return []
    role = _role(workspace.team, workspace.owner)
    found = []
    shares = TeamShare.objects.filter(team=workspace.team, state=VolumeState.READY)
    if workspace.mount_shares is not None:  # The owner's choice at the request.
        shares = shares.filter(name__in=workspace.mount_shares)
    for share in shares.order_by("name"):
        access = share_access(share=share, role=role)
        if access == Access.NONE:
            continue
        mount = _mount(account, share.azure_name, share.mount_path, access, share.name)
        found.append(replace(mount, size_gib=share.size_gib))
    if role is None or not workspace.mount_home:
        home = None
    elif make_home:
        home = _home(workspace)
    else:
        home = PersonalHome.objects.filter(
            team=workspace.team, owner=workspace.owner, state=VolumeState.READY
        ).first()
    if home is not None:
        mount = _mount(account, home.azure_name, HOME_MOUNT, Access.READ_WRITE, "home")
        found.append(replace(mount, size_gib=home.size_gib))
    return found


def _home(workspace: Workspace) -> PersonalHome | None:
    """The owner's home in the team, made now if the team's quota has room, so that their
    first workspace already mounts it; a home Azure cannot make now is left out (the VM still
    starts, and the next workspace mounts it)."""
    home = home_ensure(team=workspace.team, owner=workspace.owner, now=timezone.now())
    if home is None:
        return None
    if home.state == VolumeState.CREATING:
        try:
            provisioning.volume_provision(kind="home", volume_id=home.pk, now=timezone.now())
        except CloudError as error:
            _log.warning("home not ready", home=home.pk, code=error.code)
        home.refresh_from_db()
    return home if home.state == VolumeState.READY else None


_log = structlog.get_logger("storage")


def _mount(account: str, share: str, path: str, access: str, label: str) -> WorkspaceMount:
    return WorkspaceMount(
        source=nfs_source(account, share),
        path=path,
        read_only=access == Access.READ_ONLY,
        label=label,
        account=account,
        share=share,
    )
