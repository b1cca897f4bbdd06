"""The workspace state machine: the statuses, what each looks like, and the only code that
changes ``Workspace.status``.

Every change is a compare-and-set (``filter(pk=..., status=expected).update(...)``): when no row
changes, another worker or click already moved the workspace on, and the caller stops quietly.
Each change writes one WorkspaceEvent (who, from, to, why, when), opens or closes the
workspace's billing interval (through workspaces.hooks: billing registers its meter there, so
this module imports no billing code) and resolves the notices that the change made untrue
(NOTICE_TRUE_WHILE).
"""

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.contrib.auth.models import User
from django.db import models, transaction
from django.urls import reverse

from notifications.models import WebhookEvent
from notifications.notices import notice_resolve
from notifications.webhooks import webhook_event_emit
from workspaces import hooks

if TYPE_CHECKING:  # workspaces.models imports this module
    # A real cycle: workspaces.models imports Status, STYLE and TRANSITIONS from here.
    from workspaces.models import Workspace


class Status(models.TextChoices):
    PENDING_APPROVAL = "pending_approval", "Pending approval"
    # Waiting in the fair queue (scheduling.queue) for the team's quota or Azure's capacity;
    # holds no GPUs and nothing runs. Left by the queue's pass (requested, or starting for a
    # stopped VM), by its owner (deleted, or stopped again for a stopped VM).
    QUEUED = "queued", "Queued"
    REQUESTED = "requested", "Requested"
    PROVISIONING = "provisioning", "Provisioning"
    SETTING_UP = "setting_up", "Setting up"
    RUNNING = "running", "Running"
    STOPPING = "stopping", "Stopping"
    STOPPED = "stopped", "Stopped"
    STARTING = "starting", "Starting"
    RESIZING = "resizing", "Resizing"
    DELETING = "deleting", "Deleting"
    DELETED = "deleted", "Deleted"
    FAILED = "failed", "Failed"


@dataclass(frozen=True)
class StatusStyle:
    label: str
    colour: str  # Bootstrap colour: badge "text-bg-<colour>" pairs text and background at >= 4.5:1


# Keyed by Status, read with the plain strings stored in status columns.
STYLE: dict[str, StatusStyle] = {
    Status.PENDING_APPROVAL: StatusStyle("Pending approval", "warning"),
    Status.QUEUED: StatusStyle("Queued", "info"),
    Status.REQUESTED: StatusStyle("Requested", "primary"),
    Status.PROVISIONING: StatusStyle("Provisioning", "primary"),
    Status.SETTING_UP: StatusStyle("Setting up", "primary"),
    Status.RUNNING: StatusStyle("Running", "success"),
    Status.STOPPING: StatusStyle("Stopping", "primary"),
    Status.STOPPED: StatusStyle("Stopped", "secondary"),
    Status.STARTING: StatusStyle("Starting", "primary"),
    Status.RESIZING: StatusStyle("Resizing", "primary"),
    Status.DELETING: StatusStyle("Deleting", "primary"),
    Status.DELETED: StatusStyle("Deleted", "secondary"),
    Status.FAILED: StatusStyle("Failed", "danger"),
}
# A request closed before anything existed in Azure is "Deleted" only in the database: people
# read it as the decision (WorkspaceEvent.detail["outcome"], written by the close).
CLOSED_UNAPPROVED_STYLE = {
    "rejected": StatusStyle("Rejected", "danger"),
    "expired": StatusStyle("Expired", "secondary"),
    "withdrawn": StatusStyle("Withdrawn", "secondary"),
}


def event_style(
    *, from_status: str, to_status: str, detail: dict[str, Any] | None, by_person: bool
) -> StatusStyle:
    """The style of the status an event moved to: 'Rejected' or 'Expired' for a request closed
    unapproved (older events without an outcome: rejected when a person closed it), else
    STYLE's."""
    if from_status == Status.PENDING_APPROVAL and to_status == Status.DELETED:
        outcome = (detail or {}).get("outcome") or ("rejected" if by_person else "expired")
        return CLOSED_UNAPPROVED_STYLE.get(outcome, STYLE[to_status])
    return STYLE[to_status]


