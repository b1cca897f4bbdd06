"""A team's quotas and budgets, and its requests for a permanent increase of them (asked by a
team admin, decided by a platform admin), audited.

Errors raised: DecisionError (the increase was already decided), ActionNotAllowed.
"""

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.urls import reverse

from common.permissions import access_require
from common.words import usd
from notifications.models import NoticeKind
from notifications.notices import notice_about, notice_resolve, notice_send
from teams.audit import audit_record
from teams.guards import team_lock
from teams.models import AuditEntry, Decision, GpuQuota, Team, TeamQuotaIncrease
from teams.quota_requests import decision_pending_check, decision_record
from teams.selectors import platform_admins


def _limits(team: Team) -> dict[str, Any]:
    """The team's limits as JSON-safe data: GPUs per model, USD/month (str or None), cap."""
    quotas = dict(GpuQuota.objects.filter(team=team).values_list("gpu_model", "gpus"))
    budget = team.monthly_budget
    return {
        "gpu_quotas": dict(sorted(quotas.items())),
        "monthly_budget": None if budget is None else str(budget),
        "max_workspaces_per_user": team.max_workspaces_per_user,
        "stop_at_budget": team.stop_at_budget,
    }


def _apply_limits(
    team: Team,
    quotas: dict[str, int | None],
    budget: Decimal | None,
    cap: int | None,
    stop: bool | None,
) -> None:
    for gpu_model, gpus in quotas.items():
        if gpus:
            GpuQuota.objects.update_or_create(
                team=team, gpu_model=gpu_model, defaults={"gpus": gpus}
            )
        else:  # no row and a row of 0 GPUs mean the same: keep the audit free of noise
            GpuQuota.objects.filter(team=team, gpu_model=gpu_model).delete()
    team.monthly_budget = budget
    if cap is not None:
        team.max_workspaces_per_user = cap
    if stop is not None:
        team.stop_at_budget = stop
    team.save(update_fields=["monthly_budget", "max_workspaces_per_user", "stop_at_budget"])


def team_limits_set(
    *,
    actor: User,
    team: Team,
    gpu_quotas: dict[str, int | None],
    monthly_budget: Decimal | None,
    max_workspaces_per_user: int,
    now: datetime,
    stop_at_budget: bool | None = None,
) -> AuditEntry | None:
    """Set the team's GPU quota per model (GPUs; models not named keep theirs), its monthly
    budget (USD, None = no limit), the per-member cap and whether its running workspaces are
    stopped when the month's spend reaches the budget (None keeps it). Platform admins only
    (ActionNotAllowed otherwise). Audited with the limits before and after; returns the audit
    row, or None when nothing changed."""
    access_require(user=actor, perm="teams.set_quota", obj=team)
    with transaction.atomic():
        team = team_lock(team)
        before = _limits(team)
        _apply_limits(team, gpu_quotas, monthly_budget, max_workspaces_per_user, stop_at_budget)
        after = _limits(team)
        if after == before:
            return None
        if after["monthly_budget"] != before["monthly_budget"]:
            _budget_notices_resolve(team, actor, after["monthly_budget"], now)
        return audit_record(
            actor=actor,
            team=team,
            action="team.limits",
            obj=team,
            before=before,
            after=after,
            now=now,
        )


def _budget_notices_resolve(team: Team, actor: User, budget: str | None, now: datetime) -> None:
    """A budget alert speaks of the old budget's percentages: no longer true once it changed
    (the next check tells of each mark of the new budget not yet told this month)."""
    to = "no budget limit" if budget is None else f"{usd(Decimal(budget))} a month"
    notice_resolve(
        about=notice_about(team),
        kinds=[NoticeKind.BUDGET],
        now=now,
        by=actor,
        reason=f"Budget changed to {to} by {actor.username}",
    )


