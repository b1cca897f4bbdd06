"""A user's actions on an existing workspace: stop, start, delete, retry, keep running past
the idle stop; and the portal's automatic stop with the owner told why.

Errors raised: WorkspaceActionError (and ExtensionRefused; the message is shown to the user
as is), ActionNotAllowed (the user may not act on the workspace).
"""

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.urls import reverse

from common.permissions import access_require
from notifications.models import NoticeKind, WebhookEvent
from notifications.notice_text import mark
from notifications.notices import notice_about, notice_resolve, notice_send
from notifications.webhooks import webhook_event_emit
from teams.models import IdlePolicy, Team
from workspaces import hooks, selectors, states, telemetry
from workspaces.backends import backend_for
from workspaces.models import (
    Workspace,
    WorkspaceAgent,
    WorkspaceExtension,
)
from workspaces.quota import QuotaCheck
from workspaces.requests import WorkspaceActionError
from workspaces.states import Status
from workspaces.transitions import transition_and_queue
from workspaces.withdrawals import workspace_dequeue, workspace_withdraw

# The refusal shown on the 403 page when someone else's workspace is acted on.
NOT_YOURS = "Only the owner or a team admin can change this workspace."


def _user_transition(
    *,
    user: User,
    workspace: Workspace,
    to: str,
    reason: str,
    now: datetime,
    guard: Callable[[], object] | None = None,
    **fields: Any,
) -> None:
    """``guard``, if given, runs first inside the transaction and raises to refuse."""
    access_require(user=user, perm="workspaces.act_on_workspace", obj=workspace, message=NOT_YOURS)
    try:
        states.check(workspace.status, to)
    except states.IllegalTransition as exc:
        raise WorkspaceActionError(str(exc)) from exc
    with transaction.atomic():
        if guard:
            guard()
        moved = transition_and_queue(
            workspace_id=workspace.pk,
            expected=workspace.status,
            to=to,
            now=now,
            actor=user,
            reason=reason,
            **fields,
        )
        if not moved:
            raise WorkspaceActionError("The workspace changed meanwhile; look at it again.")


def workspace_stop(*, user: User, workspace: Workspace, now: datetime) -> None:
    """Deallocate a running VM, keeping its OS disk.

    Raises WorkspaceActionError, ActionNotAllowed.
    """
    _user_transition(
        user=user, workspace=workspace, to=Status.STOPPING, reason="Stopped by user", now=now
    )


def workspace_stop_automatically(
    *, workspace_id: UUID | str, reason: str, detail: dict[str, Any], now: datetime, told: str = ""
) -> bool:
    """Stop a running workspace for a policy (idle, silent agent, nightly stop, lifetime, the
    team's budget): the same transition and task as a user's Stop, with ``reason`` (a
    sentence) and its evidence (``detail``) in the history and no actor, and its owner told
    by notice and email (workspace_stopped_tell) why: ``told``, the reason with its times
    marked (notifications.notice_text), or else ``reason``. False when it was no longer running."""
    with transaction.atomic():
        moved = transition_and_queue(
            workspace_id=workspace_id,
            expected=Status.RUNNING,
            to=Status.STOPPING,
            now=now,
            reason=reason,
            detail=detail,
        )
        if moved:
            workspace_stopped_tell(workspace_id=workspace_id, why=told or reason, now=now)
    return moved


def workspace_stopped_tell(
    *,
    workspace_id: UUID | str,
    why: str,
    now: datetime,
    what: str = "was stopped automatically",
    event: str = WebhookEvent.IDLE_STOP,
) -> None:
    """Tell the owner in-app and by email, in the same words, that the workspace was stopped
    automatically at ``now`` (in the reader's time zone on a page, the team's in the email, as
    the idle warnings) and
    ``why`` (one or more sentences); the email's subject is the name and ``what``. The
    notice stays while the workspace is stopped (states.NOTICE_TRUE_WHILE); the email leaves
    once the caller's transaction commits. The team's webhooks that chose ``event``
    (idle_stop, or eviction) get the same words (notifications.webhooks)."""
    workspace = Workspace.objects.select_related("owner").get(pk=workspace_id)
    policies = IdlePolicy.objects.filter(team_id=workspace.team_id)
    why = why.strip() if why.strip().endswith(".") else f"{why.strip()}."
    subject = f"{workspace.name} {what}"
    text = (
        f"{workspace.name} was stopped automatically at {mark(now)}. {why} "
        "Start it again when you need it."
    )
    link = reverse("workspaces:detail", args=[workspace.pk])
    notice_send(
        users=[workspace.owner],
        subject=subject,
        text=text,
        link=link,
        now=now,
        kind=NoticeKind.AUTO_STOP,
        about=notice_about(workspace),
        zone=policies.values_list("timezone", flat=True).first() or "UTC",
    )
    data = {
        "workspace_id": str(workspace.pk),
        "workspace_name": workspace.name,
        "owner": workspace.owner.username,
        "stopped_at": now.isoformat(),
    }
    webhook_event_emit(
        team_id=workspace.team_id, event=event, title=subject, text=text, link=link, data=data,
        now=now,
    )  # fmt: skip


