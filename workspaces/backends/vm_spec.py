"""What a GPU VM is created from (the VM backend's, workspaces.backends.vm): its VmSpec, with
the image and OS disk its size takes, the capacity reservation group of a booking, and the
cloud-init that installs the telemetry agent, its environment and its mounts."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings

from agent import cloud_init, environment_init, nfs_mounts
from cloud.azure_vm import VmSpec
from cloud.protocols import VmCloud
from environments.recipes import jupyter_token, vm_recipe, vscode_password_hash
from teams.models import Profile
from workspaces import hooks, telemetry
from workspaces.azure import azure_settings
from workspaces.backends import vm_snapshots
from workspaces.models import Workspace


def vm_spec(cloud: VmCloud, workspace: Workspace, now: datetime) -> VmSpec:
    """What to create: the image generation and OS disk SKU follow the size's resource SKU in
    the region (HyperVGenerations, PremiumIO), since a Gen1-only size cannot boot a Gen2
    image and a size without premium storage refuses a Premium_LRS disk."""
    sku = cloud.sku_info(azure_settings(), location=workspace.region, vm_size=workspace.vm_size)
    recipe = vm_recipe(workspace.environment_recipe or {})
    return VmSpec(
        image=recipe.image if recipe else sku.image,
        os_disk_sku=sku.os_disk_sku,
        workspace_id=str(workspace.pk),
        location=workspace.region,
        vm_size=workspace.vm_size,
        admin_username=workspace.ssh_user,
        ssh_public_key=workspace.ssh_public_key,
        custom_data=_with_mounts(workspace, _cloud_init(workspace, now)),
        spot=workspace.spot,
        capacity_reservation_group=workspace.capacity_reservation_group,
        os_disk_id=vm_snapshots.os_disk_from_snapshot(workspace, sku=sku.os_disk_sku),
        tags={
            "portal": "gpu-workspace-portal",
            "team": workspace.team.slug,
            "workspace": str(workspace.pk),
            "owner": workspace.owner.username,
        },
    )


def _cloud_init(workspace: Workspace, now: datetime) -> str:
    """cloud-init that installs the telemetry agent (docs/agent-protocol.md) and, for a VM made
    from an environment, its layer and JupyterLab (agent/environment_init.py). The token is the
    same for every create of this VM, so a create sent again carries the same customData."""
    agent = {
        "portal_url": settings.PORTAL_URL,
        "workspace": str(workspace.pk),
        "token": telemetry.agent_token_issue(workspace_id=workspace.pk, now=now),
        "interval_seconds": settings.AGENT_INTERVAL_SECONDS,
    }
    recipe = vm_recipe(workspace.environment_recipe or {})
    if recipe is None:
        return cloud_init.render(**agent)
    return environment_init.render(
        agent=agent,
        layer=recipe.layer,
        user=workspace.ssh_user,
        jupyter_token=jupyter_token(workspace.pk),
        personal=_personal(workspace),
        vscode_password_hash=vscode_password_hash(workspace.pk),
    )


def _with_mounts(workspace: Workspace, custom_data: str) -> str:
    """The team's shares and the owner's home, mounted at boot (storage, issue 33)."""
    mounts = hooks.workspace_mounts(workspace=workspace)
    return nfs_mounts.add_mounts(
        custom_data, [nfs_mounts.NfsMount(m.source, m.path, m.read_only) for m in mounts]
    )


def _personal(workspace: Workspace) -> environment_init.Personal:
    """The owner's own setup (their account page), run after the environment."""
    profile = Profile.objects.filter(user_id=workspace.owner_id).first()
    if profile is None:
        return environment_init.Personal()
    return environment_init.Personal(
        dotfiles_url=profile.dotfiles_url, setup_script=profile.setup_script
    )
