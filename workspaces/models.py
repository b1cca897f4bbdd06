"""Workspaces, their history, and the catalog of GPU VM sizes the portal offers."""

import uuid
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models

from common.words import duration_words
from workspaces.backends import WorkspaceBackend, backend_for
from workspaces.gpus import format_gpus
from workspaces.states import STYLE, TRANSITIONS, Status, StatusStyle, event_style
from workspaces.suitability import Suits, size_suits

if TYPE_CHECKING:
    from teams.models import QuotaRequest


class SizeOffering(models.Model):
    """One Azure GPU VM size in one region, with its Linux pay-as-you-go price.

    Facts come from data/azure_gpu_vms.csv and data/azure_fractional_gpu_vms.csv (Azure Retail
    Prices API, via SkyPilot's catalog; see workspaces.catalog); ``offered`` is the platform
    admin's choice of what researchers may request. A fractional (vGPU) size such as
    Standard_NV6ads_A10_v5 has ``gpu_count`` 1 and ``gpu_partition`` 6: 1/6 of an A10, with
    ``gpu_memory_gib`` 4, its partition's frame buffer.
    """

    vm_size = models.CharField(max_length=64)
    region = models.CharField(max_length=32)
    gpu_model = models.CharField(max_length=16)  # A100, H100, T4, A10
    gpu_count = models.PositiveSmallIntegerField()
    gpu_memory_gib = models.PositiveIntegerField(help_text="Per GPU (per partition for vGPU), GiB")
    gpu_partition = models.PositiveSmallIntegerField(
        default=1,
        help_text="1: whole GPUs; n: each GPU is 1/n of one (6 for NV6ads_A10_v5)",
    )
    vcpus = models.PositiveSmallIntegerField()
    memory_gib = models.DecimalField(max_digits=8, decimal_places=2)
    price_per_hour = models.DecimalField(max_digits=10, decimal_places=4, help_text="USD/hour")
    offered = models.BooleanField(default=True)
    # When Azure has no quota or capacity for the size here, may the worker create the VM in
    # another region where the same size is offered (cheapest first) instead of waiting?
    allow_region_fallback = models.BooleanField(
        default=False,
        help_text="If Azure has no room here, use the cheapest other region offering it",
    )

    class Meta:
        ordering = ["region", "gpu_model", "gpu_count", "vm_size"]
        constraints = [
            models.UniqueConstraint(
                fields=["vm_size", "region"], name="offering_unique_size_region"
            )
        ]

    def __str__(self) -> str:
        return f"{self.vm_size} in {self.region}"

    @property
    def gpu_share(self) -> Fraction:
        """GPUs the size counts against a team's quota: gpu_count / gpu_partition."""
        return Fraction(self.gpu_count, self.gpu_partition)

    @property
    def total_gpu_memory_gib(self) -> int:
        """GPU memory across the VM, GiB (4 for NV6ads_A10_v5, 320 for NC96ads_A100_v4)."""
        return self.gpu_count * self.gpu_memory_gib

    @property
    def gpu_label(self) -> str:
        """'2 × A100' for whole GPUs, '1/6 A10' for a fractional size."""
        if self.gpu_partition == 1:
            return f"{self.gpu_count} × {self.gpu_model}"
        return f"{format_gpus(self.gpu_share)} {self.gpu_model}"

    @property
    def gpu_summary(self) -> str:
        return f"{self.gpu_label} {self.gpu_memory_gib} GB"

    @property
    def suits(self) -> Suits:
        """Training, inference or both (workspaces.suitability, the one rule)."""
        return size_suits(self.vm_size, self.gpu_memory_gib)

    @property
    def price_per_day(self) -> Decimal:
        """USD for 24 hours running."""
        return self.price_per_hour * 24


