"""Where a requested VM workspace is created: its own size and region when Azure takes them,
else the next option it accepts (workspaces.equivalents), then other regions where its
offering allows region fallback, in price order. Azure's refusals of a create for lack of room
(AllocationFailed, SkuNotAvailable, ...) send it back here to try the next option; with every
option tried it waits, requested, saying what was tried, and is checked again every
AZURE_PRECHECK_RETRY_SECONDS; or, when its owner chose the fair queue, it waits queued,
holding none of the team's GPUs, until the queue's pass finds room (scheduling/). Quota and
budget are checked again, under the team row's lock, for a size or price other than the one it
holds.

Errors raised: CloudError (from Azure's pre-check).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from fractions import Fraction
from typing import Any

from django.conf import settings
from django.db import transaction

from cloud.errors import CloudError
from common.words import usd_hourly
from teams.models import Team
from workspaces import azure, chains, selectors, states
from workspaces.chains import Next
from workspaces.equivalents import offering_price
from workspaces.live_topics import workspaces_changed
from workspaces.models import SizeOffering, Workspace
from workspaces.states import Status

# Azure's codes for "no room for this size here now", whatever the VM asked for: capacity
# (AllocationFailed; ZonalAllocationFailed in a zone; OverconstrainedAllocationRequest when
# constraints leave no cluster), the size withheld in the region (SkuNotAvailable), and a quota
# exceeded between the pre-check and the PUT (OperationNotAllowed, worded with "quota").
# Source: learn.microsoft.com/troubleshoot/azure/virtual-machines/windows/allocation-failure and
# .../error-code-skunotavailable.
NO_CAPACITY_CODES = frozenset(
    {"AllocationFailed", "ZonalAllocationFailed", "OverconstrainedAllocationRequest"}
)
NO_ROOM_CODES = NO_CAPACITY_CODES | {"SkuNotAvailable"}


def refused_for_room(error: CloudError) -> bool:
    """Whether Azure refused a create because it has no room for the size where it was asked
    (another size or region may have some), rather than because the request was wrong."""
    if error.code in NO_ROOM_CODES:
        return True
    return error.code == "OperationNotAllowed" and "quota" in error.message.lower()


@dataclass(frozen=True)
class Option:
    """One size in one region a workspace may be created as, at ``price`` (USD/hour: the Spot
    price for a Spot workspace)."""

    vm_size: str
    region: str
    price: Decimal
    gpu_model: str
    gpu_count: int
    gpu_partition: int = 1  # a fractional (vGPU) size: each GPU is 1/gpu_partition of one

    @classmethod
    def of(cls, offering: SizeOffering, price: Decimal) -> Option:
        return cls(
            offering.vm_size,
            offering.region,
            price,
            offering.gpu_model,
            offering.gpu_count,
            offering.gpu_partition,
        )

    @property
    def gpus(self) -> Fraction:
        """GPUs it holds against the team's quota."""
        return Fraction(self.gpu_count, self.gpu_partition)

    def holds(self, workspace: Workspace) -> bool:
        """Whether this is what the workspace holds now (its quota and budget counted)."""
        mine = (workspace.vm_size, workspace.region, workspace.price_per_hour)
        return (self.vm_size, self.region, self.price) == mine


def vm_options(workspace: Workspace, now: datetime) -> list[Option]:
    """The options of a requested VM workspace in the order they are tried: the size it asked
    for in its region; then the equivalent sizes it accepted there (within its ceiling),
    cheapest first; then, where the chosen size's offering allows region fallback, those sizes
    in the other offered regions, cheapest first, then by region and size. Two queries."""
    sizes = workspace.accepted_sizes or [workspace.vm_size]
    home, chosen = workspace.requested_region or workspace.region, sizes[0]
    first: list[Option] = []
    if (workspace.vm_size, workspace.region) == (chosen, home):
        own = workspace.price_per_hour
        gpus = (workspace.gpu_model, workspace.gpu_count, workspace.gpu_partition)
        first = [Option(chosen, home, own, *gpus)]
    mine = SizeOffering.objects.filter(vm_size=chosen, region=home).first()
    # A VM started from a kept snapshot stays in its region: the disk is copied there only.
    fallback = mine is not None and mine.allow_region_fallback and not workspace.from_snapshot_id
    others: list[Option] = []
    for offering in selectors.offering_list(now=now).filter(vm_size__in=sizes):
        price = offering_price(offering, spot=workspace.spot)
        if price is None or (first and (offering.vm_size, offering.region) == (chosen, home)):
            continue
        if offering.region != home and not fallback:
            continue
        ceiling = workspace.accepted_max_price
        if offering.vm_size != chosen and ceiling is not None and price > ceiling:
            continue
        others.append(Option.of(offering, price))
    # The size asked for first (it may hold another it took before), then by price.
    others.sort(key=lambda o: (o.region != home, o.vm_size != chosen, o.price, o.region, o.vm_size))
    return first + others


