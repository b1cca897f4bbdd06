"""Reads of the fair queue: a queued workspace's place and an honest estimate of when it
starts, and the whole queue as platform admins see it."""

from __future__ import annotations

import statistics
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any
from uuid import UUID

from scheduling.fairness import (
    Waiting,
    fair_order,
    half_life,
    team_decayed_gpu_hours,
    team_priorities,
)
from scheduling.models import TeamQueuePolicy
from scheduling.queue import queue_in_order, queued_waiting
from teams.models import GpuQuota, Team
from workspaces.gpus import gpu_share
from workspaces.models import Workspace, WorkspaceEvent
from workspaces.quota import holding_gpus, team_gpus_in_use
from workspaces.states import Status

# Runs of the team's GPU model within this long teach the estimate how long a run lasts.
HISTORY = timedelta(days=30)


@dataclass(frozen=True)
class QueuePlace:
    """Where a queued workspace stands: ``position`` in the whole queue (1 = next),
    ``ahead_in_team`` of the same team and GPU model before it, ``queued_total``, and the
    estimate (``starts_by``, None when there is no honest one) with ``basis``, in words."""

    position: int
    queued_total: int
    ahead_in_team: int
    starts_by: datetime | None
    basis: str


def queue_place(*, workspace: Workspace, now: datetime) -> QueuePlace | None:
    """The place of ``workspace`` in the queue; None when it is not queued."""
    order = queue_in_order(now=now)
    index = next((i for i, w in enumerate(order) if w.workspace_id == workspace.pk), None)
    if index is None:
        return None
    mine = order[index]
    same = [w for w in order[:index] if (w.team_id, w.gpu_model) == (mine.team_id, mine.gpu_model)]
    starts_by, basis = _estimate(mine, same, now)
    return QueuePlace(index + 1, len(order), len(same), starts_by, basis)


def _estimate(mine: Waiting, ahead: list[Waiting], now: datetime) -> tuple[datetime | None, str]:
    """When the team will have freed the GPUs that the entries ahead and this one need:
    each of its running workspaces of the model is expected to stop at its start plus the
    median length of the team's runs of that model in the last 30 days (or now, when it has
    run longer). No history, no estimate."""
    quota = (
        GpuQuota.objects.filter(team_id=mine.team_id, gpu_model=mine.gpu_model)
        .values_list("gpus", flat=True)
        .first()
        or 0
    )
    used = team_gpus_in_use(team_ids=[mine.team_id]).get(mine.team_id, {}).get(mine.gpu_model)
    needed = sum((w.gpus for w in ahead), mine.gpus) - (quota - (used or Fraction(0)))
    if mine.gpus > quota:
        return None, f"It needs more {mine.gpu_model} GPUs than the team's quota of {quota}."
    if needed <= 0:
        return now, "The team has the GPUs; it waits for Azure to have room, checked every pass."
    typical = _typical_run(mine.team_id, mine.gpu_model, now)
    if typical is None:
        return None, (
            f"No estimate: the team has no finished {mine.gpu_model} runs in the last 30 days "
            "to learn from."
        )
    ends = sorted(
        (max(now, since + typical), share)
        for since, share in _running(mine.team_id, mine.gpu_model)
    )
    freed = Fraction(0)
    for end, share in ends:
        freed += share
        if freed >= needed:
            hours = typical.total_seconds() / 3600
            return end, (
                f"From the team's running {mine.gpu_model} workspaces and its typical run of "
                f"{hours:.1f} h (median of the last 30 days)."
            )
    return None, "No estimate: what runs now would not free enough GPUs."


def _running(team_id: int, gpu_model: str) -> list[tuple[datetime, Fraction]]:
    """(since, GPUs) of the team's workspaces of the model that hold GPUs now."""
    rows = Workspace.objects.filter(
        holding_gpus(), team_id=team_id, gpu_model=gpu_model
    ).values_list("status_changed_at", "gpu_count", "gpu_slices", "gpu_partition")
    return [
        (since, gpu_share(gpus=gpus, slices=slices, partition=partition))
        for since, gpus, slices, partition in rows
    ]


def _typical_run(team_id: int, gpu_model: str, now: datetime) -> timedelta | None:
    """The median length of the team's runs of ``gpu_model`` that ended in the last 30 days
    (from running to the next status). One query."""
    events = WorkspaceEvent.objects.filter(
        workspace__team_id=team_id, workspace__gpu_model=gpu_model, at__gte=now - HISTORY
    ).values_list("workspace_id", "at", "from_status", "to_status")
    started: dict[UUID, datetime] = {}
    lengths = []
    for workspace_id, at, from_status, to_status in events.order_by("at", "id"):
        if to_status == Status.RUNNING:
            started[workspace_id] = at
        elif from_status == Status.RUNNING and workspace_id in started:
            lengths.append((at - started.pop(workspace_id)).total_seconds())
    if not lengths:
        return None
    return timedelta(seconds=statistics.median(lengths))


@dataclass(frozen=True)
class QueueRow:
    position: int
    workspace: Workspace
    gpus: Fraction
    team_gpu_hours: float
    priority: int
    pinned: bool
    held_back: bool


# The queue page shows the head of the queue; the rest is counted.
ROWS_SHOWN = 200


def queue_rows(*, now: datetime, teams: Collection[int] | None = None) -> list[QueueRow]:
    """The head of the queue (ROWS_SHOWN rows), or of ``teams``' part of it, in the order it
    is served, with each team's decayed GPU-hours and priority. Six queries."""
    waiting = queued_waiting(now=now)
    team_ids = {w.team_id for w in waiting}
    usage = team_decayed_gpu_hours(team_ids=team_ids, now=now)
    priority = team_priorities(team_ids=team_ids)
    order = [
        (i + 1, w)
        for i, w in enumerate(fair_order(waiting, usage=usage, priority=priority))
        if teams is None or w.team_id in teams
    ][:ROWS_SHOWN]
    workspaces = Workspace.objects.select_related("team", "owner").in_bulk(
        [w.workspace_id for _i, w in order]
    )
    return [
        QueueRow(
            i,
            workspaces[w.workspace_id],
            w.gpus,
            usage.get(w.team_id, 0.0),
            priority.get(w.team_id, 0),
            w.pinned_at is not None,
            w.held_back,
        )
        for i, w in order
        if w.workspace_id in workspaces
    ]


def team_queue_summary(*, team: Team, now: datetime) -> dict[str, Any]:
    """What a team's queue page shows: its rows, decayed GPU-hours, priority and limits."""
    policy = TeamQueuePolicy.objects.filter(team=team).first() or TeamQueuePolicy(team=team)
    return {
        "rows": queue_rows(now=now, teams={team.pk}),
        "gpu_hours": team_decayed_gpu_hours(team_ids=[team.pk], now=now)[team.pk],
        "policy": policy,
        "half_life_hours": half_life().total_seconds() / 3600,
    }
