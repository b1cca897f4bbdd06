"""A GPU VM in a booking's capacity reservation group (bookings.lifecycle calls these; only a
VM can be placed in one): whether a workspace may be booked, the VM started (or made) into
the group at the window's start, and stopped and taken out of it at the end.

Facts (Microsoft Learn, capacity-reservation-associate-vm and -remove-vm): a new VM names the
group in its create; an existing VM is deallocated, updated with
``capacityReservation.capacityReservationGroup.id`` and started; it is taken out the same way
with the id null, once deallocated. Every change of status goes through workspaces.states
(compare-and-set), so a tick run twice, or racing its owner's click, starts nothing twice.
Errors raised: CloudError (from Azure; transient ones are tried again at the next tick).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from fractions import Fraction

from django.contrib.auth.models import User
from django.db import transaction

from cloud import azure_reservations
from cloud.azure_vm import vm_names
from environments.models import Environment
from environments.selectors import environment_choice
from teams.models import Team
from workspaces import selectors, telemetry
from workspaces.azure import azure_settings
from workspaces.backends.vm_request import VM_KIND, workspace_request
from workspaces.models import SizeOffering, Workspace
from workspaces.states import IN_PROGRESS, Status
from workspaces.transitions import transition_and_queue

# What workspace_leave_reserved did.
LEFT, STOPPED, WAITING = "left", "stopped", "waiting"
# Gone, or never made in Azure: nothing of it is in a reservation.
_NOTHING_THERE = frozenset({Status.DELETED, Status.FAILED, Status.PENDING_APPROVAL})


def reservable_refusal(*, workspace: Workspace, team: Team, region: str, vm_size: str) -> str:
    """Why ``workspace`` cannot be one of a booking of ``vm_size`` in ``region`` for ``team``
    ("" when it can): it must be a VM of that team, region and size that is not deleted."""
    if workspace.kind != VM_KIND or workspace.team_id != team.pk:
        return f"{workspace.name} is not a VM of {team.name}."
    if workspace.status in (Status.DELETED, Status.DELETING, Status.FAILED):
        return f"{workspace.name} is {Status(workspace.status).label.lower()}."
    if (workspace.region, workspace.vm_size) != (region, vm_size):
        return (
            f"{workspace.name} is a {workspace.vm_size} in {workspace.region}; the booking holds "
            f"{vm_size} in {region}."
        )
    return ""


def associate_before_start(workspace: Workspace, *, name: str) -> None:
    """Associate the deallocated VM ``name`` with the workspace's group unless Azure already
    has it there (one GET; the PATCH only when it differs), so a start sent again after a
    crash does not update an allocated VM. Raises CloudError."""
    azure = azure_settings()
    wanted = workspace.capacity_reservation_group
    if (azure_reservations.vm_group(azure, name=name) or "").lower() != wanted.lower():
        azure_reservations.vm_associate(azure, name=name, group=wanted)


def workspace_start_reserved(
    *, workspace_id: uuid.UUID | str, group: str, now: datetime, reason: str
) -> str:
    """At a booking's start: mark the workspace for the reservation group ``group`` (an
    Azure id) and, when it is stopped (or queued to start), start it, measured against the
    team's GPU quota and budget as any start, holding the team's row. The VM is associated
    with the group just before Azure starts it (associate_before_start). Returns what
    happened in words, for the booking's page."""
    workspace = Workspace.objects.select_related("team", "owner").filter(pk=workspace_id).first()
    if workspace is None or workspace.status in (Status.DELETED, Status.DELETING, Status.FAILED):
        return "Not started: the workspace is gone."
    with transaction.atomic():
        team = Team.objects.select_for_update().get(pk=workspace.team_id)
        Workspace.objects.filter(pk=workspace.pk).update(capacity_reservation_group=group)
        if workspace.status != Status.STOPPED or workspace.operation:
            label = Status(workspace.status).label.lower()
            return f"Already {label} at the start; it takes the reservation once started again."
        check = selectors.quota_check(
            team=team,
            user=workspace.owner,
            gpu_model=workspace.gpu_model,
            gpus=Fraction(workspace.gpu_count, workspace.gpu_partition),
            price_per_hour=workspace.price_per_hour,
            now=now,
        )
        if check.over_to_start:
            return "Not started: " + " ".join(check.over_to_start)
        telemetry.agent_activity_reset(workspace_id=workspace.pk)
        moved = transition_and_queue(
            workspace_id=workspace.pk,
            expected=workspace.status,
            to=Status.STARTING,
            now=now,
            reason=reason,
            evicted_at=None,
            waiting_reason="",
        )
    return "Started into the reservation." if moved else "Not started: it changed meanwhile."


def workspace_create_reserved(
    *,
    owner: User,
    team: Team,
    name: str,
    offering: SizeOffering,
    environment: Environment | None,
    ssh_public_key: str,
    group: str,
    request_key: uuid.UUID,
    now: datetime,
    why: str,
) -> Workspace:
    """At a booking's start: request the VM ``name`` for ``owner`` created into ``group``,
    through the normal request (quota, budget, environment; above the quota it waits for a
    platform admin with ``why`` as its justification). Idempotent on ``request_key`` (the
    booking's seat): a tick run twice makes one workspace. Raises WorkspaceActionError,
    django.core.exceptions.ValidationError (the request's)."""
    return workspace_request(
        user=owner,
        team=team,
        name=name,
        offering=offering,
        ssh_public_key=ssh_public_key,
        request_key=request_key,
        now=now,
        justification=why,
        environment=environment,
        capacity_reservation_group=group,
    )


def workspace_leave_reserved(*, workspace_id: uuid.UUID | str, now: datetime, reason: str) -> str:
    """At a booking's end: a running workspace is stopped (deallocated, its OS disk kept);
    a deallocated one is taken out of its group in Azure and no longer marked for it.
    Returns LEFT once nothing of it is allocated or associated, STOPPED when this call
    stopped it (the caller tells its owner), WAITING while an operation is under way (ask
    again at the next tick). Raises CloudError."""
    workspace = Workspace.objects.filter(pk=workspace_id).first()
    if workspace is None:
        return LEFT
    if workspace.status in _NOTHING_THERE:
        # Nothing in Azure; a later approval or retry must not name the deleted group.
        Workspace.objects.filter(pk=workspace.pk, status=workspace.status).update(
            capacity_reservation_group=""
        )
        return LEFT
    if workspace.status == Status.RUNNING:
        moved = transition_and_queue(
            workspace_id=workspace.pk,
            expected=Status.RUNNING,
            to=Status.STOPPING,
            now=now,
            reason=reason,
        )
        return STOPPED if moved else WAITING
    if workspace.status in IN_PROGRESS:
        return WAITING
    # Unmarked first, so a Start clicked meanwhile does not associate it again; when it was
    # started meanwhile (the compare-and-set misses) it is stopped at the next tick.
    unmarked = Workspace.objects.filter(pk=workspace.pk, status=workspace.status).update(
        capacity_reservation_group=""
    )
    if not unmarked:
        return WAITING
    name = vm_names(workspace.pk).vm
    if azure_reservations.vm_group(azure_settings(), name=name):
        azure_reservations.vm_associate(azure_settings(), name=name, group=None)
    return LEFT


def reserved_environment(*, team: Team, vm_size: str, slug: str) -> Environment | None:
    """The environment ``slug`` offered to ``team`` for a VM of ``vm_size``, None when it is
    not (environments.selectors)."""
    return environment_choice(team=team, kind=VM_KIND, slug=slug, vm_size=vm_size)