def vm_place(workspace: Workspace, *, now: datetime, create: str) -> Next | None:
    """Try the workspace's options in order (vm_options): the first that passes Azure's
    pre-check (azure.azure_precheck) and, when it is not what the workspace holds, the team's
    quota and budget, moves it to provisioning as that size and region (None: go on with the
    create, ``create`` saying what is made). With none left it waits, requested, with a
    waiting_reason listing what was tried (Next.WAIT). Next.DONE when another caller moved it
    on first. Raises CloudError from the pre-check."""
    options = vm_options(workspace, now)
    refused = {(t["vm_size"], t["region"]) for t in workspace.placement_tried}
    steps = [_refusal(t["vm_size"], t["region"], t["code"]) for t in workspace.placement_tried]
    problems: list[tuple[str, str]] = []  # Azure's pre-check: (problem, advice)
    for option in options:
        if (option.vm_size, option.region) in refused:
            continue
        check = azure.azure_precheck(
            region=option.region, vm_size=option.vm_size, spot=workspace.spot
        )
        if not check.fits:
            problems.append((check.problem, check.advice))
            steps.append(check.problem)
            continue
        moved, over = _take(workspace, option, options[0], steps, now, create)
        if not over:
            return None if moved else Next.DONE
        steps.append(
            f"{option.vm_size} at {usd_hourly(option.price)}/hour in {option.region} is skipped: "
            + " ".join(over)
        )
    return _wait(workspace, options, steps, problems, now)


def _refusal(vm_size: str, region: str, code: str) -> str:
    if code in NO_CAPACITY_CODES:
        return f"{vm_size} has no capacity in {region} ({code})."
    if code == "SkuNotAvailable":
        return f"{vm_size} is not available in {region} ({code})."
    return f"{vm_size} is over Azure's quota in {region} ({code})."


def _take(
    workspace: Workspace,
    option: Option,
    first: Option,
    steps: list[str],
    now: datetime,
    create: str,
) -> tuple[bool, list[str]]:
    """Move the workspace to provisioning as ``option``: (True, []) when it moved, (False, [])
    when another caller moved it on first, (False, why) when the team's quota or budget does
    not allow ``option`` (checked while holding the team row, in the transaction that writes
    the size, as workspaces.requests does for a request)."""
    fields: dict[str, Any] = {"waiting_reason": "", "region": option.region}
    fields.update(price_per_hour=option.price, vm_size=option.vm_size)
    fields.update(gpu_model=option.gpu_model, gpu_count=option.gpu_count)
    fields.update(gpu_partition=option.gpu_partition)
    reason, detail = _moved(workspace, option, first, steps, create)
    with transaction.atomic():
        team = Team.objects.select_for_update().get(pk=workspace.team_id)
        if not option.holds(workspace):
            check = selectors.quota_check(
                team=team,
                user=workspace.owner,
                gpu_model=option.gpu_model,
                gpus=option.gpus,
                price_per_hour=option.price,
                now=now,
                replacing=workspace,
            )
            if not check.fits:
                return False, list(check.over)
        moved = states.transition(
            workspace_id=workspace.pk,
            expected=Status.REQUESTED,
            to=Status.PROVISIONING,
            now=now,
            reason=reason,
            detail=detail,
            **fields,
        )
    return moved, []


def _moved(
    workspace: Workspace, option: Option, first: Option, steps: list[str], create: str
) -> tuple[str, dict[str, str]]:
    """The history line and detail of the move to provisioning as ``option``."""
    why = " ".join(steps)
    price = f"{usd_hourly(option.price)}/hour"
    if option.vm_size == first.vm_size and option.region == first.region:
        if option.holds(workspace) and not steps:
            return create, {}
        again = f"Trying {option.vm_size} at {price} in {option.region}. {create}"
        return f"{why} {again}".lstrip(), {}
    if option.vm_size == first.vm_size:
        detail = {"from_region": first.region, "to_region": option.region}
        return f"Moved from {first.region} to {option.region}: {why} {create}", detail
    detail = {
        "from_size": first.vm_size,
        "to_size": option.vm_size,
        "from_region": first.region,
        "to_region": option.region,
        "price_per_hour": str(option.price),
    }
    trying = f"trying {option.vm_size} at {price} in {option.region}."
    return f"{why.rstrip('.')}; {trying} {create}", detail


