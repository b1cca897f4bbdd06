"""The GPU VM backend: one Azure VM (with its NIC and OS disk) per workspace.

The worker side of a VM workspace: a requested VM is pre-checked against Azure's quotas and
size restrictions (workspaces.azure.azure_precheck) and placed, maybe in another region its
offering allows; each operation is begun once, its continuation token saved before polling, so
a worker that dies is resumed by the next one instead of sending a second create. It talks to
the cloud through the VmCloud protocol (cloud.protocols), which cloud.azure_vm fulfils.
Errors raised: CloudError.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User

from agent import environment_init
from cloud import azure_resize, azure_vm
from cloud.azure_vm import Progress, VmState
from cloud.errors import CloudError
from cloud.protocols import VmCloud, VmResizer
from environments.recipes import jupyter_token, vm_recipe, vscode_password_hash
from workspaces import azure, selectors, states
from workspaces.azure import azure_settings
from workspaces.backends import vm_placement, vm_reserved, vm_resize, vm_setup, vm_snapshots
from workspaces.backends.base import (
    IdeTarget,
    KindForm,
    Meters,
    PoolUse,
    ResizeChoice,
    RightsizeOption,
    RightsizeOptions,
    SizingOffer,
    Words,
    WorkspaceBackend,
)
from workspaces.backends.vm_form import VM_FORM
from workspaces.backends.vm_request import VM_KIND
from workspaces.backends.vm_spec import vm_spec
from workspaces.chains import Next
from workspaces.models import SizeOffering, Workspace
from workspaces.states import BILLABLE, OPERATION, Status

if TYPE_CHECKING:
    from teams.models import Team
    from workspaces.telemetry import ParsedSample


class VmBackend:
    """Kind "vm" (see workspaces.backends.base.WorkspaceBackend)."""

    kind = VM_KIND
    label = "GPU VM"
    spend_colour = "#2b6cb0"
    service = "Azure"
    form: KindForm = VM_FORM
    pool_use: PoolUse | None = None  # a VM of its own, on no node pool
    where = "Azure"
    error_source = "Azure"
    stop_label = "Stop (deallocate)"
    delete_warning = "The VM, its NIC and its OS disk"
    disk_snapshots = True  # its OS disk may be kept as a snapshot (vm_snapshots)
    # Azure keeps the SSH key the VM was made with (osProfile is written once, at create).
    hand_over_note = (
        "Its VM still accepts {leaver}'s SSH key and not yours: delete it, or copy what you "
        "need and request your own, if they must not reach it."
    )
    facts_template = "workspaces/kinds/vm_facts.html"
    resizable = True
    connect_template = "workspaces/kinds/vm_connect.html"
    spot_capable = True
    price_note = ""  # its size's own price, as the spend page says of every price
    words = Words(
        idle_when="GPU under {threshold}%, no SSH or Jupyter activity",
        idle_unmeasured="no GPU reading and no SSH or Jupyter activity",
        readings_from="GPU readings unavailable on the VM",
        no_reading="No heartbeat from the VM's agent yet.",
        sessions="Interactive sessions (SSH, busy Jupyter kernels)",
        cpu=True,
        waiting_for="Waiting for Azure",
        nothing_made="The portal checks again by itself; nothing has been created in Azure yet.",
    )

    def __init__(self, cloud: VmCloud = azure_vm, resizer: VmResizer = azure_resize):
        self.cloud = cloud
        self.resizer = resizer

    def advance(self, workspace: Workspace, clock: Callable[[], datetime]) -> Next:
        """A requested VM is first checked against Azure (size offered and unrestricted in its
        region, family and regional vCPU quota, or the regional Spot quota for a Spot VM): if
        Azure cannot take it, it stays requested with a plain ``waiting_reason`` (or moves to
        another region where its offering allows it) and no VM is sent. A resize
        (workspaces.backends.vm_resize) checks the size before the deallocate and changes it
        in Resizing. Raises CloudError."""
        if workspace.status == Status.REQUESTED:
            waiting = _provision_or_wait(self.cloud, workspace, clock)
            if waiting is not None:
                return waiting
            workspace.refresh_from_db()
        if workspace.status == Status.RESIZING:
            return vm_resize.resize_step(self.cloud, self.resizer, workspace, clock)
        if workspace.status == Status.SETTING_UP:
            return vm_setup.setup_advance(
                workspace,
                vm_name=self.cloud.vm_names(workspace.pk).vm,
                clock=clock,
                clean_up=self.clean_up_failed_create,
            )
        if workspace.status == Status.STOPPING and workspace.resize_to and not workspace.operation:
            why = vm_resize.region_refusal(self.cloud, workspace)
            if why:
                return vm_resize.refuse_before_deallocate(workspace, why, clock())
        if workspace.status not in OPERATION:
            return Next.DONE
        operation, done = OPERATION[Status(workspace.status)]
        try:
            progress = _run_operation(self.cloud, workspace, operation, clock)
        except CloudError as exc:
            if operation == "start" and not exc.transient and vm_placement.refused_for_room(exc):
                # No room to start it: it waits in the fair queue instead of going back to
                # stopped, and is started when its turn comes (vm_placement.vm_start_refused).
                return vm_placement.vm_start_refused(workspace, exc, clock())
            # Azure has no room for the size there: with equivalent sizes accepted, clean up
            # and try the next option rather than fail (vm_placement).
            if operation != "create" or not workspace.accepted_sizes:
                raise
            if exc.transient or not vm_placement.refused_for_room(exc):
                raise
            self.clean_up_failed_create(workspace)
            return vm_placement.vm_create_refused(workspace, exc, clock())
        if not progress.done:
            # A fresh updated_at tells the reconcile sweep that this workspace is looked after.
            Workspace.objects.filter(pk=workspace.pk, status=workspace.status).update(
                updated_at=clock()
            )
            return Next.POLL
        if operation == "deallocate" and workspace.resize_to:
            # Deallocated for a resize: the chain goes on to change the size (Resizing).
            _finish(workspace, operation, Status.RESIZING, progress.state, clock())
            return Next.POLL
        if operation == "create" and vm_setup.needs_setup(workspace):
            # Running means the researcher can work: the driver, the environment and
            # JupyterLab are set up first (vm_setup).
            _finish(workspace, operation, Status.SETTING_UP, progress.state, clock())
            return Next.POLL
        _finish(workspace, operation, done, progress.state, clock())
        return Next.DONE

    def clean_up_failed_create(self, workspace: Workspace) -> None:
        """Delete the VM in Failed state, its NIC and OS disk. Raises CloudError."""
        self.cloud.delete_leftovers(azure_settings(), name=self.cloud.vm_names(workspace.pk).vm)
        azure.azure_usage_changed(region=workspace.region)

    def gpu_share(self, workspace: Workspace) -> Fraction:
        """Its GPUs, each 1/gpu_partition of one for a fractional (vGPU) size."""
        return Fraction(workspace.gpu_count, workspace.gpu_partition)

    def size_label(self, workspace: Workspace) -> str:
        return workspace.vm_size

    def api_details(self, workspace: Workspace) -> dict[str, str | int | bool | None]:
        """Its SSH user, and the equivalent sizes it accepts (", "-joined; "" for none)."""
        return {
            "ssh_user": workspace.ssh_user,
            "accepted_sizes": ", ".join(workspace.accepted_sizes),
        }

    def meters(self, workspace: Workspace) -> Meters:
        """Compute at its own price_per_hour (the Spot price for a Spot VM) while allocated
        (states.BILLABLE), and an OS disk."""
        return Meters(billable=BILLABLE, hourly=workspace.price_per_hour, os_disk=True)

    def detail_context(self, workspace: Workspace, user: User | AnonymousUser) -> dict[str, object]:
        return {}  # Its ssh command is on the model (Workspace.ssh_command).

    def connect_download(self, workspace: Workspace) -> None:
        return None  # Nothing to download: it is reached by ssh.

    def ide_target(self, workspace: Workspace) -> IdeTarget | None:
        """JupyterLab on its private address, for a VM made from an environment (its
        cloud-init starts it: agent/environment_init.py), with code-server beside it when the
        environment's layer asks for VS Code."""
        recipe = vm_recipe(workspace.environment_recipe or {})
        if not workspace.private_ip or recipe is None:
            return None
        vscode = None
        if recipe.layer.get("vscode"):
            session = f"code-server-session={vscode_password_hash(workspace.pk)}"
            vscode = IdeTarget(workspace.private_ip, environment_init.VSCODE_PORT, "", session)
        return IdeTarget(
            workspace.private_ip,
            environment_init.JUPYTER_PORT,
            jupyter_token(workspace.pk),
            vscode=vscode,
        )

    def idle_evidence(self, now: datetime) -> list[tuple[UUID, list[ParsedSample]]]:
        return []  # Its agent reports on its own (workspaces.heartbeats).

    def access_to_refresh(self, *, owner: User) -> list[UUID]:
        return []

    def access_refresh(self, workspace: Workspace) -> None:
        """Nothing: its owner's ssh key is in the VM from its create."""

    def resize_choices(self, workspace: Workspace, now: datetime) -> list[ResizeChoice]:
        """The other sizes offered in its region (workspaces.backends.vm_resize)."""
        return vm_resize.vm_resize_choices(workspace, now)

    def sizing_offers(self, *, team: Team | None) -> list[SizingOffer]:
        """Every offered size in every region (the catalog is the same for all teams), at
        its Linux pay-as-you-go price; a fractional (vGPU) size with its partition's memory
        and its share of a GPU. One query."""
        return [
            SizingOffer(
                kind=self.kind,
                name=o.vm_size,
                vm_size=o.vm_size,
                mig_profile="",
                region=o.region,
                gpu_model=o.gpu_model,
                gpus=o.gpu_count,
                gpu_memory_gib=Decimal(o.gpu_memory_gib),
                gpu_share=o.gpu_share,
                price_per_hour=o.price_per_hour,
                suits=o.suits,
            )
            for o in selectors.offering_list()
        ]

    def rightsizing_options(self, *, regions: set[str]) -> RightsizeOptions:
        """The offered, priced sizes of ``regions``, for every team. One query."""
        offerings = SizeOffering.objects.filter(
            offered=True, region__in=regions, price_per_hour__gt=0
        )
        options: defaultdict[tuple[int | None, str], list[RightsizeOption]] = defaultdict(list)
        for o in offerings:
            options[(None, o.region)].append(offering_option(o))
        return options


