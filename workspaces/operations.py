"""The worker side of a workspace's operation: queue its chain of tasks (workspaces.chains),
move it one step through its kind's backend (workspace_advance), record Azure's refusal
(workspace_operation_failed), refresh its provider objects' access, and take over chains that
were lost (workspace_reconcile).

Errors raised: CloudError (transient: the task retries).
"""

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.contrib.auth.models import User

from cloud.errors import CloudError
from workspaces import chains, selectors, states
from workspaces.backends import backend_for, backends
from workspaces.chains import Next
from workspaces.models import Workspace
from workspaces.states import OPERATION, Status
from workspaces.transitions import advance_queue, transition_and_queue


def workspace_advance(*, workspace_id: UUID | str, clock: Callable[[], datetime]) -> Next:
    """Move the operation the workspace's status owes one step on, through its kind's backend
    (workspaces.backends; a VM: workspaces.backends.vm, which pre-checks a requested VM
    against Azure's quotas first), and say what the caller does next (see Next).

    ``clock`` returns the current time (aware, UTC); it is read at each transition because an
    Azure operation takes minutes between them.

    Safe to call twice: a workspace in a steady status is left alone, an operation whose
    continuation token was saved is polled rather than started again, and the final
    compare-and-set lets only one caller record the result. A refused operation (a CloudError
    that is not transient) fails the workspace (workspace_operation_failed).
    Raises CloudError when the cloud answered with a transient error (the task retries).
    """
    workspace = Workspace.objects.filter(pk=workspace_id).first()
    if workspace is None:
        return Next.DONE
    try:
        return backend_for(workspace.kind).advance(workspace, clock)
    except CloudError as exc:
        if exc.transient:
            raise
        workspace_operation_failed(workspace_id=workspace.pk, error=exc, now=clock())
        return Next.DONE


# Where a workspace goes when Azure refuses its operation for good.
FAILED_TO = {
    Status.PROVISIONING: Status.FAILED,
    # The driver extension failed: the VM is deleted with the failed create's clean-up.
    Status.SETTING_UP: Status.FAILED,
    Status.STOPPING: Status.RUNNING,
    Status.STARTING: Status.STOPPED,
    # Retries of a resize exhausted: it keeps its size, deallocated; started again at that size
    # when it was running before the resize (_resize_given_up).
    Status.RESIZING: Status.STOPPED,
    Status.DELETING: Status.FAILED,
}


def workspace_operation_failed(
    *, workspace_id: UUID | str, error: CloudError, now: datetime
) -> None:
    """Record that Azure refused the workspace's operation, with Azure's code and message.

    A failed create first removes whatever it left (VM in Failed state, NIC, OS disk), so nothing
    is billed or orphaned. Raises CloudError if that clean-up itself hits a transient error.
    """
    workspace = Workspace.objects.filter(pk=workspace_id).first()
    if workspace is not None and workspace.status == Status.REQUESTED:
        _precheck_failed(workspace, error, now)
        return
    if workspace is None or workspace.status not in FAILED_TO:
        return
    if workspace.status == Status.RESIZING and workspace.resize_restart:
        _resize_given_up(workspace, error, now)
        return
    backend = backend_for(workspace.kind)
    if workspace.status in (Status.PROVISIONING, Status.SETTING_UP):
        backend.clean_up_failed_create(workspace)
    service = backend.service
    status = Status(workspace.status)
    operation, to = OPERATION[status][0], FAILED_TO[status]
    states.transition(
        workspace_id=workspace.pk,
        expected=workspace.status,
        to=to,
        now=now,
        reason=f"{service} refused the {operation}: {error.code}",
        detail={"code": error.code, "message": error.message, "status": error.status},
        operation="",
        operation_token="",
        error_code=error.code,
        error_message=error.message,
        # What Retry does again; a failed stop or start is redone by Stop or Start.
        failed_operation=operation if to == Status.FAILED else "",
        # A resize waiting on a refused operation is given up with it: nothing half-made.
        resize_to="",
        resize_restart=False,
        resize_target={},
    )


def _resize_given_up(workspace: Workspace, error: CloudError, now: datetime) -> None:
    """A resize of a running workspace whose size change Azure kept refusing (retries
    exhausted): it keeps its old size and is started again, as after any refusal once
    deallocated (workspaces.backends.vm_resize), so a resize never leaves it stopped."""
    service = backend_for(workspace.kind).service
    transition_and_queue(
        workspace_id=workspace.pk,
        expected=Status.RESIZING,
        to=Status.STARTING,
        now=now,
        reason=(
            f"{service} refused the resize to {workspace.resize_to}: {error.code}; "
            f"{workspace.mig_profile or workspace.vm_size} kept, starting it again"
        ),
        detail={"code": error.code, "message": error.message, "status": error.status},
        operation="",
        operation_token="",
        error_code=error.code,
        error_message=error.message,
        resize_to="",
        resize_restart=False,
        resize_target={},
    )


def _precheck_failed(workspace: Workspace, error: CloudError, now: datetime) -> None:
    """Azure refused the pre-check itself (e.g. AuthorizationFailed without Reader on the
    subscription, or throttling beyond the retries): fail the workspace with Azure's code and
    message. Nothing was created, so there is nothing to clean up."""
    states.transition(
        workspace_id=workspace.pk,
        expected=Status.REQUESTED,
        to=Status.FAILED,
        now=now,
        reason=f"Azure refused the quota and size check: {error.code}",
        detail={"code": error.code, "message": error.message, "status": error.status},
        waiting_reason="",
        error_code=error.code,
        error_message=error.message,
        failed_operation="create",
    )


def workspace_access_queue(*, user: User) -> int:
    """Queue refresh_slice_access for each workspace owned by ``user`` whose provider objects
    name their identity (after their Entra ID identity changed: teams.hooks.identity_changed;
    each kind's backend says which, see WorkspaceBackend.access_to_refresh). Returns how many."""
    # A real cycle: workspaces.tasks imports this module (its tasks run it).
    from workspaces.tasks import refresh_slice_access

    ids = [pk for backend in backends() for pk in backend.access_to_refresh(owner=user)]
    for workspace_id in ids:
        refresh_slice_access.delay(str(workspace_id))
    return len(ids)


def workspace_access_refresh(*, workspace_id: UUID | str) -> None:
    """The worker's side: the workspace's provider objects made to grant its owner's identity
    as it is now (its backend's access_refresh). Raises CloudError."""
    workspace = Workspace.objects.select_related("node_pool", "owner", "team").get(pk=workspace_id)
    backend_for(workspace.kind).access_refresh(workspace)


def workspace_reconcile(*, now: datetime, stale_after: timedelta) -> list[Any]:
    """Take over and queue again the operation of workspaces in progress whose chain of tasks
    is lost: its next run overdue by more than ``stale_after`` (or, held by no chain, unchanged
    for that long). A chain waiting for its next run (a poll, a back-off, Azure's Retry-After)
    is left alone, so each operation has one chain (workspaces.chains). Returns the ids queued.
    Lost tasks are rare, but nobody should wait forever."""
    stale_before = now - stale_after
    queued = []
    for workspace_id in selectors.workspace_stale_in_progress(stale_before=stale_before):
        rows = Workspace.objects.filter(pk=workspace_id, status__in=states.IN_PROGRESS)
        claim = chains.take_over(rows, stale_before=stale_before, now=now)
        if claim:
            advance_queue(workspace_id, claim=claim)
            queued.append(workspace_id)
    return queued