def _wait(
    workspace: Workspace,
    options: list[Option],
    steps: list[str],
    problems: list[tuple[str, str]],
    now: datetime,
) -> Next:
    """Leave the workspace requested with why (having accepted equivalents: every option
    tried), its round of refused creates forgotten so the next check tries them all again."""
    if workspace.accepted_sizes or not problems:
        minutes = max(1, round(settings.AZURE_PRECHECK_RETRY_SECONDS / 60))
        tried = " ".join(steps) or "no accepted size is offered now."
        waiting = (
            f"No accepted size has room now. Tried: {tried} Waiting for capacity: every "
            f"option is tried again every {minutes} minute{'s' if minutes > 1 else ''}."
        )
    else:
        (problem, advice), others = problems[0], [o.region for o in options[1:]]
        also = ""
        if len(steps) > 1:
            also = f" The other allowed regions ({', '.join(others)}) have no room either."
        waiting = f"{problem}{also} {advice}"
    if workspace.queue_when_full:
        return _queue(workspace, waiting, now)
    Workspace.objects.filter(pk=workspace.pk, status=Status.REQUESTED).update(
        waiting_reason=waiting, placement_tried=[], updated_at=now
    )
    workspaces_changed([workspace.pk])
    return Next.WAIT


def _queue(workspace: Workspace, waiting: str, now: datetime) -> Next:
    """A workspace whose owner chose the fair queue waits there, holding none of the team's
    GPUs, instead of requested: the queue (scheduling/) moves it back once Azure has room and
    its turn comes. This chain ends (Next.DONE)."""
    states.transition(
        workspace_id=workspace.pk,
        expected=Status.REQUESTED,
        to=Status.QUEUED,
        now=now,
        reason=f"Waiting in the queue for room in Azure: {waiting}",
        waiting_reason=waiting,
        placement_tried=[],
        **chains.RELEASED,
    )
    return Next.DONE


def vm_create_refused(workspace: Workspace, error: CloudError, now: datetime) -> Next:
    """Azure refused the create for lack of room (refused_for_room) and what it left is
    cleaned up: back to requested, the refusal remembered for this round, to try the next
    option at once (Next.POLL), or Next.DONE when another caller moved it on first."""
    tried = [
        *workspace.placement_tried,
        {"vm_size": workspace.vm_size, "region": workspace.region, "code": error.code},
    ]
    line = _refusal(workspace.vm_size, workspace.region, error.code)
    refused = {(t["vm_size"], t["region"]) for t in tried}
    left = [o for o in vm_options(workspace, now) if (o.vm_size, o.region) not in refused]
    then = (
        "trying the next accepted size."
        if left
        else "no other accepted size or region is left to try; waiting for capacity."
    )
    moved = states.transition(
        workspace_id=workspace.pk,
        expected=Status.PROVISIONING,
        to=Status.REQUESTED,
        now=now,
        reason=f"{line[:-1]}; {then}",
        detail={"code": error.code, "message": error.message, "status": error.status},
        operation="",
        operation_token="",
        placement_tried=tried,
    )
    return Next.POLL if moved else Next.DONE


def vm_start_refused(workspace: Workspace, error: CloudError, now: datetime) -> Next:
    """Azure refused to start the deallocated VM for lack of room (refused_for_room): it
    waits in the fair queue (scheduling/), holding none of the team's GPUs, and is started
    again when its turn comes and QUEUE_START_RETRY_SECONDS have passed; its history and
    page say why. This chain ends (Next.DONE), also when another caller moved it on first."""
    waiting = (
        f"Azure has no room to start {workspace.vm_size} in {workspace.region} now "
        f"({error.code}); it waits in the queue and is tried again."
    )
    states.transition(
        workspace_id=workspace.pk,
        expected=Status.STARTING,
        to=Status.QUEUED,
        now=now,
        reason=f"Azure refused the start: {error.code}; waiting in the queue for room",
        detail={"code": error.code, "message": error.message, "status": error.status},
        waiting_reason=waiting,
        operation="",
        operation_token="",
        error_code=error.code,
        error_message=error.message,
        **chains.RELEASED,
    )
    return Next.DONE
