"""Running workspaces for the benchmarks, built in memory (save them with bulk_create)."""

import uuid


def running_workspace(*, team, owner, name: str, since):
    """An unsaved Workspace running since ``since``: one A100 VM in eastus at $3/hour."""
    from workspaces.models import Workspace
    from workspaces.states import Status

    return Workspace(
        kind="vm",
        team=team,
        owner=owner,
        name=name,
        status=Status.RUNNING,
        status_changed_at=since,
        vm_size="Standard_NC24ads_A100_v4",
        region="eastus",
        price_per_hour=3,
        gpu_model="A100",
        gpu_count=1,
        ssh_user="researcher",
        ssh_public_key="ssh-ed25519 AAAA bench",
        request_key=uuid.uuid4(),
        created_at=since,
        updated_at=since,
    )