class Workspace(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey("teams.Team", on_delete=models.PROTECT, related_name="workspaces")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="workspaces"
    )
    # A registered kind (workspaces.backends.registry): no fixed choices, so a new kind is
    # its backend module and needs no migration; forms, filters and the API check the kind
    # against the registry, and only a kind's own request service writes it.
    kind = models.CharField(max_length=16)
    name = models.CharField(max_length=64)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.REQUESTED)
    status_changed_at = models.DateTimeField()
    vm_size = models.CharField(max_length=64)
    region = models.CharField(max_length=32)
    price_per_hour = models.DecimalField(
        max_digits=10, decimal_places=4, help_text="USD/hour when requested"
    )
    # An Azure Spot VM: cheaper (price_per_hour is the Spot price), but Azure may evict
    # (deallocate) it when it needs the capacity back.
    spot = models.BooleanField(default=False)
    # When Azure last evicted it, while it is stopped because of that; cleared by Start.
    evicted_at = models.DateTimeField(null=True, blank=True)
    gpu_model = models.CharField(max_length=16, blank=True)
    gpu_count = models.PositiveSmallIntegerField(
        default=0, help_text="Whole GPUs: a VM's, or a namespace's GPU quota"
    )
    # A fractional (vGPU) VM's GPUs are 1/gpu_partition of one each (SizeOffering.gpu_partition):
    # it holds gpu_count / gpu_partition GPUs of the quota.
    gpu_partition = models.PositiveSmallIntegerField(
        default=1, help_text="1: whole GPUs; n: a VM's GPUs are 1/n of one each (vGPU)"
    )
    mig_profile = models.CharField(max_length=16, blank=True, help_text="e.g. 1g.10gb")
    gpu_slices = models.PositiveSmallIntegerField(
        default=0, help_text="MIG compute slices, in sevenths of a GPU (see workspaces.gpus)"
    )
    # MIG slice and namespace workspaces: the AKS node pool they run on (a namespace: whose GPU
    # model and price it takes) and their Kubernetes namespace.
    node_pool = models.ForeignKey(
        "clusters.NodePool",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="workspaces",
    )
    namespace = models.CharField(max_length=63, blank=True)
    image = models.CharField(max_length=200, blank=True, help_text="MIG slice: container image")
    ssh_user = models.CharField(max_length=32)
    ssh_public_key = models.TextField()
    private_ip = models.GenericIPAddressField(null=True, blank=True)
    # The Azure operation in flight and its LRO continuation token, saved before waiting so a
    # worker that dies is resumed by the next one instead of sending a second create.
    operation = models.CharField(max_length=16, blank=True)
    operation_token = models.TextField(blank=True)
    # The one chain of tasks carrying the operation (workspaces.chains): its id, when it runs
    # next (the reconcile sweep takes over only a chain overdue by its grace), and the failed
    # attempts in a row, which WORKSPACE_RETRY_MAX bounds whatever chain made them.
    operation_claim = models.CharField(max_length=32, blank=True)
    operation_due_at = models.DateTimeField(null=True, blank=True)
    operation_attempts = models.PositiveSmallIntegerField(default=0)
    error_code = models.CharField(max_length=64, blank=True)
    error_message = models.TextField(blank=True)
    # While failed: the operation Azure refused ("create" or "delete"), which Retry does again.
    failed_operation = models.CharField(max_length=16, blank=True)
    # Equivalent sizes (workspaces.equivalents): the VM sizes the requester accepts when Azure
    # has no capacity or quota for the chosen one, the chosen size first, then the others in
    # price order ([] when only the chosen size will do); the price ceiling (USD/hour) they
    # accepted; the region they asked for; and this round's creates Azure refused for lack of
    # capacity ([{"vm_size", "region", "code"}], emptied when it runs or waits again).
    accepted_sizes = models.JSONField(default=list, blank=True)
    accepted_max_price = models.DecimalField(
        max_digits=10, decimal_places=4, null=True, blank=True, help_text="USD/hour"
    )
    requested_region = models.CharField(max_length=32, blank=True)
    placement_tried = models.JSONField(default=list, blank=True)
    # A resize asked for and not yet done (workspaces.resizes): the target vm_size of a VM, or
    # MIG profile of a slice; and whether it is started again once resized (it was running).
    resize_to = models.CharField(max_length=64, blank=True)
    resize_restart = models.BooleanField(default=False)
    # What the resize's target holds, from the moment it is accepted until it ends (cleared
    # with resize_to): {"gpu_model": "A100", "gpus": "2" (a Fraction, "1/7" for a slice),
    # "price_per_hour": "7.3460" (USD/hour)}. A resize that starts the workspace again counts
    # the larger of its size and the target against the quota and budget (workspaces.quota).
    resize_target = models.JSONField(default=dict, blank=True)
    # While requested: why Azure cannot take the VM yet (quota, SKU restriction), in plain words;
    # the worker checks again every AZURE_PRECHECK_RETRY_SECONDS. Empty once it proceeds.
    waiting_reason = models.TextField(blank=True)
    # Its owner chose to wait in the fair queue (status queued, scheduling/) rather than ask for
    # approval when the team's GPUs are in use, or hold them while Azure has no room.
    queue_when_full = models.BooleanField(default=False)
    # The Azure id of the capacity reservation group (a booking's, bookings.lifecycle) its VM
    # is created into or associated with before its next start; "" for none. Cleared once the
    # booking's window ended and the deallocated VM was disassociated from the group.
    capacity_reservation_group = models.CharField(max_length=300, blank=True)
    # One per request form; a double-clicked Request finds the workspace already made.
    request_key = models.UUIDField(unique=True)
    # What it is made from (environments.recipes.recipe_for): kept exactly as it was at the
    # request, whatever later happens to the environment, so it can be cited and made again.
    environment = models.ForeignKey(
        "environments.Environment",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="workspaces",
    )
    environment_recipe = models.JSONField(default=dict, blank=True)
    setup_step = models.CharField(
        max_length=200, blank=True, help_text="Setting up: the step it is at, in words"
    )
    # What its owner chose to mount (docs/storage.md): the team shares by name, null for every
    # share their role may mount when it is made; and whether their home is mounted.
    mount_shares = models.JSONField(null=True, blank=True, default=None)
    mount_home = models.BooleanField(default=True)
    # Its owner asked, with the delete, to keep a snapshot of its OS disk (a kind with one).
    keep_snapshot = models.BooleanField(default=False)
    # The kept disk snapshot its OS disk is made from, instead of an image (null: an image).
    from_snapshot = models.ForeignKey(
        "workspaces.DiskSnapshot",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="started",
    )
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]
        # The list is paged by keyset on (created_at, id), newest first, by default.
        indexes = [
            models.Index(fields=["status", "updated_at"]),
            models.Index(fields=["created_at", "id"]),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def resize_waiting(self) -> "QuotaRequest | None":
        """Its resize waiting for a platform admin's approval (teams.QuotaRequest), or None."""
        return self.quota_requests.filter(decision="pending").exclude(resize_to="").first()

    @property
    def quota_request(self) -> "QuotaRequest | None":
        """Its own request above quota (teams.QuotaRequest, not a resize's), or None."""
        return self.quota_requests.filter(resize_to="").first()

    @property
    def style(self) -> StatusStyle:
        return STYLE[self.status]

    def _allows(self, target: str) -> bool:
        return target in TRANSITIONS[self.status]

    @property
    def can_stop(self) -> bool:
        return self._allows(Status.STOPPING)

    @property
    def can_start(self) -> bool:
        return self._allows(Status.STARTING)

    @property
    def can_delete(self) -> bool:
        return self._allows(Status.DELETING)

    @property
    def can_resize(self) -> bool:
        """Running (it is stopped first: deallocated, or scaled to 0) or stopped."""
        return self.status in (Status.RUNNING, Status.STOPPED)

    @property
    def can_retry(self) -> bool:
        return self.status == Status.FAILED

    @property
    def short_id(self) -> str:
        return self.id.hex[:12]

    @property
    def backend(self) -> WorkspaceBackend:
        """Its kind's backend (workspaces.backends), for all that differs between kinds.
        Raises UnknownKind."""
        return backend_for(self.kind)

    @property
    def size_label(self) -> str:
        """Its size in words, from its kind's backend: "Standard_NC24ads_A100_v4",
        "A100 1g.10gb" (a MIG slice), "2 × A100 GPUs" (a namespace)."""
        return self.backend.size_label(self)

    @property
    def ssh_command(self) -> str:
        """``ssh <user>@<private ip>``; "" before it has an address or when its owner gave no
        SSH key (its authorized key is one nobody holds: cloud.azure_vm.unusable_ssh_key)."""
        if not self.private_ip or not self.ssh_public_key:
            return ""
        return f"ssh {self.ssh_user}@{self.private_ip}"


class WorkspaceEvent(models.Model):
    """One line of a workspace's history: who moved it from which status to which, why, when."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    from_status = models.CharField(max_length=20, blank=True)
    to_status = models.CharField(max_length=20)
    reason = models.TextField(blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.workspace_id}: {self.from_status} -> {self.to_status}"

    @property
    def to_style(self) -> StatusStyle:
        return event_style(
            from_status=self.from_status,
            to_status=self.to_status,
            detail=self.detail,
            by_person=self.actor_id is not None,
        )

    @property
    def from_label(self) -> str:
        """The status it moved from, in words ('' for the first event)."""
        return STYLE[self.from_status].label if self.from_status in STYLE else self.from_status


class WorkspaceAgent(models.Model):
    """The telemetry agent of one workspace: its token's SHA-256 (the clear token goes only
    into the VM's custom_data; see workspaces.telemetry) and what its heartbeats said so far,
    folded by workspaces.idle so the sweep never re-reads samples."""

    workspace = models.OneToOneField(
        Workspace, on_delete=models.CASCADE, primary_key=True, related_name="agent"
    )
    token_sha256 = models.CharField(max_length=64)
    token_generation = models.PositiveIntegerField(default=1, help_text="One per VM created")
    token_created_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    # workspaces.idle.Activity
    last_at = models.DateTimeField(null=True, blank=True)
    evidence_since = models.DateTimeField(null=True, blank=True)
    busy_since = models.DateTimeField(null=True, blank=True)
    active_at = models.DateTimeField(null=True, blank=True)
    # The latest sample, for the workspace page.
    nvml = models.CharField(max_length=200, blank=True)
    gpus = models.JSONField(
        default=list, blank=True, help_text="[{name, util, mem_used, mem_total}]"
    )
    interactive = models.PositiveSmallIntegerField(default=0)
    cpu_percent = models.PositiveSmallIntegerField(null=True, blank=True)
    # The NVIDIA driver ("loaded", "missing", "" unknown) and the environment setup's
    # "step: state", as the latest sample said (docs/agent-protocol.md).
    driver = models.CharField(max_length=16, blank=True)
    setup = models.CharField(max_length=64, blank=True)
    # The setup log's last lines when a step failed, and whether JupyterLab answered the agent
    # on the workspace's private address ("answers", "silent", "" when it has none).
    setup_log = models.JSONField(default=list, blank=True, help_text="[line]")
    jupyter = models.CharField(max_length=16, blank=True)
    # The owner was warned of the stop due at this time (one warning per stop time).
    warned_stop_at = models.DateTimeField(null=True, blank=True)
    # The owner was told the agent is silent since this time (once per silence).
    silent_told_since = models.DateTimeField(null=True, blank=True)
    kept_until = models.DateTimeField(null=True, blank=True)
    # The portal last failed to store a heartbeat of this agent (its own failure, not the
    # agent's): the idle sweep counts no silence before it (workspaces.idle).
    store_failed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"Agent of {self.workspace_id}"


class TelemetrySample(models.Model):
    """One heartbeat sample, kept raw for TELEMETRY_RAW_HOURS (48) then folded into
    TelemetryHour. Percent and MiB; ``gpu_util`` is the highest over the GPUs,
    ``gpu_mem_used_mib`` the sum over them, ``gpu_mem_max_mib`` the fullest one's use and
    ``gpu_mem_total_mib`` the largest one's memory (per GPU or MIG device, as NVML reports it),
    ``gpus_in_use`` those holding at least 1 GiB (workspaces.telemetry.GPU_IN_USE_MIB)."""

    id = models.BigAutoField(primary_key=True)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False)
    at = models.DateTimeField()
    gpu_util = models.PositiveSmallIntegerField(null=True)
    gpu_mem_used_mib = models.PositiveIntegerField(default=0)
    interactive = models.PositiveSmallIntegerField(default=0)
    cpu_percent = models.PositiveSmallIntegerField(null=True)
    gpu_mem_max_mib = models.PositiveIntegerField(default=0)
    gpu_mem_total_mib = models.PositiveIntegerField(default=0)
    gpus_in_use = models.PositiveSmallIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["workspace", "at"])]

    def __str__(self) -> str:
        return f"{self.workspace_id} at {self.at:%Y-%m-%d %H:%M:%S}"


# TelemetryHour's figures (every column but the workspace and the hour), in one place: the
# covering index carries them, the fold writes them (workspaces.telemetry) and right-sizing
# reads them in this order (billing.usage.HourRow).
HOUR_FIGURES = (
    "samples",
    "gpu_util_avg",
    "gpu_util_max",
    "interactive_max",
    "gpu_mem_max_mib",
    "gpu_mem_sum_mib",
    "gpu_mem_total_mib",
    "gpus_in_use_max",
)


class TelemetryHour(models.Model):
    """Samples older than TELEMETRY_RAW_HOURS, one row per workspace and hour (UTC): the
    hour's highest of each sample's figure (TelemetrySample), MiB; None for hours folded
    before GPU memory was kept. Right-sizing (billing.recommendations) reads them."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE)
    hour = models.DateTimeField()
    samples = models.PositiveIntegerField()
    gpu_util_avg = models.PositiveSmallIntegerField(null=True)
    gpu_util_max = models.PositiveSmallIntegerField(null=True)
    interactive_max = models.PositiveSmallIntegerField(default=0)
    gpu_mem_max_mib = models.PositiveIntegerField(null=True, help_text="Fullest GPU, MiB")
    gpu_mem_sum_mib = models.PositiveIntegerField(null=True, help_text="All GPUs, MiB")
    gpu_mem_total_mib = models.PositiveIntegerField(null=True, help_text="Memory per GPU, MiB")
    gpus_in_use_max = models.PositiveSmallIntegerField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "hour"], name="one_row_per_hour")
        ]
        indexes = [
            # Carries every figure (PostgreSQL's INCLUDE; databases without covering indexes
            # skip it), so right-sizing reads each workspace's 30 days of hours by an
            # index-only scan, no heap page read (billing.usage).
            models.Index(
                fields=["workspace", "hour"],
                name="telemetryhour_figures",
                include=list(HOUR_FIGURES),
            )
        ]

    def __str__(self) -> str:
        return f"{self.workspace_id} hour {self.hour:%Y-%m-%d %H}:00"


