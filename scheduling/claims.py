"""The claim window: a workspace the queue started is its owner's to claim within
QUEUE_CLAIM_MINUTES of it running, or it is stopped again so the GPUs go to the next in the
queue. The owner is told when it runs, by notice, email and webhook (queue_started).

Errors raised: WorkspaceActionError (nothing to claim), ActionNotAllowed.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.urls import reverse

from common.permissions import access_require
from notifications.models import NoticeKind, WebhookEvent
from notifications.notice_text import mark
from notifications.notices import notice_resolve, notice_send
from notifications.webhooks import webhook_event_emit
from scheduling.models import QueueEntry
from workspaces.actions import NOT_YOURS, workspace_stop_automatically
from workspaces.models import Workspace
from workspaces.requests import WorkspaceActionError
from workspaces.states import Status

CLAIM_NOTICE = NoticeKind.INFO


def claim_window() -> timedelta:
    return timedelta(minutes=settings.QUEUE_CLAIM_MINUTES)


def claim_window_open(*, workspace_id: UUID | str, expected: str, to: str, now: datetime) -> None:
    """workspaces.hooks transition callback: a workspace the queue started now runs; its
    claim window opens and its owner is told; one that stops running before it was claimed
    has its window closed. One query for any other change to or from running."""
    if expected == Status.RUNNING:
        QueueEntry.objects.filter(
            workspace_id=workspace_id, claim_by__isnull=False, claimed_at__isnull=True
        ).update(claim_by=None)
    if to != Status.RUNNING:
        return
    opened = QueueEntry.objects.filter(
        workspace_id=workspace_id,
        admitted_at__isnull=False,
        claim_by__isnull=True,
        claimed_at__isnull=True,
        scheduled=False,
    ).update(claim_by=now + claim_window())
    if opened:
        _tell_started(workspace_id, now + claim_window(), now)


def _tell_started(workspace_id: UUID | str, claim_by: datetime, now: datetime) -> None:
    workspace = Workspace.objects.select_related("owner").get(pk=workspace_id)
    link = reverse("workspaces:detail", args=[workspace.pk])
    subject = f"{workspace.name} is running: its turn in the queue came"
    text = (
        f"{workspace.name} waited in the queue and now runs. Claim it by {mark(claim_by)} "
        "on its page, or it is stopped again and its GPUs go to the next in the queue."
    )
    notice_send(
        users=[workspace.owner],
        subject=subject,
        text=text,
        link=link,
        now=now,
        kind=CLAIM_NOTICE,
        about=f"queue-claim:{workspace.pk}",
        expires_at=claim_by,
    )
    webhook_event_emit(
        team_id=workspace.team_id,
        event=WebhookEvent.QUEUE_STARTED,
        title=subject,
        text=text,
        link=link,
        data={
            "workspace_id": str(workspace.pk),
            "workspace_name": workspace.name,
            "owner": workspace.owner.username,
            "claim_by": claim_by.isoformat(),
        },
        now=now,
    )


def claim_pending(*, workspace: Workspace) -> QueueEntry | None:
    """The workspace's open claim window, if any. One query."""
    return QueueEntry.objects.filter(
        workspace_id=workspace.pk, claim_by__isnull=False, claimed_at__isnull=True
    ).first()


def queue_claim(*, user: User, workspace: Workspace, now: datetime) -> None:
    """Claim a workspace the queue started: it is kept running (its idle policy still
    applies). Raises WorkspaceActionError (no open claim window), ActionNotAllowed."""
    access_require(user=user, perm="workspaces.act_on_workspace", obj=workspace, message=NOT_YOURS)
    with transaction.atomic():
        claimed = QueueEntry.objects.filter(
            workspace_id=workspace.pk, claim_by__gt=now, claimed_at__isnull=True
        ).update(claimed_at=now)
        if not claimed:
            raise WorkspaceActionError("There is nothing to claim: the claim window is closed.")
        notice_resolve(
            about=f"queue-claim:{workspace.pk}",
            kinds=[CLAIM_NOTICE],
            now=now,
            by=user,
            reason=f"Claimed by {user.username}",
        )


def claims_expire(*, now: datetime) -> list[UUID]:
    """Stop every running workspace the queue started whose owner did not claim it within
    its window, telling them why (workspace_stop_automatically). Returns the ids stopped."""
    late = QueueEntry.objects.filter(
        claim_by__lte=now, claimed_at__isnull=True, workspace__status=Status.RUNNING
    ).values_list("workspace_id", "claim_by")
    stopped = []
    for workspace_id, claim_by in late:
        assert claim_by is not None  # filtered on claim_by__lte
        reason = (
            f"It started from the queue and was not claimed by {mark(claim_by)}, so its GPUs "
            "go to the next in the queue."
        )
        with transaction.atomic():
            QueueEntry.objects.filter(workspace_id=workspace_id).update(claim_by=None)
            moved = workspace_stop_automatically(
                workspace_id=workspace_id,
                reason="Not claimed after it started from the queue",
                detail={"claim_by": claim_by.isoformat()},
                now=now,
                told=reason,
            )
        if moved:
            stopped.append(workspace_id)
    return stopped