def offering_option(offering: SizeOffering) -> RightsizeOption:
    """A catalog size as a RightsizeOption. Memory per device is the smaller of its GPU's
    memory and its total GPU memory over its GPUs, so a fractional vGPU size (one device, a
    share of a GPU: ``total_gpu_memory_gib`` where the catalog has it) counts only the memory
    it gets."""
    devices = max(offering.gpu_count, 1)
    per_gpu = float(offering.gpu_memory_gib)
    total = getattr(offering, "total_gpu_memory_gib", None)
    if total is not None:
        per_gpu = min(per_gpu, float(total) / devices)
    return RightsizeOption(
        kind=VM_KIND,
        name=offering.vm_size,
        gpu_model=offering.gpu_model,
        devices=devices,
        memory_mib=int(per_gpu * 1024),
        price_per_hour=offering.price_per_hour,
    )


def _provision_or_wait(
    cloud: VmCloud, workspace: Workspace, clock: Callable[[], datetime]
) -> Next | None:
    """Pre-check a requested workspace and move it to provisioning as the first option Azure
    and the team take (None: go on with the create; see vm_placement.vm_place), or leave it
    requested with its waiting_reason (Next.WAIT), or Next.DONE when another caller is already
    on it. Raises CloudError from the pre-check."""
    if not _claim_precheck(workspace, clock()):
        return Next.DONE
    create = f"Creating the NIC and VM {cloud.vm_names(workspace.pk).vm} in Azure"
    return vm_placement.vm_place(workspace, now=clock(), create=create)


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