class ExtensionRefused(WorkspaceActionError):
    """Keep running refused: the message says which limit of the team's policy."""


def workspace_keep_running(
    *, user: User, workspace: Workspace, now: datetime
) -> WorkspaceExtension:
    """Keep a running workspace from being stopped by its idle policy for the team's
    extension_hours (hours), at most extensions_per_day times in 24 hours. Logged as a
    WorkspaceExtension, which is returned.

    Idempotent: while an extension is in force and its stop warning (the policy's warn_minutes
    before it ends) has not begun, Keep running returns that extension and spends nothing, so
    a double click or a second tab does not use up the day's extensions. Inside the warning,
    which is when the owner is told the stop is near, it spends the next one. The workspace
    row is locked (select_for_update) in the transaction that reads and inserts, so racing
    clicks are decided one after the other. Raises ExtensionRefused, ActionNotAllowed."""
    access_require(user=user, perm="workspaces.act_on_workspace", obj=workspace, message=NOT_YOURS)
    policy = IdlePolicy.objects.filter(team_id=workspace.team_id).first() or IdlePolicy()
    with transaction.atomic():
        locked = Workspace.objects.select_for_update().filter(pk=workspace.pk)
        if locked.values_list("status", flat=True).first() != Status.RUNNING:
            raise ExtensionRefused("Only a running workspace can be kept running.")
        in_force = _extension_in_force(workspace, policy, now)
        if in_force is not None:
            return in_force
        used = workspace.extensions.filter(at__gt=now - timedelta(days=1)).count()
        if used >= policy.extensions_per_day:
            raise ExtensionRefused(
                f"The team allows {policy.extensions_per_day} extension(s) a day; "
                f"{used} used in the last 24 hours."
            )
        until = now + timedelta(hours=policy.extension_hours * settings.IDLE_TIME_SCALE)
        extension = WorkspaceExtension.objects.create(
            workspace=workspace, user=user, at=now, hours=policy.extension_hours, until=until
        )
        WorkspaceAgent.objects.filter(pk=workspace.pk).update(kept_until=until)
        _stop_warnings_resolve(workspace, user, until, policy, now)
    return extension


def _stop_warnings_resolve(
    workspace: Workspace, user: User, until: datetime, policy: IdlePolicy, now: datetime
) -> None:
    local = until.astimezone(ZoneInfo(policy.timezone or "UTC"))
    notice_resolve(
        about=f"workspace:{workspace.pk}",
        kinds=[NoticeKind.STOP_WARNING],
        now=now,
        by=user,
        reason=f"Kept running by {user.username} until {local:%H:%M %Z}",
    )


def _extension_in_force(
    workspace: Workspace, policy: IdlePolicy, now: datetime
) -> WorkspaceExtension | None:
    """The extension that keeps the workspace beyond its stop warning from ``now``, if any."""
    warning = timedelta(minutes=telemetry.policy_from_row(policy).warn_minutes)
    return (
        WorkspaceExtension.objects.filter(workspace_id=workspace.pk, until__gt=now + warning)
        .order_by("-until")
        .first()
    )


def workspace_start(*, user: User, workspace: Workspace, now: datetime) -> None:
    """Start a stopped (deallocated) VM. Its GPUs count against the team's quota again and it
    burns money again, so the GPU quota and the budget are checked as for a new request,
    holding the team row. Inside the team's quiet hours (scheduling, through
    workspaces.hooks.start_held) it is refused, saying until when.
    Raises WorkspaceActionError (saying what is over or what holds it), ActionNotAllowed."""
    _user_transition(
        user=user,
        workspace=workspace,
        to=Status.STARTING,
        reason="Started by user",
        now=now,
        guard=lambda: _check_room_to_start(workspace, now),
        evicted_at=None,
    )