def team_increase_request(
    *,
    actor: User,
    team: Team,
    gpu_model: str,
    gpus: int | None,
    monthly_budget: Decimal | None,
    justification: str,
    now: datetime,
) -> TeamQuotaIncrease:
    """A team admin asks for a permanent GPU quota (``gpus`` of ``gpu_model`` in all) and/or a
    monthly budget (USD); the platform admins are told. Raises ActionNotAllowed (not a team
    admin of ``team``), ValueError (nothing asked)."""
    access_require(user=actor, perm="teams.request_increase", obj=team)
    if not (gpu_model and gpus is not None) and monthly_budget is None:
        raise ValueError("Ask for a number of GPUs of a model, a monthly budget, or both.")
    with transaction.atomic():
        increase = TeamQuotaIncrease.objects.create(
            team=team,
            requester=actor,
            gpu_model=gpu_model if gpus is not None else "",
            gpus=gpus if gpu_model else None,
            monthly_budget=monthly_budget,
            justification=justification.strip(),
            created_at=now,
        )
        notice_send(
            users=platform_admins(),
            subject=f"Quota increase asked: {increase.summary}",
            text=f"{actor.username} asks for {increase.summary}: {increase.justification}",
            link=reverse("approvals"),
            now=now,
            kind=NoticeKind.INCREASE_ASKED,
            about=notice_about(increase),
        )
        audit_record(
            actor=actor,
            team=team,
            action="quota_increase.open",
            obj=increase,
            before={},
            after=_increase_asked(increase),
            now=now,
        )
    return increase


def _increase_asked(increase: TeamQuotaIncrease) -> dict[str, Any]:
    budget = increase.monthly_budget
    return {
        "gpu_model": increase.gpu_model,
        "gpus": increase.gpus,
        "monthly_budget": None if budget is None else str(budget),
    }


def _decide_increase(
    increase_id: int, actor: User, decision: str, comment: str, now: datetime
) -> TeamQuotaIncrease:
    """Lock the increase request, refuse if no longer pending, record and audit the decision."""
    increase = (
        TeamQuotaIncrease.objects.select_for_update(of=("self",))
        .select_related("team", "requester", "decided_by")
        .get(pk=increase_id)
    )
    access_require(user=actor, perm="teams.decide_requests", obj=increase.team)
    decision_pending_check(increase)
    decision_record(
        increase,
        action=f"quota_increase.{decision}",
        decision=decision,
        actor=actor,
        comment=comment,
        now=now,
    )
    notice_resolve(
        about=notice_about(increase),
        kinds=[NoticeKind.INCREASE_ASKED],
        now=now,
        by=actor,
        reason=f"{Decision(decision).label} by {actor.username}",
    )
    return increase


def team_increase_approve(
    *, increase_id: int, actor: User, comment: str, now: datetime
) -> TeamQuotaIncrease:
    """Approve: the team's quota of that GPU model and/or its budget become what was asked
    (audited as a limits change). Raises DecisionError (no longer pending), ActionNotAllowed."""
    with transaction.atomic():
        increase = _decide_increase(increase_id, actor, Decision.APPROVED, comment, now)
        team = team_lock(increase.team)
        quotas = {increase.gpu_model: increase.gpus} if increase.gpu_model else {}
        budget = team.monthly_budget if increase.monthly_budget is None else increase.monthly_budget
        team_limits_set(
            actor=actor,
            team=team,
            gpu_quotas=quotas,
            monthly_budget=budget,
            max_workspaces_per_user=team.max_workspaces_per_user,
            now=now,
        )
        _tell_increase_decided(increase, now)
    return increase


def team_increase_reject(
    *, increase_id: int, actor: User, comment: str, now: datetime
) -> TeamQuotaIncrease:
    """Reject: nothing changes but the request. Raises DecisionError, ActionNotAllowed."""
    with transaction.atomic():
        increase = _decide_increase(increase_id, actor, Decision.REJECTED, comment, now)
        _tell_increase_decided(increase, now)
    return increase


def _tell_increase_decided(increase: TeamQuotaIncrease, now: datetime) -> None:
    verb = increase.get_decision_display().lower()
    why = f" Comment: {increase.comment}" if increase.comment else ""
    notice_send(
        users=[increase.requester],
        subject=f"Quota increase {verb}: {increase.summary}",
        text=f"Your request for {increase.summary} was {verb}.{why}",
        link=reverse("team-detail", kwargs={"slug": increase.team.slug}),
        now=now,
    )