class WorkspaceExtension(models.Model):
    """A *keep running* the owner asked for: the workspace is not stopped before ``until``."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="extensions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    at = models.DateTimeField()
    hours = models.PositiveSmallIntegerField()
    until = models.DateTimeField()

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"{self.workspace_id} kept until {self.until:%Y-%m-%d %H:%M}"

    @property
    def length_words(self) -> str:
        """How long it really kept the workspace, in words ("4 hours"; "24 minutes" with demo
        timings): ``hours`` is the policy's, ``until`` the real deadline."""
        return duration_words((self.until - self.at).total_seconds() / 60)


class Lease(models.Model):
    """A named lease that one process holds at a time (the idle sweep, the leading Celery
    beat), taken by compare-and-set on ``expires_at`` so it works on SQLite and PostgreSQL
    alike; ``since``: when its holder took it (null for leases taken before it was kept)."""

    name = models.CharField(max_length=64, primary_key=True)
    holder = models.CharField(max_length=64, blank=True)
    expires_at = models.DateTimeField()
    since = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.name


class BeatRun(models.Model):
    """When the leading Celery beat last sent each schedule entry (``job``: its name in
    portal/celery.py), and which beat did: a beat that takes over continues from here."""

    job = models.CharField(max_length=64, primary_key=True)
    last_run_at = models.DateTimeField()
    holder = models.CharField(max_length=64, blank=True)

    def __str__(self) -> str:
        return self.job


