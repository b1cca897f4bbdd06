"""Approvals of workspace requests above quota: open, approve, reject, expire, and the cost
estimate an approver sees.

Errors raised: DecisionError (already decided or expired; the message says which),
ActionNotAllowed (the actor may not decide requests; 403).
"""

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.urls import reverse

from common.permissions import access_require
from notifications.models import NoticeKind, WebhookEvent
from notifications.notices import Message, notice_about, notice_send, notice_send_many
from notifications.webhooks import webhook_event_emit
from teams import hooks
from teams.audit import audit_record
from teams.models import Decision, QuotaRequest, TeamQuotaIncrease
from teams.selectors import platform_admins


class DecisionError(Exception):
    """The request was already decided or has expired; the message says which."""


def decision_pending_check(pending: QuotaRequest | TeamQuotaIncrease) -> None:
    """Raises DecisionError naming the decision and who made it unless ``pending`` (a
    QuotaRequest or TeamQuotaIncrease, locked by the caller) still waits for one."""
    if pending.decision != Decision.PENDING:
        who = f" by {pending.decided_by.username}" if pending.decided_by else ""
        raise DecisionError(f"This request was already {pending.decision}{who}.")


def decision_record(
    pending: QuotaRequest | TeamQuotaIncrease,
    *,
    action: str,
    decision: str,
    actor: User,
    comment: str,
    now: datetime,
) -> None:
    """Record a platform admin's ``decision`` on a pending request checked by the caller
    (decision_pending_check): who, when, the comment stripped; audited as ``action``."""
    pending.decision, pending.decided_by = decision, actor
    pending.decided_at, pending.comment = now, comment.strip()
    pending.save(update_fields=["decision", "decided_by", "decided_at", "comment"])
    audit_record(
        actor=actor,
        team=pending.team,
        action=action,
        obj=pending,
        before={"decision": Decision.PENDING.value},
        after={"decision": decision, "comment": pending.comment},
        now=now,
    )


def _detail_link(workspace: Any) -> str:
    return reverse("workspaces:detail", kwargs={"pk": workspace.pk})


def quota_request_open(
    *,
    workspace: Any,
    over: list[str],
    justification: str,
    now: datetime,
    resize: tuple[str, str, Decimal] | None = None,
    requester: User | None = None,
) -> QuotaRequest:
    """Record that ``workspace`` waits for approval because of ``over`` (reasons in words),
    and tell the requester and the platform admins. Expires after
    QUOTA_REQUEST_EXPIRY_DAYS days. ``resize``: a resize of the workspace is asked instead,
    as (target key, its label, its USD/hour), by ``requester`` (default: its owner)."""
    summary = f"{workspace.size_label} in {workspace.region} for {workspace.team.name}"
    price, resize_to = workspace.price_per_hour, ""
    if resize is not None:
        resize_to, label, price = resize
        summary = f"Resize {workspace.name} to {label} for {workspace.team.name}"[:200]
    request = QuotaRequest.objects.create(
        team=workspace.team,
        requester=requester or workspace.owner,
        workspace=workspace,
        resize_to=resize_to,
        summary=summary,
        over_quota=over,
        justification=justification.strip(),
        price_per_hour=price,
        created_at=now,
        expires_at=now + timedelta(days=settings.QUOTA_REQUEST_EXPIRY_DAYS),
    )
    _tell_opened(request, now)
    return request


def _tell_opened(request: QuotaRequest, now: datetime) -> None:
    """Notices that stay until the request is decided (states.NOTICE_TRUE_WHILE resolves
    them when the workspace leaves pending approval); the emails leave after commit."""
    workspace, about = request.workspace, notice_about(request.workspace)
    waits = Message(
        request.requester,
        f"Waiting for approval: {workspace.name}",
        f"{workspace.name} waits for a platform admin: {' '.join(request.over_quota)}",
        _detail_link(workspace),
        NoticeKind.AWAITING_APPROVAL,
        about,
    )
    asks = [
        Message(
            admin,
            f"Approval needed: {request.summary}",
            f"{request.requester.username} asks for {request.summary}: {request.justification}",
            reverse("approvals"),
            NoticeKind.APPROVAL_ASKED,
            about,
        )
        for admin in platform_admins()
    ]
    notice_send_many(messages=[waits, *asks], now=now)
    webhook_event_emit(
        team_id=request.team_id,
        event=WebhookEvent.APPROVAL_NEEDED,
        title=f"Approval needed: {request.summary}",
        text=f"{request.requester.username} asks for {request.summary}: {request.justification}",
        link=reverse("approvals"),
        data=_request_data(request),
        now=now,
    )


def _request_data(request: QuotaRequest) -> dict[str, Any]:
    """A request's figures for the generic webhook (JSON-safe; USD as strings)."""
    return {
        "quota_request_id": request.pk,
        "workspace_id": str(request.workspace_id),
        "workspace_name": request.workspace.name,
        "requester": request.requester.username,
        "summary": request.summary,
        "over_quota": list(request.over_quota),
        "price_per_hour_usd": str(request.price_per_hour),
        "decision": request.decision,
    }


def _decide(
    *, quota_request_id: int, actor: User, decision: str, comment: str, now: datetime
) -> QuotaRequest:
    """Lock the request, refuse if it is no longer pending, and record the decision."""
    request = (
        QuotaRequest.objects.select_for_update()
        .select_related("workspace", "requester", "team")
        .get(pk=quota_request_id)
    )
    access_require(user=actor, perm="teams.decide_requests", obj=request.team)
    decision_pending_check(request)
    if request.expires_at <= now:
        raise DecisionError("This request has expired; the requester must ask again.")
    decision_record(
        request,
        action=f"quota_request.{decision}",
        decision=decision,
        actor=actor,
        comment=comment,
        now=now,
    )
    return request