# Holds or will hold Azure resources: counts against quota, shown in the default list.
ACTIVE = frozenset(
    {
        Status.PENDING_APPROVAL,
        Status.QUEUED,
        Status.REQUESTED,
        Status.PROVISIONING,
        Status.SETTING_UP,
        Status.RUNNING,
        Status.STOPPING,
        Status.STARTING,
        Status.RESIZING,
    }
)
# Holds its GPUs against the team's quota; a stopped (deallocated) VM holds none. A resizing one
# holds its old size's until the new one is accepted (it is usually started again at once). One
# being deleted holds them until Azure confirms the delete, and so does one whose delete Azure
# refused (failed, failed_operation "delete": workspaces.quota counts it too).
HOLDS_GPUS = frozenset(
    {
        Status.REQUESTED,
        Status.PROVISIONING,
        Status.SETTING_UP,
        Status.RUNNING,
        Status.STOPPING,
        Status.STARTING,
        Status.RESIZING,
        Status.DELETING,
    }
)
# Counts against the per-user cap on workspaces held at once.
HELD = frozenset(set(Status) - {Status.DELETED, Status.FAILED})
# Compute is allocated, so the VM's hourly price accrues. Not Provisioning: the meter opens only
# once Azure says the create succeeded (Setting up, or Running for a VM without an environment),
# so a create it refused costs nothing; Azure bills the minutes its driver and environment take
# to install, and so does the portal. A
# resizing VM is deallocated (the deallocate runs as Stopping), so its meter closes and reopens
# at the new price on Starting. A delete keeps the meter open until Azure confirms it
# (billing.meters.UNTIL_GONE).
BILLABLE = frozenset({Status.SETTING_UP, Status.RUNNING, Status.STOPPING, Status.STARTING})
# A MIG slice or namespace on AKS costs its share of the nodes only while its pod holds the slice
# or its GPU quota is set: from running until stopped (a pod waiting for a slice costs nothing).
BILLABLE_ON_AKS = frozenset({Status.RUNNING, Status.STOPPING})
# A worker owes the workspace an Azure operation; see OPERATION.
IN_PROGRESS = frozenset(
    {
        Status.REQUESTED,
        Status.PROVISIONING,
        Status.SETTING_UP,
        Status.STOPPING,
        Status.STARTING,
        Status.RESIZING,
        Status.DELETING,
    }
)
# Nothing changes without a person: the page stops polling.
STEADY = frozenset(set(Status) - IN_PROGRESS)

# Notices about a workspace (teams.models.NoticeKind -> the statuses in which what they say is
# true): the transition that leaves those statuses resolves them, in its transaction.
NOTICE_TRUE_WHILE = {
    "stop_warning": frozenset({Status.RUNNING}),
    "no_telemetry": frozenset({Status.RUNNING}),
    "awaiting_approval": frozenset({Status.PENDING_APPROVAL}),
    "approval_asked": frozenset({Status.PENDING_APPROVAL}),
    "auto_stop": frozenset({Status.STOPPING, Status.STOPPED}),
}

# Status while a worker acts -> (Azure operation, status once it succeeded).
OPERATION = {
    Status.PROVISIONING: ("create", Status.RUNNING),
    # The VM is up; its driver, environment layer and JupyterLab are not yet ready
    # (workspaces.backends.vm_setup). Running once they are.
    Status.SETTING_UP: ("setup", Status.RUNNING),
    Status.STOPPING: ("deallocate", Status.STOPPED),
    Status.STARTING: ("start", Status.RUNNING),
    # Changing the size of a deallocated VM (or moving a stopped MIG slice to another profile);
    # once done it is started again if it was running (Starting), else it stays Stopped.
    Status.RESIZING: ("resize", Status.STOPPED),
    Status.DELETING: ("delete", Status.DELETED),
}

TRANSITIONS: dict[str, frozenset[str]] = {
    Status.PENDING_APPROVAL: frozenset({Status.REQUESTED, Status.DELETED}),
    # Admitted by the queue: a new request goes on to be created, a stopped VM to be started;
    # taken out of the queue: a new request is closed, a stopped VM stays stopped.
    Status.QUEUED: frozenset({Status.REQUESTED, Status.STARTING, Status.DELETED, Status.STOPPED}),
    # Failed straight from requested: Azure refused the pre-check itself (nothing was made).
    # Queued from requested: Azure has no room for any accepted size, and it waits in the
    # queue without holding the team's GPUs.
    Status.REQUESTED: frozenset(
        {Status.PROVISIONING, Status.DELETING, Status.FAILED, Status.QUEUED}
    ),
    # Requested again from provisioning: Azure had no room for the size, and the workspace
    # accepts equivalent sizes to try next (workspaces.backends.vm_placement).
    Status.PROVISIONING: frozenset(
        {Status.SETTING_UP, Status.RUNNING, Status.FAILED, Status.REQUESTED}
    ),
    # A failed driver extension or environment layer fails it (the VM is deleted; Retry makes
    # it again); its owner may delete it while it sets up.
    Status.SETTING_UP: frozenset({Status.RUNNING, Status.FAILED, Status.DELETING}),
    # Stopped straight from running: Azure deallocated a Spot VM itself (an eviction).
    Status.RUNNING: frozenset({Status.STOPPING, Status.STOPPED, Status.DELETING}),
    # A failed deallocate leaves the VM running; a failed start leaves it deallocated. A
    # deallocate for a resize goes on to Resizing; one whose size check failed back to Running.
    Status.STOPPING: frozenset({Status.STOPPED, Status.RUNNING, Status.RESIZING, Status.FAILED}),
    Status.STOPPED: frozenset({Status.STARTING, Status.RESIZING, Status.DELETING, Status.QUEUED}),
    # Queued from starting: Azure had no room to start the deallocated VM (AllocationFailed);
    # it waits in the fair queue to be started again rather than going back to stopped.
    Status.STARTING: frozenset({Status.RUNNING, Status.STOPPED, Status.FAILED, Status.QUEUED}),
    # Resized (or refused, keeping its size): started again if it was running, else stopped.
    Status.RESIZING: frozenset({Status.STARTING, Status.STOPPED, Status.FAILED}),
    Status.DELETING: frozenset({Status.DELETED, Status.FAILED}),
    Status.FAILED: frozenset({Status.REQUESTED, Status.DELETING}),
    Status.DELETED: frozenset(),
}


