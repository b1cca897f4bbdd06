"""Spot evictions: noticing that Azure deallocated a running Spot VM, and saying so.

Azure evicts a Spot VM when it needs the capacity back (our VMs use evictionPolicy Deallocate
and max price -1, so never for price): the VM is deallocated, its OS disk kept. Nothing tells
the portal, so a beat task asks Azure. Why this shape:

- One ARM call per sweep, whatever the number of workspaces: VirtualMachines_ListAll with
  statusOnly=true carries every VM's power state (cloud.azure_vm.power_states), where one GET
  per VM would cost a call per workspace and eat into ARM's read throttling budget.
- No call at all while no Spot workspace runs (one indexed query first).
- Heartbeat loss would also notice (an evicted VM's agent goes silent), but only after the
  silence policy's minutes, and it cannot tell an eviction from a dead agent.
- The Azure snapshot is taken before the workspaces are read, and only those running since
  before it are judged, so a VM started meanwhile is not mistaken for an evicted one. The move
  is the state machine's compare-and-set: a second sweep, or a user's Stop at the same moment,
  finds the workspace no longer running and does nothing, and the owner is told once.

Azure does not say in the VM why it was deallocated; a running Spot VM found deallocated that
the portal did not deallocate is taken to be evicted (Azure's own Activity Log would tell an
operator's manual deallocation apart).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from django.db import transaction

from cloud import azure_vm
from notifications.models import WebhookEvent
from workspaces import states
from workspaces.actions import workspace_stopped_tell
from workspaces.azure import azure_settings
from workspaces.models import Workspace
from workspaces.states import Status

EVICTION_REASON = "Evicted by Azure (Spot capacity)"
# What the owner is told, by notice and email.
EVICTION_WHY = (
    "Azure needed the capacity of this Spot VM back and deallocated it (a Spot eviction). Its "
    "OS disk is kept; if Azure has no Spot capacity yet, a start fails and you can try later."
)


@dataclass
class EvictionSweep:
    """Running Spot workspaces ``checked`` against Azure, and the ids of those found
    ``evicted`` and moved to stopped by this sweep."""

    checked: int = 0
    evicted: list[UUID] = field(default_factory=list)


def workspace_evictions_detect(*, now: datetime) -> EvictionSweep:
    """Move every running Spot workspace whose VM Azure reports deallocated (as of ``now``,
    just before the Azure call) to stopped, with the eviction in its history (no actor) and a
    notice to its owner; closing its compute meter follows from the transition.

    Raises CloudError when Azure does not answer the listing (nothing changes then).
    """
    if not Workspace.objects.filter(spot=True, status=Status.RUNNING).exists():
        return EvictionSweep()
    power = azure_vm.power_states(azure_settings())
    running = Workspace.objects.filter(
        spot=True, status=Status.RUNNING, status_changed_at__lt=now
    ).select_related("owner")
    sweep = EvictionSweep()
    for workspace in running:
        sweep.checked += 1
        deallocated = power.get(azure_vm.vm_names(workspace.pk).vm) == "deallocated"
        if deallocated and _record_eviction(workspace, now):
            sweep.evicted.append(workspace.pk)
    return sweep


def _record_eviction(workspace: Workspace, now: datetime) -> bool:
    """running -> stopped for the eviction, and tell the owner in the same transaction; False
    when the workspace moved on meanwhile (another sweep, or its owner)."""
    with transaction.atomic():
        moved = states.transition(
            workspace_id=workspace.pk,
            expected=Status.RUNNING,
            to=Status.STOPPED,
            now=now,
            reason=EVICTION_REASON,
            detail={"power_state": "deallocated", "evicted": True},
            evicted_at=now,
        )
        if moved:
            workspace_stopped_tell(
                workspace_id=workspace.pk,
                why=EVICTION_WHY,
                now=now,
                what="was evicted by Azure",
                event=WebhookEvent.EVICTION,
            )
    return moved