def quota_request_approve(
    *, quota_request_id: int, actor: User, comment: str, now: datetime
) -> QuotaRequest:
    """Approve: the workspace is provisioned (workspaces.requests.quota_request_decided,
    through teams.hooks). Raises DecisionError if no longer pending, ActionNotAllowed."""
    return _decide_workspace(quota_request_id, actor, comment, now, Decision.APPROVED)


def quota_request_reject(
    *, quota_request_id: int, actor: User, comment: str, now: datetime
) -> QuotaRequest:
    """Reject: the workspace is closed (through teams.hooks). Raises DecisionError if no
    longer pending, ActionNotAllowed."""
    return _decide_workspace(quota_request_id, actor, comment, now, Decision.REJECTED)


def _decide_workspace(
    quota_request_id: int, actor: User, comment: str, now: datetime, decision: Decision
) -> QuotaRequest:
    """Record the decision, then apply it to the workspace (teams.hooks), in one
    transaction; the requester is told after commit."""
    with transaction.atomic():
        request = _decide(
            quota_request_id=quota_request_id,
            actor=actor,
            decision=decision,
            comment=comment,
            now=now,
        )
        reason = f"{decision.label} by {actor.username}"
        if request.comment:
            reason += f": {request.comment}"
        hooks.request_decided(
            workspace_id=request.workspace_id,
            decision=decision,
            actor=actor,
            reason=reason,
            now=now,
            resize_to=request.resize_to,
        )
        _tell_decided(request, now)  # in the transaction; its email leaves on commit
    return request


def _tell_decided(request: QuotaRequest, now: datetime) -> None:
    verb = request.get_decision_display().lower()
    why = f" Comment: {request.comment}" if request.comment else ""
    subject = f"{request.workspace.name} was {verb}"
    notice_send(
        users=[request.requester],
        subject=subject,
        text=f"Your request for {request.summary} was {verb}.{why}",
        link=_detail_link(request.workspace),
        now=now,
    )
    # The team's channel: the same sentence, naming the requester and who decided.
    webhook_event_emit(
        team_id=request.team_id,
        event=WebhookEvent.APPROVAL_DECIDED,
        title=subject,
        text=f"{request.requester.username}'s request for {request.summary} was {verb} by "
        f"{request.decided_by.username if request.decided_by else 'the portal'}.{why}",
        link=_detail_link(request.workspace),
        data=_request_data(request),
        now=now,
    )


def quota_request_withdraw(*, quota_request_id: int, actor: User, now: datetime) -> QuotaRequest:
    """Record that ``actor`` took the pending request back (decision Withdrawn, audited as
    quota_request.withdrawn); who may is the caller's rule (workspaces.withdrawals: the
    owner, the team's admins). The platform admins' "approval needed" notices are resolved
    when the workspace leaves pending approval. Raises DecisionError if it was already
    decided or has expired."""
    request = (
        QuotaRequest.objects.select_for_update()
        .select_related("workspace", "requester", "team")
        .get(pk=quota_request_id)
    )
    decision_pending_check(request)
    if request.expires_at <= now:
        raise DecisionError("This request has expired.")
    request.decision, request.decided_by, request.decided_at = Decision.WITHDRAWN, actor, now
    request.save(update_fields=["decision", "decided_by", "decided_at"])
    audit_record(
        actor=actor,
        team=request.team,
        action="quota_request.withdrawn",
        obj=request,
        before={"decision": Decision.PENDING},
        after={"decision": Decision.WITHDRAWN},
        now=now,
    )
    return request


def quota_requests_expire(*, now: datetime) -> int:
    """Expire every pending request past its expiry, close its workspace and tell the
    requester. Returns how many expired."""
    expired = 0
    due = QuotaRequest.objects.filter(decision=Decision.PENDING, expires_at__lte=now)
    for request_id in due.values_list("pk", flat=True):
        with transaction.atomic():
            request = (
                QuotaRequest.objects.select_for_update()
                .select_related("workspace", "requester")
                .get(pk=request_id)
            )
            if request.decision != Decision.PENDING:
                continue
            request.decision, request.decided_at = Decision.EXPIRED, now
            request.save(update_fields=["decision", "decided_at"])
            hooks.request_decided(
                workspace_id=request.workspace_id,
                decision=Decision.EXPIRED,
                actor=None,
                reason="Request expired before a platform admin decided",
                now=now,
                resize_to=request.resize_to,
            )
            _tell_decided(request, now)
            expired += 1
    return expired


def cost_estimate(*, price_per_hour: Decimal, now: datetime) -> dict[str, Decimal]:
    """USD per hour, per day and from ``now`` to the end of the month (UTC), to the cent."""
    next_month = (now.replace(day=28) + timedelta(days=4)).replace(
        day=1, hour=0, minute=0, second=0, microsecond=0
    )
    hours_left = Decimal((next_month - now).total_seconds()) / 3600
    cent = Decimal("0.01")
    return {
        "hour": price_per_hour.quantize(cent),
        "day": (price_per_hour * 24).quantize(cent),
        "month_end": (price_per_hour * hours_left).quantize(cent),
    }
