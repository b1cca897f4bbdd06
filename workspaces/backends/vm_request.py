"""Asking for a GPU VM: its request service, the VM backend's (workspaces.backends.vm).

Errors raised: WorkspaceActionError, CeilingTooLow, JustificationNeeded, NameTaken
(workspaces.requests), django.core.exceptions.ValidationError (an SSH key Azure refuses).
"""

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User

from common.words import usd_hourly
from environments.models import Environment
from environments.recipes import recipe_for
from environments.selectors import environment_default
from teams.models import Team
from workspaces import equivalents, selectors
from workspaces.hooks import ALL_MOUNTS, MountChoice
from workspaces.models import DiskSnapshot, SizeOffering, Workspace
from workspaces.requests import (
    Ask,
    CeilingTooLow,
    SnapshotRefused,
    WorkspaceActionError,
    check_member,
    workspace_insert,
)
from workspaces.ssh_keys import validate_ssh_public_key

VM_KIND = "vm"  # what Workspace.kind stores for a GPU VM (VmBackend.kind)


def workspace_request(
    *,
    user: User,
    team: Team,
    name: str,
    offering: SizeOffering,
    ssh_public_key: str,
    request_key: uuid.UUID,
    now: datetime,
    justification: str = "",
    spot: bool = False,
    accept_equivalents: bool = False,
    max_price: Decimal | None = None,
    environment: Environment | None = None,
    queue_when_full: bool = False,
    capacity_reservation_group: str = "",
    mounts: MountChoice = ALL_MOUNTS,
    from_snapshot: DiskSnapshot | None = None,
) -> Workspace:
    """Create a VM workspace and, inside the team's GPU quota, the per-member cap and the
    monthly budget (at the current burn plus this request, it lasts the month), queue
    its provisioning. Above either, the workspace waits as ``pending_approval`` with a
    QuotaRequest that a platform admin decides. A ``spot`` workspace is an Azure Spot VM,
    priced (and measured against the budget) at the Spot price in effect at ``now``.

    The quota is checked while holding the team row (``select_for_update``) in the transaction
    that inserts, so concurrent requests cannot overshoot it. Idempotent on ``request_key``: a
    second submit of the same form returns the first workspace.
    ``ssh_public_key`` "" (or blank): none, the owner works in the browser and the VM gets a
    key nobody holds (cloud.azure_vm.unusable_ssh_key). Raises
    django.core.exceptions.ValidationError when ``ssh_public_key`` is not a key Azure
    takes (see workspaces.ssh_keys; a private key among them), WorkspaceActionError when the
    user is not in the team, the size is not offered or has no Spot price there (for ``spot``),
    and JustificationNeeded when the request is above quota and says no reason.

    With ``accept_equivalents``, the workspace stores the sizes equivalent to the chosen one
    (workspaces.equivalents) that cost at most ``max_price`` (USD/hour; by default the chosen
    price x 1.5), which the worker tries when Azure has no room for the chosen one. Raises
    CeilingTooLow when ``max_price`` is below the chosen size's price.

    ``environment`` (None: the team's default for the size, environments.selectors) is what
    the VM is made from; the workspace records its recipe for the size. Raises
    WorkspaceActionError when it does not drive the size. With no environment at all for the
    size, the VM gets the plain Ubuntu image and the agent, as before environments.

    With ``queue_when_full``, a request above the team's GPU quota alone waits in the fair
    queue (status queued, scheduling.queue) instead of asking for approval.

    ``capacity_reservation_group`` (an Azure id; a booking's, bookings.lifecycle): the VM is
    created into it and takes an instance of its reservation.
    ``mounts``: the team shares and home to mount (docs/storage.md); MountRefused for a share
    the user may not mount, before anything is made.

    ``from_snapshot``: a kept snapshot of one of the user's deleted VMs in the team, in the
    offering's region; the VM boots from a disk copied from it instead of an image, with
    no environment of its own (the disk has its software). Raises SnapshotRefused otherwise.
    """
    # Checked here too, not only by the form: every caller (a later API) gets the same rules,
    # and only the normal form of a public key is stored and sent to Azure.
    ssh_public_key = validate_ssh_public_key(ssh_public_key) if ssh_public_key.strip() else ""
    existing = Workspace.objects.filter(request_key=request_key, owner=user).first()
    if existing:
        return existing
    check_member(user=user, team=team)
    if not SizeOffering.objects.filter(pk=offering.pk, offered=True).exists():
        raise WorkspaceActionError(f"{offering.vm_size} in {offering.region} is not offered.")
    price = _request_price(offering, spot, now)
    fields = {
        "kind": VM_KIND,
        "name": name,
        "vm_size": offering.vm_size,
        "region": offering.region,
        "price_per_hour": price,
        "spot": spot,
        "gpu_model": offering.gpu_model,
        "gpu_count": offering.gpu_count,
        "gpu_partition": offering.gpu_partition,
        "ssh_user": settings.WORKSPACE_SSH_USER,
        "ssh_public_key": ssh_public_key,
        "capacity_reservation_group": capacity_reservation_group,
    }
    reason = f"Requested {offering.vm_size} ({offering.gpu_summary}) in {offering.region}"
    if from_snapshot is not None:
        fields["from_snapshot"] = _snapshot_checked(user, team, offering, from_snapshot)
        reason += f" from the kept snapshot {from_snapshot.name}"
    else:
        fields.update(_environment_fields(team, offering, environment))
    if fields.get("environment"):
        reason += f" with {fields['environment'].name}"
    if accept_equivalents:
        accepted = _accepted(offering, price, spot, max_price, now)
        others, ceiling = accepted["accepted_sizes"][1:], usd_hourly(accepted["accepted_max_price"])
        if others:
            fields.update(accepted)
            reason += f", accepting equivalent sizes up to {ceiling}/hour ({', '.join(others)})"
        else:
            # Nothing to take instead (the form disables the tick box then): a request for
            # this size alone, so no history promises a "next accepted size".
            reason += f"; no size is equivalent up to {ceiling}/hour, so only this one"
    ask = Ask(
        user,
        team,
        request_key,
        fields,
        offering.gpu_share,
        reason + (" as a Spot VM" if spot else ""),
        queue_when_full=queue_when_full,
        mounts=mounts,
    )
    return workspace_insert(ask=ask, justification=justification, now=now)


