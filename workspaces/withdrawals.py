"""Withdrawing a request that waits for a platform admin's approval: its owner or a team admin
takes it back before anyone decided, from the page, the API (POST .../withdraw, or DELETE) or
the CLI (``gpuportal rm``). Nothing exists in Azure yet, so nothing is deleted there; the
workspace is closed as *Withdrawn*, stops counting toward its owner's per-member cap, and the
request is marked withdrawn and audited (``quota_request.withdrawn``).

Errors raised: WorkspaceActionError (not waiting for approval, or decided meanwhile),
ActionNotAllowed (not the owner or a team admin).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.contrib.auth.models import User
from django.db import transaction

from common.permissions import access_require
from teams.quota_requests import DecisionError, quota_request_withdraw
from workspaces.requests import WorkspaceActionError, workspace_close_unapproved
from workspaces.states import Status

if TYPE_CHECKING:
    from workspaces.models import Workspace

NOT_YOURS = "Only the owner or a team admin can withdraw this request."


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