class DiskSnapshot(models.Model):
    """A snapshot of a deleted workspace's OS disk its owner kept (Microsoft.Compute/snapshots,
    incremental, on standard storage), from which a new workspace of the same kind, team and
    region can start. ``size_gb`` is the disk's provisioned size in GiB (Azure bills an
    incremental snapshot for the GiB used, at most that). Deleted only on purpose
    (storage.services.disk_snapshot_delete, audited)."""

    team = models.ForeignKey("teams.Team", on_delete=models.PROTECT, related_name="+")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    workspace = models.OneToOneField(
        Workspace, on_delete=models.PROTECT, related_name="kept_snapshot"
    )
    kind = models.CharField(max_length=16)
    name = models.CharField(max_length=80, unique=True, help_text="Its Azure name")
    azure_id = models.CharField(max_length=300)
    region = models.CharField(max_length=32)
    vm_size = models.CharField(max_length=64, help_text="The size of the workspace it kept")
    size_gb = models.PositiveIntegerField()
    created_at = models.DateTimeField()
    # Deleted on purpose: restorable until purge_after (the team's retention days), when the
    # hourly purge deletes it in Azure and sets purged_at.
    deleted_at = models.DateTimeField(null=True, blank=True)
    purge_after = models.DateTimeField(null=True, blank=True)
    purged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name
