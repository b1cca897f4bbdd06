"""The GPU VM backend: one Azure VM (with its NIC and OS disk) per workspace.

The worker side of a VM workspace: a requested VM is pre-checked against Azure's quotas and
size restrictions (workspaces.azure.azure_precheck) and placed, maybe in another region its
offering allows; each operation is begun once, its continuation token saved before polling, so
a worker that dies is resumed by the next one instead of sending a second create. It talks to
the cloud through the VmCloud protocol (cloud.protocols), which cloud.azure_vm fulfils.
Errors raised: CloudError.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from django.conf import settings

from agent import cloud_init
from cloud import azure_vm
from cloud.azure_vm import Progress, VmSpec
from cloud.protocols import VmCloud
from workspaces import azure, selectors, states, telemetry
from workspaces.azure import azure_settings
from workspaces.backends.base import Meters
from workspaces.chains import Next
from workspaces.live_topics import workspaces_changed
from workspaces.models import Kind, SizeOffering, Workspace
from workspaces.states import BILLABLE, OPERATION, Status


class VmBackend:
    """Kind "vm" (see workspaces.backends.base.WorkspaceBackend)."""

    kind = Kind.VM
    service = "Azure"
    form = None  # Its request page is workspaces.views.workspace_request.
    request_url = "workspaces:request"
    where = "Azure"
    error_source = "Azure"
    stop_label = "Stop (deallocate)"
    delete_warning = "The VM, its NIC and its OS disk"
    # Azure keeps the SSH key the VM was made with (osProfile is written once, at create).
    hand_over_note = (
        "Its VM still accepts {leaver}'s SSH key and not yours: delete it, or copy what you "
        "need and request your own, if they must not reach it."
    )
    facts_template = "workspaces/kinds/vm_facts.html"
    connect_template = "workspaces/kinds/vm_connect.html"
    spot_capable = True

    def __init__(self, cloud: VmCloud = azure_vm):
        self.cloud = cloud

    def advance(self, workspace: Workspace, clock: Callable[[], datetime]) -> Next:
        """A requested VM is first checked against Azure (size offered and unrestricted in its
        region, family and regional vCPU quota, or the regional Spot quota for a Spot VM): if
        Azure cannot take it, it stays requested with a plain ``waiting_reason`` (or moves to
        another region where its offering allows it) and no VM is sent. Raises CloudError."""
        if workspace.status == Status.REQUESTED:
            waiting = _provision_or_wait(self.cloud, workspace, clock)
            if waiting is not None:
                return waiting
            workspace.refresh_from_db()
        if workspace.status not in OPERATION:
            return Next.DONE
        operation, done = OPERATION[workspace.status]
        progress = _run_operation(self.cloud, workspace, operation, clock)
        if not progress.done:
            # A fresh updated_at tells the reconcile sweep that this workspace is looked after.
            Workspace.objects.filter(pk=workspace.pk, status=workspace.status).update(
                updated_at=clock()
            )
            return Next.POLL
        _finish(workspace, operation, done, progress.state, clock())
        return Next.DONE

    def clean_up_failed_create(self, workspace: Workspace) -> None:
        """Delete the VM in Failed state, its NIC and OS disk. Raises CloudError."""
        self.cloud.delete_leftovers(azure_settings(), name=self.cloud.vm_names(workspace.pk).vm)
        azure.azure_usage_changed(region=workspace.region)

    def gpu_share(self, workspace: Workspace) -> Fraction:
        return Fraction(workspace.gpu_count)

    def meters(self, workspace: Workspace) -> Meters:
        """Compute at its own price_per_hour (the Spot price for a Spot VM) while allocated
        (states.BILLABLE), and an OS disk."""
        return Meters(billable=BILLABLE, hourly=workspace.price_per_hour, os_disk=True)

    def detail_context(self, workspace: Workspace, user) -> dict:
        return {}  # Its ssh command is on the model (Workspace.ssh_command).

    def connect_download(self, workspace: Workspace) -> None:
        return None  # Nothing to download: it is reached by ssh.

    def idle_evidence(self, now: datetime) -> list:
        return []  # Its agent reports on its own (workspaces.heartbeats).

    def access_to_refresh(self, *, owner) -> list:
        return []

    def access_refresh(self, workspace: Workspace) -> None:
        """Nothing: its owner's ssh key is in the VM from its create."""


def _provision_or_wait(
    cloud: VmCloud, workspace: Workspace, clock: Callable[[], datetime]
) -> Next | None:
    """Pre-check a requested workspace and move it to provisioning (None: go on with the
    create), or leave it requested with its waiting_reason (Next.WAIT), or Next.DONE when
    another caller is already on it. Raises CloudError from the pre-check."""
    if not _claim_precheck(workspace, clock()):
        return Next.DONE
    placement = _place(workspace, clock())
    if placement.region is None:
        Workspace.objects.filter(pk=workspace.pk, status=Status.REQUESTED).update(
            waiting_reason=placement.waiting, updated_at=clock()
        )
        workspaces_changed([workspace.pk])
        return Next.WAIT
    reason = f"Creating the NIC and VM {cloud.vm_names(workspace.pk).vm} in Azure"
    fields: dict = {"waiting_reason": ""}
    if placement.region != workspace.region:
        reason = (
            f"Moved from {workspace.region} to {placement.region}: {placement.problem} {reason}"
        )
        fields.update(region=placement.region, price_per_hour=placement.price_per_hour)
        fields["detail"] = {"from_region": workspace.region, "to_region": placement.region}
    moved = states.transition(
        workspace_id=workspace.pk,
        expected=Status.REQUESTED,
        to=Status.PROVISIONING,
        now=clock(),
        reason=reason,
        **fields,
    )
    return None if moved else Next.DONE


