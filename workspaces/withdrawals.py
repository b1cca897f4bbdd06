"""Withdrawing a request that waits for a platform admin's approval: its owner or a team admin
takes it back before anyone decided, from the page, the API (POST .../withdraw, or DELETE) or
the CLI (``gpuportal rm``). Nothing exists in Azure yet, so nothing is deleted there; the
workspace is closed as *Withdrawn*, stops counting toward its owner's per-member cap, and the
request is marked withdrawn and audited (``quota_request.withdrawn``).

Errors raised: WorkspaceActionError (not waiting for approval, or decided meanwhile),
ActionNotAllowed (not the owner or a team admin).

A queued workspace (the fair queue, scheduling.queue) is taken out of the queue the same way
(workspace_dequeue).
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from django.contrib.auth.models import User
from django.db import transaction

from common.permissions import access_require
from teams.quota_requests import DecisionError, quota_request_withdraw
from workspaces import states
from workspaces.models import Workspace, WorkspaceEvent
from workspaces.requests import WorkspaceActionError, workspace_close_unapproved
from workspaces.states import Status

NOT_YOURS = "Only the owner or a team admin can withdraw this request."
NOT_YOURS_QUEUED = "Only the owner or an admin can take this workspace out of the queue."


def workspace_withdraw(*, user: User, workspace: Workspace, now: datetime) -> None:
    """Withdraw the workspace's request waiting for approval (see the module's docstring).
    Raises WorkspaceActionError, ActionNotAllowed."""
    access_require(user=user, perm="workspaces.withdraw_request", obj=workspace, message=NOT_YOURS)
    quota_request = workspace.quota_request
    if workspace.status != Status.PENDING_APPROVAL or quota_request is None:
        raise WorkspaceActionError("Only a request waiting for approval can be withdrawn.")
    with transaction.atomic():
        try:
            quota_request_withdraw(quota_request_id=quota_request.pk, actor=user, now=now)
        except DecisionError as exc:
            raise WorkspaceActionError(str(exc)) from exc
        closed = workspace_close_unapproved(
            workspace_id=workspace.pk,
            actor=user,
            reason=f"Request withdrawn by {user.username}",
            now=now,
            outcome="withdrawn",
        )
        if not closed:
            raise WorkspaceActionError("The request changed meanwhile; look at it again.")


def queued_from_stopped(*, workspace_id: UUID | str) -> bool:
    """Whether a queued workspace was stopped (its VM exists, deallocated) when it joined the
    queue, or joined it because Azure had no room to start it: it leaves the queue by
    starting, or stopped again, rather than by being created or closed. One query (the last
    event into queued)."""
    joined = (
        WorkspaceEvent.objects.filter(workspace_id=workspace_id, to_status=Status.QUEUED)
        .order_by("-at", "-id")
        .values_list("from_status", flat=True)
        .first()
    )
    # From starting: Azure refused to start the deallocated VM for lack of room (it exists).
    return joined in (Status.STOPPED, Status.STARTING)


def workspace_dequeue(*, user: User, workspace: Workspace, now: datetime) -> str:
    """Take a queued workspace out of the fair queue (its owner, a team admin or a platform
    admin): a stopped VM that waited to start stays stopped, a request waiting to be created
    is closed (nothing exists in Azure). Returns the status it left in.
    Raises WorkspaceActionError (no longer queued), ActionNotAllowed."""
    access_require(
        user=user, perm="workspaces.act_on_workspace", obj=workspace, message=NOT_YOURS_QUEUED
    )
    to = Status.STOPPED if queued_from_stopped(workspace_id=workspace.pk) else Status.DELETED
    left = states.transition(
        workspace_id=workspace.pk,
        expected=Status.QUEUED,
        to=to,
        now=now,
        actor=user,
        reason=f"Taken out of the queue by {user.username}",
        waiting_reason="",
    )
    if not left:
        raise WorkspaceActionError("The workspace left the queue meanwhile; look at it again.")
    return to