def _snapshot_checked(
    user: User, team: Team, offering: SizeOffering, snapshot: DiskSnapshot
) -> DiskSnapshot:
    """The snapshot, if the user may start a VM of the offering from it. Raises
    SnapshotRefused."""
    live = DiskSnapshot.objects.filter(pk=snapshot.pk, deleted_at__isnull=True).first()
    if live is None or live.owner_id != user.pk or live.team_id != team.pk:
        raise SnapshotRefused(f"{snapshot.name} is not a kept snapshot of yours in {team.name}.")
    if live.kind != VM_KIND:
        raise SnapshotRefused(f"{snapshot.name} is not a VM's OS disk.")
    if live.region != offering.region:
        raise SnapshotRefused(
            f"{snapshot.name} is in {live.region}: a disk is made from it there only; choose "
            f"a size in {live.region}."
        )
    return live


def _accepted(
    offering: SizeOffering, price: Decimal, spot: bool, max_price: Decimal | None, now: datetime
) -> dict[str, Any]:
    """The workspace fields of a request that accepts equivalent sizes: the chosen size, then
    its equivalents within the ceiling, cheapest first; the ceiling (USD/hour); the region."""
    ceiling = equivalents.default_max_price(price) if max_price is None else max_price
    if ceiling < price:
        raise CeilingTooLow(
            f"The price ceiling {usd_hourly(ceiling)}/hour is below {offering.vm_size}'s own "
            f"{usd_hourly(price)}/hour."
        )
    found = equivalents.offering_equivalents(
        offering=offering, max_price=ceiling, now=now, spot=spot
    )
    return {
        "accepted_sizes": [offering.vm_size, *(e.vm_size for e in found)],
        "accepted_max_price": ceiling,
        "requested_region": offering.region,
    }


def _request_price(offering: SizeOffering, spot: bool, now: datetime) -> Decimal:
    """USD/hour the request is quoted at: the pay-as-you-go price, or for Spot the Spot price
    in effect now. Raises WorkspaceActionError when the size has no Spot price there."""
    if not spot:
        return offering.price_per_hour
    price = selectors.offering_spot_price(offering=offering, now=now)
    if price is None:
        raise WorkspaceActionError(spot_unavailable(offering))
    return price.quantize(Decimal("0.0001"))


def spot_unavailable(offering: SizeOffering) -> str:
    """Why a size cannot be a Spot VM in its region, in words."""
    return (
        f"Azure has no Spot price for {offering.vm_size} in {offering.region}, so it cannot be "
        "requested as a Spot VM. Untick Spot VM or choose a size with a Spot price."
    )


def _environment_fields(
    team: Team, offering: SizeOffering, environment: Environment | None
) -> dict[str, Any]:
    """The workspace's environment and its recipe for the size (environments.recipes)."""
    chosen = environment or environment_default(team=team, kind=VM_KIND, vm_size=offering.vm_size)
    if chosen is None:
        return {}
    try:
        recipe = recipe_for(chosen, vm_size=offering.vm_size)
    except ValueError as err:
        raise WorkspaceActionError(str(err)) from None
    return {"environment": chosen, "environment_recipe": recipe}