class IllegalTransition(Exception):
    """A change the state machine does not allow, e.g. starting a deleted workspace."""

    def __init__(self, current: str, target: str):
        self.current, self.target = current, target
        super().__init__(
            f"A workspace that is {Status(current).label.lower()} cannot become "
            f"{Status(target).label.lower()}."
        )


def check(current: str, target: str) -> None:
    """Raise IllegalTransition unless ``current -> target`` is an edge of TRANSITIONS."""
    if target not in TRANSITIONS[current]:
        raise IllegalTransition(current, target)


def transition(
    *,
    workspace_id: uuid.UUID | str,
    expected: str,
    to: str,
    now: datetime,
    actor: User | None = None,
    reason: str = "",
    detail: dict[str, Any] | None = None,
    **fields: Any,
) -> bool:
    """Move a workspace from ``expected`` to ``to`` and record why.

    ``fields`` are other columns written in the same UPDATE (e.g. private_ip, error_code).
    A new status owes a new operation, so its count of failed attempts starts at 0.
    Returns False, changing nothing, when the workspace was no longer ``expected``.
    Raises IllegalTransition when the edge does not exist.
    """
    # A real cycle: workspaces.models imports Status, STYLE and TRANSITIONS from here.
    from workspaces.models import Workspace, WorkspaceEvent

    check(expected, to)
    with transaction.atomic():
        changed = Workspace.objects.filter(pk=workspace_id, status=expected).update(
            status=to, status_changed_at=now, updated_at=now, operation_attempts=0, **fields
        )
        if not changed:
            return False
        WorkspaceEvent.objects.create(
            workspace_id=workspace_id,
            at=now,
            actor=actor,
            from_status=expected,
            to_status=to,
            reason=reason,
            detail=detail or {},
        )
        hooks.transition_happened(workspace_id=workspace_id, expected=expected, to=to, now=now)
        _resolve_notices(workspace_id, expected, to, now, actor, reason)
        if to == Status.FAILED:
            _tell_failed(workspace_id, reason, now)
    return True


def _tell_failed(workspace_id: uuid.UUID | str, reason: str, now: datetime) -> None:
    """The team's webhooks that chose failures hear of it with the history's reason (the
    workspace's page shows the same words)."""
    # A real cycle: workspaces.models imports Status, STYLE and TRANSITIONS from here.
    from workspaces.models import Workspace

    workspace = Workspace.objects.select_related("owner").get(pk=workspace_id)
    webhook_event_emit(
        team_id=workspace.team_id,
        event=WebhookEvent.FAILURE,
        title=f"{workspace.name} failed",
        text=f"{workspace.name} of {workspace.owner.username} failed: {reason or 'no reason'}.",
        link=reverse("workspaces:detail", args=[workspace.pk]),
        data={
            "workspace_id": str(workspace.pk),
            "workspace_name": workspace.name,
            "owner": workspace.owner.username,
            "error_code": workspace.error_code,
            "error_message": workspace.error_message,
            "failed_operation": workspace.failed_operation,
        },
        now=now,
    )


def _resolve_notices(
    workspace_id: uuid.UUID | str,
    expected: str,
    to: str,
    now: datetime,
    actor: User | None,
    reason: str,
) -> None:
    """Resolve the workspace's notices that were true in ``expected`` and are not in ``to``
    (one UPDATE, only for such transitions)."""
    kinds = [k for k, true_while in NOTICE_TRUE_WHILE.items() if expected in true_while]
    kinds = [k for k in kinds if to not in NOTICE_TRUE_WHILE[k]]
    if kinds:
        notice_resolve(
            about=f"workspace:{workspace_id}",
            kinds=kinds,
            now=now,
            by=actor,
            reason=reason or f"Now {Status(to).label.lower()}",
        )


def record_creation(
    *, workspace: "Workspace", now: datetime, actor: User | None = None, reason: str = ""
) -> None:
    """Write the first event of a workspace just inserted with its initial status."""
    # A real cycle: workspaces.models imports Status, STYLE and TRANSITIONS from here.
    from workspaces.models import WorkspaceEvent

    WorkspaceEvent.objects.create(
        workspace=workspace,
        at=now,
        actor=actor,
        from_status="",
        to_status=workspace.status,
        reason=reason,
    )