def _claim_precheck(workspace: Workspace, now: datetime) -> bool:
    """Whether this caller runs the pre-check now. A waiting workspace is checked once per
    AZURE_PRECHECK_RETRY_SECONDS (10 % early is fine: workers' clocks differ), and only by the
    caller that moves its updated_at on (compare-and-set), so a task re-queued by the reconcile
    sweep next to the waiting task's own countdown neither checks twice nor forks a second
    chain of re-checks."""
    if workspace.waiting_reason:
        due = workspace.updated_at + timedelta(seconds=0.9 * settings.AZURE_PRECHECK_RETRY_SECONDS)
        if now < due:
            return False
    claimed = Workspace.objects.filter(
        pk=workspace.pk, status=Status.REQUESTED, updated_at=workspace.updated_at
    ).update(updated_at=now)
    return bool(claimed)


@dataclass(frozen=True)
class Placement:
    """Where a requested workspace is created: region and price_per_hour (USD/hour, Decimal)
    of the offering, or region None while it waits (``waiting`` says why). ``problem`` is why
    its own region could not take it, "" when it could."""

    region: str | None
    price_per_hour: Decimal | None
    problem: str = ""
    waiting: str = ""


def _place(workspace: Workspace, now: datetime) -> Placement:
    """The workspace's own region if Azure takes it there; else, where its offering allows
    region fallback, the first other offered region of the same size (cheapest, then by name;
    for Spot, by Spot price among regions with one) that passes the pre-check.
    Raises CloudError."""
    here = azure.azure_precheck(
        region=workspace.region, vm_size=workspace.vm_size, spot=workspace.spot
    )
    if here.fits:
        return Placement(workspace.region, workspace.price_per_hour)
    offering = SizeOffering.objects.filter(
        vm_size=workspace.vm_size, region=workspace.region
    ).first()
    tried = []
    if offering is not None and offering.allow_region_fallback:
        for other, price in _fallbacks(workspace, now):
            if azure.azure_precheck(
                region=other.region, vm_size=other.vm_size, spot=workspace.spot
            ).fits:
                return Placement(other.region, price, here.problem)
            tried.append(other.region)
    also = f" The other allowed regions ({', '.join(tried)}) have no room either." if tried else ""
    return Placement(None, None, here.problem, f"{here.problem}{also} {here.advice}")


def _fallbacks(workspace: Workspace, now: datetime) -> list[tuple[SizeOffering, Decimal]]:
    """Other offered regions of the workspace's size with the price it would pay there
    (USD/hour; the Spot price for a Spot workspace, leaving out regions without one),
    cheapest first, then by region name."""
    others = selectors.offering_list(now=now).filter(vm_size=workspace.vm_size)
    priced = [
        (other, other.spot_hourly if workspace.spot else other.price_per_hour)
        for other in others.exclude(region=workspace.region)
    ]
    priced = [
        (other, price.quantize(Decimal("0.0001"))) for other, price in priced if price is not None
    ]
    return sorted(priced, key=lambda pair: (pair[1], pair[0].region))


def _run_operation(cloud: VmCloud, workspace: Workspace, operation: str, clock) -> Progress:
    name = cloud.vm_names(workspace.pk).vm
    token = workspace.operation_token if workspace.operation == operation else ""
    if not token:
        spec = _vm_spec(workspace, clock()) if operation == "create" else None
        token = cloud.begin(azure_settings(), operation, name=name, spec=spec)
        azure.azure_usage_changed(region=workspace.region)
        # Saved before polling: the worker that takes over after a crash resumes from it.
        Workspace.objects.filter(pk=workspace.pk, status=workspace.status).update(
            operation=operation, operation_token=token
        )
    return cloud.poll(azure_settings(), operation, name=name, token=token)


def _finish(workspace, operation, done, result, now) -> None:
    azure.azure_usage_changed(region=workspace.region)
    fields = {"operation": "", "operation_token": "", "error_code": "", "error_message": ""}
    if result is not None and result.private_ip:
        fields["private_ip"] = result.private_ip
    reasons = {
        "create": "VM is running",
        "start": "VM is running",
        "deallocate": "VM deallocated; OS disk kept",
        "delete": "VM, NIC and OS disk deleted",
    }
    detail = {"power_state": result.power_state} if result is not None else {}
    states.transition(
        workspace_id=workspace.pk,
        expected=workspace.status,
        to=done,
        now=now,
        reason=reasons[operation],
        detail=detail,
        **fields,
    )


def _vm_spec(workspace: Workspace, now: datetime) -> VmSpec:
    return VmSpec(
        workspace_id=str(workspace.pk),
        location=workspace.region,
        vm_size=workspace.vm_size,
        admin_username=workspace.ssh_user,
        ssh_public_key=workspace.ssh_public_key,
        custom_data=_cloud_init(workspace, now),
        spot=workspace.spot,
        tags={
            "portal": "gpu-workspace-portal",
            "team": workspace.team.slug,
            "workspace": str(workspace.pk),
            "owner": workspace.owner.username,
        },
    )


def _cloud_init(workspace: Workspace, now: datetime) -> str:
    """cloud-init that installs the telemetry agent (docs/agent-protocol.md). The token is the
    same for every create of this VM, so a create sent again carries the same customData."""
    return cloud_init.render(
        portal_url=settings.PORTAL_URL,
        workspace=str(workspace.pk),
        token=telemetry.agent_token_issue(workspace_id=workspace.pk, now=now),
        interval_seconds=settings.AGENT_INTERVAL_SECONDS,
    )