def _run_operation(
    cloud: VmCloud, workspace: Workspace, operation: str, clock: Callable[[], datetime]
) -> Progress:
    name = cloud.vm_names(workspace.pk).vm
    token = workspace.operation_token if workspace.operation == operation else ""
    if not token:
        if operation == "start" and workspace.capacity_reservation_group:
            # A booked VM is associated with the booking's group while still deallocated.
            vm_reserved.associate_before_start(workspace, name=name)
        if operation == "delete":  # Its owner may keep the OS disk first (vm_snapshots).
            vm_snapshots.keep_before_delete(workspace, clock())
        spec = vm_spec(cloud, workspace, clock()) if operation == "create" else None
        token = cloud.begin(azure_settings(), operation, name=name, spec=spec)
        azure.azure_usage_changed(region=workspace.region)
        # Saved before polling: the worker that takes over after a crash resumes from it.
        Workspace.objects.filter(pk=workspace.pk, status=workspace.status).update(
            operation=operation, operation_token=token
        )
    return cloud.poll(azure_settings(), operation, name=name, token=token)


def _finish(
    workspace: Workspace, operation: str, done: Status, result: VmState | None, now: datetime
) -> None:
    azure.azure_usage_changed(region=workspace.region)
    fields: dict[str, Any] = {
        "operation": "",
        "operation_token": "",
        "error_code": "",
        "error_message": "",
    }
    if operation == "create":
        fields["placement_tried"] = []
    if result is not None and result.private_ip:
        fields["private_ip"] = result.private_ip
    reasons = {
        "create": "VM is running"
        + ("; setting up its environment" if done == Status.SETTING_UP else ""),
        "start": "VM is running",
        "deallocate": "VM deallocated; OS disk kept",
        "resize": (
            f"VM deallocated; OS disk kept; Azure's Resource SKUs allow {workspace.resize_to} in "
            f"{workspace.region}; changing its size to {workspace.resize_to}"
        ),
        "delete": "VM, NIC and OS disk deleted",
    }
    detail = {"power_state": result.power_state} if result is not None else {}
    states.transition(
        workspace_id=workspace.pk,
        expected=workspace.status,
        to=done,
        now=now,
        reason=reasons["resize" if done == Status.RESIZING else operation],
        detail=detail,
        **fields,
    )


# mypy checks the class against the protocol, signatures included (a runtime_checkable
# isinstance compares only names).
_PROTOCOL_CHECKED: type[WorkspaceBackend] = VmBackend
