"""A platform admin's decision on a resize that waits for approval (workspaces.resizes puts it
before them as a QuotaRequest with ``resize_to``): approved, the resize goes ahead as if it had
fitted, its target held against the quota from then on; rejected, expired or withdrawn, the
workspace stays as it is. Either way the "waiting for approval" notices about it are resolved
(a workspace request's are resolved by its status leaving pending approval; a resize's
workspace never was pending).

Errors raised: DecisionError (the workspace can no longer be resized to the target: the
decision is not recorded).
"""

from datetime import datetime
from uuid import UUID

from django.contrib.auth.models import User

from notifications.models import NoticeKind
from notifications.notices import notice_resolve
from teams.models import Decision
from teams.quota_requests import DecisionError
from workspaces.models import Workspace
from workspaces.requests import WorkspaceActionError
from workspaces.resizes import resize_choices, resize_start


def resize_request_decided(
    *,
    workspace_id: UUID | str,
    decision: str,
    actor: User | None,
    reason: str,
    now: datetime,
    resize_to: str = "",
) -> None:
    """Carry out a decided resize request (registered with teams.hooks in
    WorkspacesConfig.ready(); workspace requests, ``resize_to`` "", are left to
    workspaces.requests.quota_request_decided). Raises DecisionError."""
    if not resize_to:
        return
    notice_resolve(
        about=f"workspace:{workspace_id}",
        kinds=[NoticeKind.AWAITING_APPROVAL, NoticeKind.APPROVAL_ASKED],
        now=now,
        by=actor,
        reason=reason,
    )
    if decision != Decision.APPROVED:
        return
    workspace = Workspace.objects.get(pk=workspace_id)
    choice = next(
        (c for c in resize_choices(workspace=workspace, now=now) if c.key == resize_to), None
    )
    if not workspace.can_resize or choice is None or actor is None:
        raise DecisionError(
            f"{workspace.name} cannot be resized to {resize_to} now (it is "
            f"{workspace.get_status_display().lower()}); reject the request instead."
        )
    try:
        resize_start(workspace=workspace, choice=choice, actor=actor, reason=reason, now=now)
    except WorkspaceActionError as exc:
        raise DecisionError(str(exc)) from exc
