"""Services for idle stop: the sweep that applies workspaces.idle verdicts, and the owner's
*keep running* extension.

The sweep reads every running workspace's folded activity in one query and its team's policy
in another, whatever the number of workspaces; it writes only for the workspaces it warns or
stops. One sweep runs at a time (a lease), and every write is conditional as well, so two
sweeps started together neither double-warn nor double-stop.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

from django.contrib.auth import get_user_model
from django.db import transaction
from django.urls import reverse

from common import metrics
from notifications.models import NoticeKind, WebhookEvent
from notifications.notice_text import mark
from notifications.notices import Message, notice_resolve, notice_send_many
from notifications.webhooks import TeamEvent, webhook_events_emit
from teams.models import IdlePolicy
from workspaces import idle
from workspaces.actions import workspace_stop_automatically
from workspaces.heartbeats import telemetry_outage_last
from workspaces.leases import lease_release, lease_take
from workspaces.live_topics import telemetry_changed
from workspaces.models import WorkspaceAgent
from workspaces.states import Status
from workspaces.telemetry import policy_from_row

log = logging.getLogger(__name__)

LEASE = "idle-sweep"
LEASE_SECONDS = 60


@dataclass
class SweepResult:
    """How many running workspaces were judged, warned, told of silence and stopped, and
    whose warnings or silence notices no longer held (``resolved``); ``skipped`` when another
    sweep held the lease."""

    evaluated: int = 0
    warned: list[UUID] = field(default_factory=list)  # workspace ids, as the rest
    told_silent: list[UUID] = field(default_factory=list)
    stopped: list[UUID] = field(default_factory=list)
    resolved: list[UUID] = field(default_factory=list)
    skipped: bool = False


@dataclass(frozen=True)
class Judged:
    """One running workspace with its verdict."""

    agent: dict[str, Any]  # the WorkspaceAgent columns the sweep reads
    policy: idle.Policy
    verdict: idle.Verdict


def _lease_take(now: datetime) -> str | None:
    holder = uuid.uuid4().hex
    taken = lease_take(name=LEASE, holder=holder, seconds=LEASE_SECONDS, now=now)
    return holder if taken else None  # None: another sweep holds it


def _lease_release(holder: str, now: datetime) -> None:
    lease_release(name=LEASE, holder=holder, now=now)


COLUMNS = (
    "workspace_id",
    "last_at",
    "evidence_since",
    "busy_since",
    "active_at",
    "warned_stop_at",
    "silent_told_since",
    "kept_until",
    "store_failed_at",
    "workspace__status_changed_at",
    "workspace__team_id",
    "workspace__owner_id",
    "workspace__name",
)


def workspaces_judge(*, now: datetime) -> list[Judged]:
    """Every running workspace with an agent, judged by its team's policy: two queries and a
    cache read (when the portal last failed to store anyone's telemetry)."""
    rows = list(WorkspaceAgent.objects.filter(workspace__status=Status.RUNNING).values(*COLUMNS))
    outage = telemetry_outage_last(now=now)
    team_ids = {r["workspace__team_id"] for r in rows}
    policies = {
        p.team_id: policy_from_row(p) for p in IdlePolicy.objects.filter(team_id__in=team_ids)
    }
    default = policy_from_row(IdlePolicy())
    judged = []
    for row in rows:
        policy = policies.get(row["workspace__team_id"], default)
        verdict = idle.verdict(
            idle.activity_of(row),
            policy,
            now,
            running_since=row["workspace__status_changed_at"],
            kept_until=row["kept_until"],
            unstored_at=_latest(row["store_failed_at"], outage),
        )
        judged.append(Judged(row, policy, verdict))
    return judged


def _latest(*times: datetime | None) -> datetime | None:
    return max((t for t in times if t is not None), default=None)


def idle_sweep(*, now: datetime) -> SweepResult:
    """Warn the owners of workspaces whose stop is near, tell owners of silent agents, and
    stop what is due, with the reason and evidence in the history. Returns what it did."""
    holder = _lease_take(now)
    if holder is None:
        return SweepResult(skipped=True)
    try:
        judged = workspaces_judge(now=now)
        result = SweepResult(evaluated=len(judged))
        due = [j for j in judged if j.verdict.should_stop(now)]
        result.stopped = [j.agent["workspace_id"] for j in due if _stop_one(j, now)]
        stopping = {j.agent["workspace_id"] for j in due}
        result.resolved = _resolve_passed(
            [j for j in judged if j.agent["workspace_id"] not in stopping], now
        )
        result.warned = _warn(
            [j for j in judged if j.verdict.should_warn(now) and _unwarned(j)], now
        )
        result.told_silent = _tell_silent([j for j in judged if _silent_to_tell(j)], now)
        _count(result)
        return result
    finally:
        _lease_release(holder, now)


def _count(result: SweepResult) -> None:
    """Add what this sweep did to /metrics' portal_idle_actions_total."""
    for action, done in (
        ("stopped", result.stopped),
        ("warned", result.warned),
        ("silence", result.told_silent),
    ):
        if done:
            metrics.IDLE_ACTIONS.labels(action).inc(len(done))


def _silent_to_tell(j: Judged) -> bool:
    # While the portal itself fails to store telemetry, the agents are not to blame.
    v = j.verdict
    return v.state is idle.State.SILENT and not v.portal_failing and _untold(j)


def _unwarned(j: Judged) -> bool:
    return bool(j.agent["warned_stop_at"] != j.verdict.stop_at)


def _untold(j: Judged) -> bool:
    return bool(j.agent["silent_told_since"] != j.verdict.since)


def _owners(judged: list[Judged]) -> dict[int, Any]:  # user id -> User
    ids = {j.agent["workspace__owner_id"] for j in judged}
    return get_user_model().objects.in_bulk(ids)


def _link(j: Judged) -> str:
    return reverse("workspaces:detail", args=[j.agent["workspace_id"]])


def _claim(
    judged: list[Judged], column: str, value: Callable[[Judged], datetime | None]
) -> list[Judged]:
    """Those of ``judged`` whose ``column`` this call set to ``value(j)``: a conditional
    write per row, so a sweep that lost its lease mid-way cannot tell anyone twice."""
    claimed = [
        j
        for j in judged
        if WorkspaceAgent.objects.filter(pk=j.agent["workspace_id"])
        .exclude(**{column: value(j)})
        .update(**{column: value(j)})
    ]
    # The warning shows on the workspace's page: tell it (live pages).
    telemetry_changed(j.agent["workspace_id"] for j in claimed)
    return claimed


def _resolve_passed(judged: list[Judged], now: datetime) -> list[UUID]:
    """Resolve the stop warnings whose stop moved (the workspace is in use again, or its stop
    was put off) and the silence notices of agents that report again, and forget that they
    were told, so that a later warning or silence is told afresh. Writes only for those."""
    moved = [j for j in judged if j.agent["warned_stop_at"] not in (None, j.verdict.stop_at)]
    heard = [
        j
        for j in judged
        if j.agent["silent_told_since"] is not None and j.verdict.state is not idle.State.SILENT
    ]
    resolved = []
    for j in _claim_back(moved, "warned_stop_at"):
        resolved += _resolve(j, NoticeKind.STOP_WARNING, _moved_why(j), now)
    for j in _claim_back(heard, "silent_told_since"):
        resolved += _resolve(j, NoticeKind.NO_TELEMETRY, "The agent reports again", now)
    return resolved


def _claim_back(judged: list[Judged], column: str) -> list[Judged]:
    """Those of ``judged`` whose ``column`` this call cleared (conditional, as _claim)."""
    return [
        j
        for j in judged
        if WorkspaceAgent.objects.filter(
            pk=j.agent["workspace_id"], **{column: j.agent[column]}
        ).update(**{column: None})
    ]


def _resolve(j: Judged, kind: str, reason: str, now: datetime) -> list[UUID]:
    about = f"workspace:{j.agent['workspace_id']}"
    notice_resolve(about=about, kinds=[kind], now=now, reason=reason)
    return [j.agent["workspace_id"]]


def _moved_why(j: Judged) -> str:
    when = _local(j.verdict.stop_at, j.policy)
    if j.verdict.state is idle.State.ACTIVE:
        return f"In use again; it stops for idleness at {when} at the earliest"
    return f"Its stop moved to {when}"


def _warn(judged: list[Judged], now: datetime) -> list[UUID]:
    if not judged:
        return []
    judged = _claim(judged, "warned_stop_at", lambda j: j.verdict.stop_at)
    if not judged:
        return []
    owners = _owners(judged)
    warnings = [_warning(j, owners, now) for j in judged]
    notice_send_many(messages=warnings, now=now)
    webhook_events_emit(
        events=[_warning_event(j, w) for j, w in zip(judged, warnings, strict=True)], now=now
    )
    return [j.agent["workspace_id"] for j in judged]


def _warning_event(j: Judged, warning: Message) -> TeamEvent:
    """The team's webhooks get the owner's warning in the same words."""
    return TeamEvent(
        team_id=j.agent["workspace__team_id"],
        event=WebhookEvent.IDLE_WARNING,
        title=warning.subject,
        text=warning.text,
        link=warning.link,
        data={
            "workspace_id": str(j.agent["workspace_id"]),
            "workspace_name": j.agent["workspace__name"],
            "owner": warning.user.username,
            "stop_at": j.verdict.stop_at.isoformat(),
            "reason": j.verdict.stop_reason.value,
        },
    )


def _warning(j: Judged, owners: dict[int, Any], now: datetime) -> Message:
    name = j.agent["workspace__name"]
    minutes = max(1, round((j.verdict.stop_at - now).total_seconds() / 60))
    why = WARN_WHY[j.verdict.stop_reason]
    return Message(
        owners[j.agent["workspace__owner_id"]],
        f"{name} stops in {minutes} min",
        f"{name} {why} and stops in about {minutes} min "
        f"({mark(j.verdict.stop_at)}). Open it and choose Keep running to keep it.",
        _link(j),
        NoticeKind.STOP_WARNING,
        f"workspace:{j.agent['workspace_id']}",
        j.policy.timezone,
    )


WARN_WHY = {
    idle.StopReason.IDLE: "is idle",
    idle.StopReason.SILENT: "sends no telemetry",
    idle.StopReason.NIGHTLY: "reaches the team's nightly stop",
    idle.StopReason.LIFETIME: "reaches its maximum lifetime",
}


def _tell_silent(judged: list[Judged], now: datetime) -> list[UUID]:
    if not judged:
        return []
    judged = _claim(judged, "silent_told_since", lambda j: j.verdict.since)
    if not judged:
        return []
    owners = _owners(judged)
    messages = [
        Message(
            owners[j.agent["workspace__owner_id"]],
            f"{j.agent['workspace__name']}: no telemetry",
            f"{j.agent['workspace__name']} has sent no telemetry since "
            f"{mark(j.verdict.since)}; it stops at "
            f"{mark(j.verdict.stop_at)} unless the agent reports again.",
            _link(j),
            NoticeKind.NO_TELEMETRY,
            f"workspace:{j.agent['workspace_id']}",
            j.policy.timezone,
        )
        for j in judged
    ]
    notice_send_many(messages=messages, now=now)
    return [j.agent["workspace_id"] for j in judged]


def _local(at: datetime, policy: idle.Policy) -> str:
    return at.astimezone(ZoneInfo(policy.timezone)).strftime("%H:%M %Z")


def stop_reason(j: Judged, show: Callable[[datetime], str] | None = None) -> str:
    """The history's sentence for an automatic stop, with its evidence; its times as
    ``show(at)`` gives them (default: in the team's zone, "13:40 CET")."""
    v, p = j.verdict, j.policy
    show = show or (lambda at: _local(at, p))
    since, until = show(v.since), show(v.stop_at)
    if v.stop_reason is idle.StopReason.IDLE:
        return (
            f"Stopped for idleness: GPU < {p.gpu_threshold}% and no interactive session for "
            f"{_minutes(v.stop_at - v.since)}, from {since} to {until}."
        )
    if v.stop_reason is idle.StopReason.SILENT:
        return f"Stopped: no telemetry for {_minutes(v.stop_at - v.since)}, since {since}."
    if v.stop_reason is idle.StopReason.NIGHTLY:
        return f"Stopped at the team's nightly stop, {until}."
    return f"Stopped at its maximum lifetime of {p.max_lifetime_hours:g} h, at {until}."


def _minutes(delta: timedelta) -> str:
    return f"{delta.total_seconds() / 60:.0f} min"


def _stop_one(j: Judged, now: datetime) -> bool:
    """``_stop``, with one workspace's failure logged and left for the next sweep: a
    workspace that cannot be stopped never holds back the stops of the others."""
    try:
        with transaction.atomic():
            return _stop(j, now)
    except Exception:
        log.exception("Idle sweep: stopping workspace %s failed", j.agent["workspace_id"])
        return False


def _stop(j: Judged, now: datetime) -> bool:
    """Stop through the same transition and task as a user's Stop; False if the workspace
    moved on meanwhile (the owner stopped it, or another sweep did)."""
    detail = {
        "rule": str(j.verdict.stop_reason),
        "since": j.verdict.since.isoformat(),
        "stop_at": j.verdict.stop_at.isoformat(),
        "gpu_threshold_percent": j.policy.gpu_threshold,
    }
    return workspace_stop_automatically(
        workspace_id=j.agent["workspace_id"],
        reason=stop_reason(j),
        detail=detail,
        now=now,
        told=stop_reason(j, show=mark),  # its times in each reader's zone
    )