def _room_for(workspace: Workspace, now: datetime) -> QuotaCheck:
    """The team's quota check for ``workspace`` coming back, taken holding the team row so
    that racing starts, retries and requests are decided one after the other."""
    team = Team.objects.select_for_update().get(pk=workspace.team_id)
    return selectors.quota_check(
        team=team,
        user=workspace.owner,
        gpu_model=workspace.gpu_model,
        gpus=backend_for(workspace.kind).gpu_share(workspace),
        price_per_hour=workspace.price_per_hour,
        now=now,
    )


def _check_room_to_start(workspace: Workspace, now: datetime) -> None:
    held = hooks.start_held(team_id=workspace.team_id, now=now)
    if held:
        raise WorkspaceActionError(f"{workspace.name} was not started. {held}")
    check = _room_for(workspace, now)
    if check.over_to_start:
        raise WorkspaceActionError(
            " ".join(check.over_to_start)
            + " Stop or delete another workspace first, or ask your team admin for more quota."
        )
    # Judged on what it does from now on, not on the idleness that stopped it.
    telemetry.agent_activity_reset(workspace_id=workspace.pk)


def workspace_delete(
    *, user: User, workspace: Workspace, now: datetime, keep_snapshot: bool = False
) -> None:
    """Delete the VM, its NIC and OS disk, and revoke its agent's token. A request still
    waiting for approval has nothing in Azure: deleting it withdraws it
    (workspaces.withdrawals), so ``gpuportal rm`` and the API's DELETE take it back.
    With ``keep_snapshot``, its backend snapshots the OS disk before deleting it
    (docs/storage.md); refused for a kind without one (WorkspaceBackend.disk_snapshots).
    Raises WorkspaceActionError, ActionNotAllowed."""
    if keep_snapshot and not backend_for(workspace.kind).disk_snapshots:
        label = backend_for(workspace.kind).label
        raise WorkspaceActionError(f"A {label} has no OS disk of its own to keep.")
    if workspace.status == Status.PENDING_APPROVAL:
        workspace_withdraw(user=user, workspace=workspace, now=now)
        return
    if workspace.status == Status.QUEUED:
        # A request never created is closed; a stopped VM that waited to start is deleted.
        if workspace_dequeue(user=user, workspace=workspace, now=now) != Status.STOPPED:
            return
        workspace.refresh_from_db()
    _user_transition(
        user=user,
        workspace=workspace,
        to=Status.DELETING,
        reason="Deleted by user" + ("; keeping a snapshot of its OS disk" if keep_snapshot else ""),
        now=now,
        failed_operation="",
        keep_snapshot=keep_snapshot,
    )
    telemetry.agent_token_revoke(workspace_id=workspace.pk, now=now)


def workspace_retry(*, user: User, workspace: Workspace, now: datetime) -> None:
    """Do again the operation that failed (``failed_operation``): a failed delete is deleted
    again, creating nothing; a failed create, or a pre-check Azure refused, is provisioned
    again. A failed workspace holds no GPUs, no place under the per-member cap and burns
    nothing, so a create tried again is measured as a new request is (GPU quota, per-member
    cap, budget), holding the team row; over any of them it is refused, saying which.
    Raises WorkspaceActionError, ActionNotAllowed."""
    cleared: dict[str, Any] = {
        "error_code": "",
        "error_message": "",
        "operation": "",
        "operation_token": "",
        "failed_operation": "",
    }
    if workspace.failed_operation == "delete":
        _user_transition(
            user=user,
            workspace=workspace,
            to=Status.DELETING,
            reason="Retry of the delete requested by user",
            now=now,
            **cleared,
        )
        return
    _user_transition(
        user=user,
        workspace=workspace,
        to=Status.REQUESTED,
        reason="Retry requested by user",
        now=now,
        guard=lambda: _check_room_to_retry(workspace, now),
        **cleared,
    )


def _check_room_to_retry(workspace: Workspace, now: datetime) -> None:
    """Raises WorkspaceActionError when the team has no room for the workspace again (as a new
    request: GPUs, the owner's per-member cap, budget), checked holding the team row so that
    racing retries and requests are decided one after the other."""
    check = _room_for(workspace, now)
    if check.over:
        raise WorkspaceActionError(
            f"{workspace.name} cannot be tried again now: "
            + " ".join(check.over)
            + " Stop or delete another workspace first, or ask your team admin for more quota."
        )
    # The retry creates a new VM: its agent gets a new token, the old one stops working.
    telemetry.agent_token_issue(workspace_id=workspace.pk, now=now, new_vm=True)
