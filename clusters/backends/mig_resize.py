"""Moving a MIG slice to another MIG profile (workspaces.resizes is the user's side): its pod
is made again on a ready pool of that profile in the same cluster, its PVC (/home), Service,
Secret and owner access kept.

Stopping scales the StatefulSet to 0 as a Stop does; Resizing deletes the StatefulSet alone
(kube.mig_statefulset_delete), and once it and its pod are gone makes it again for the new
pool and profile with 0 replicas (kube.mig_ensure keeps the objects that exist); then Starting
scales it to 1 if the slice was running. The workspace's pool, profile, slices and price change
in the transition out of Resizing, so the meter opens at the new share on its next Running.
Errors raised: CloudError.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import Any

from cloud import kube
from clusters import selectors as cluster_selectors
from clusters.backends.aks import kube_api
from clusters.mig import MigProfile
from clusters.models import NodePool, PoolStatus
from common.words import usd_hourly
from workspaces import states
from workspaces.backends import ResizeChoice
from workspaces.chains import Next
from workspaces.models import Workspace
from workspaces.states import Status

CLEARED: dict[str, Any] = {
    "resize_to": "",
    "resize_restart": False,
    "resize_target": {},
    "operation": "",
}


def profile_memory_gib(profile: str) -> int:
    """GPU memory of a MIG profile from its name: "3g.40gb" -> 40 (NVIDIA's naming: the
    instance's memory in GB)."""
    try:
        return int(profile.split(".", 1)[1].removesuffix("gb"))
    except (IndexError, ValueError):
        return 0


def mig_resize_choices(workspace: Workspace) -> list[ResizeChoice]:
    """The other MIG profiles served by ready pools of the slice's cluster, keyed by the pool's
    name, at the share of the node price they cost (USD/hour)."""
    cluster_id = workspace.node_pool.cluster_id if workspace.node_pool else None
    choices = []
    for choice in cluster_selectors.mig_choices(team=workspace.team):
        if choice.pool.cluster_id != cluster_id or choice.profile == workspace.mig_profile:
            continue
        choices.append(
            ResizeChoice(
                key=choice.pool.name,
                label=f"{choice.profile} ({choice.gpu_model} MIG slice, pool {choice.pool.name})",
                gpu_model=choice.gpu_model,
                gpus=choice.gpu_share,
                gpu_memory_gib=profile_memory_gib(choice.profile),
                price_per_hour=choice.price_per_hour,
            )
        )
    return choices


def resize_step(workspace: Workspace, clock: Callable[[], datetime]) -> Next:
    """One step of Resizing a MIG slice (see the module's docstring)."""
    # clusters.backends.mig imports this module: its spec builder is read when called.
    from clusters.backends.mig import _mig_spec, kube_name

    here = workspace.node_pool
    assert here is not None, "a MIG slice is on a node pool"
    api = kube_api(here)
    ns, name = workspace.namespace, kube_name(workspace)
    pool = NodePool.objects.filter(
        cluster_id=here.cluster_id, name=workspace.resize_to, status=PoolStatus.READY
    ).first()
    target = pool.mig if pool is not None else None
    if pool is None or target is None:
        # Its old StatefulSet is made again if the move had deleted it: nothing half-made.
        spec = dataclasses.replace(_mig_spec(workspace, clock()), replicas=0)
        kube.mig_ensure(api, spec)
        why = f"node pool {workspace.resize_to} is gone or not ready."
        return _leave(workspace, None, clock(), why)
    now_profile = kube.mig_profile_now(api, namespace=ns, name=name)
    if now_profile == target.name:
        return _leave(workspace, (pool, target), clock())  # Made already: a step run again.
    if now_profile is None:
        moved = copy.copy(workspace)
        moved.node_pool, moved.mig_profile, moved.gpu_slices = pool, target.name, target.slices
        kube.mig_ensure(api, dataclasses.replace(_mig_spec(moved, clock()), replicas=0))
        return _leave(workspace, (pool, target), clock())
    if workspace.operation != "resize":
        kube.mig_statefulset_delete(api, namespace=ns, name=name)
        Workspace.objects.filter(pk=workspace.pk, status=Status.RESIZING).update(
            operation="resize", updated_at=clock()
        )
    return Next.POLL


def _leave(
    workspace: Workspace, moved: tuple[NodePool, MigProfile] | None, now: datetime, why: str = ""
) -> Next:
    """Out of Resizing: on the pool and profile it ``moved`` to, or where it was (None:
    refused, ``why``); started again if it was running."""
    to = Status.STARTING if workspace.resize_restart else Status.STOPPED
    fields: dict[str, Any] = {}
    if moved is None:
        reason = f"Move to {workspace.resize_to} refused, {workspace.mig_profile} kept: {why}"
    else:
        pool, profile = moved
        num, den = cluster_selectors.mig_share(pool, profile.slices)
        price = (pool.price_per_hour * num / den).quantize(Decimal("0.0001"))
        fields = {
            "node_pool": pool,
            "vm_size": pool.vm_size,
            "gpu_model": pool.gpu_model,
            "mig_profile": profile.name,
            "gpu_slices": profile.slices,
            "price_per_hour": price,
        }
        reason = (
            f"Moved from {workspace.mig_profile} to {profile.name} on node pool {pool.name}; "
            f"/home kept; {usd_hourly(price)}/hour from its next start"
        )
    states.transition(
        workspace_id=workspace.pk,
        expected=Status.RESIZING,
        to=to,
        now=now,
        reason=reason + ("; starting it" if to == Status.STARTING else ""),
        detail={"from": workspace.mig_profile, "to": fields.get("mig_profile", ""), "why": why},
        waiting_reason="",
        **fields,
        **CLEARED,
    )
    return Next.POLL if to == Status.STARTING else Next.DONE
