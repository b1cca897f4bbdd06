"""The fair queue's pass: which queued workspaces start now, in the fair order
(scheduling.fairness), and the ways into the queue other than a request (a stopped VM that
cannot start now).

Never started twice: a workspace leaves the queue only by a compare-and-set from queued
(states.transition), and the team's quota is checked again holding the team row in that
transaction, as every request, start and retry does (workspaces.quota); a worker that dies
after the commit leaves a requested or starting workspace, which the reconcile sweep carries
on (workspaces.chains), never a second start. Passes may run at once (a beat tick and a
freed GPU): each admits only what it moved.

Errors raised: WorkspaceActionError (queue_start: not stopped), ActionNotAllowed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import OuterRef, Subquery

from common.permissions import access_require
from notifications.notice_text import mark
from scheduling.fairness import Waiting, fair_order, team_decayed_gpu_hours, team_priorities
from scheduling.models import QueueEntry
from scheduling.quiet import quiet_until
from scheduling.room import Room
from teams.models import Team
from workspaces import selectors, states, telemetry
from workspaces.actions import NOT_YOURS
from workspaces.backends import backend_for, backends
from workspaces.gpus import gpu_share
from workspaces.models import Workspace, WorkspaceEvent
from workspaces.requests import WorkspaceActionError
from workspaces.states import HOLDS_GPUS, Status
from workspaces.transitions import transition_and_queue
from workspaces.withdrawals import queued_from_stopped


def queued_waiting(*, now: datetime) -> list[Waiting]:
    """Every queued workspace with its team, GPUs, a platform admin's move, whether it
    waits to start again (it joined from stopped) and the node pool it waits for a free unit
    of (its kind's PoolUse.queue_for_room). One query."""
    joined_from = (
        WorkspaceEvent.objects.filter(workspace=OuterRef("pk"), to_status=Status.QUEUED)
        .order_by("-at", "-id")
        .values("from_status")[:1]
    )
    rows = (
        Workspace.objects.filter(status=Status.QUEUED)
        .annotate(joined_from=Subquery(joined_from))
        .values_list(
            "pk",
            "team_id",
            "gpu_model",
            "gpu_count",
            "gpu_slices",
            "gpu_partition",
            "status_changed_at",
            "queue_entry__pinned_at",
            "queue_entry__held_back",
            "region",
            "vm_size",
            "spot",
            "joined_from",
            "kind",
            "node_pool_id",
        )
    )
    # A few sizes among thousands of rows: each share is worked out once.
    share = functools.cache(lambda g, s, p: gpu_share(gpus=g, slices=s, partition=p))
    pooled = {b.kind for b in backends() if b.pool_use is not None and b.pool_use.queue_for_room}
    return [
        Waiting(
            row[0],
            row[1],
            row[2],
            share(row[3], row[4], row[5]),
            row[6],
            row[7],
            bool(row[8]),
            row[9],
            row[10],
            row[11],
            row[12] == Status.STOPPED,
            row[14] if row[13] in pooled else None,
        )
        for row in rows
    ]


def queue_in_order(*, now: datetime) -> list[Waiting]:
    """The whole queue in the order it is served (fairness.fair_order). Four queries."""
    waiting = queued_waiting(now=now)
    teams = {w.team_id for w in waiting}
    usage = team_decayed_gpu_hours(team_ids=teams, now=now)
    return fair_order(waiting, usage=usage, priority=team_priorities(team_ids=teams))


@dataclass
class PassResult:
    """What one pass did: the workspaces it started, in order, and how many it looked at."""

    admitted: list[UUID] = field(default_factory=list)
    looked_at: int = 0


def queue_pass(*, now: datetime) -> PassResult:
    """Start what has room, in the fair order: each entry whose team has the GPUs left
    (quota less what it holds) and, for a VM size, Azure's quota left in its region, or, for
    a MIG slice, a free slice on its node pool (Room) is moved out of the queue under the
    team row's lock. An entry that does not fit blocks the ones behind it that need the same
    (the team's GPU model, the region's quota family, or the pool), so a large request is not
    overtaken for ever by small ones."""
    result = PassResult()
    order = queue_in_order(now=now)
    result.looked_at = len(order)
    if not order:
        return result
    room = Room.load(order, now=now)
    quiet = quiet_until(team_ids={w.team_id for w in order}, now=now)
    _say_quiet(quiet, now)
    later = _retry_later(order, now)
    for waiting in order:
        if waiting.team_id in quiet or waiting.workspace_id in later or not room.fits(waiting):
            continue
        if queue_admit(workspace_id=waiting.workspace_id, now=now):
            result.admitted.append(waiting.workspace_id)
            room.take(waiting)
        else:
            room.block_team(waiting)
    return result


def _retry_later(order: list[Waiting], now: datetime) -> set[UUID]:
    """The entries Azure refused to start for lack of room less than QUEUE_START_RETRY_SECONDS
    ago (QueueEntry.retry_at): skipped by this pass. One query."""
    return set(
        QueueEntry.objects.filter(
            workspace_id__in=[w.workspace_id for w in order], retry_at__gt=now
        ).values_list("workspace_id", flat=True)
    )


def queue_retry_later(*, workspace_id: UUID | str, expected: str, to: str, now: datetime) -> None:
    """workspaces.hooks transition callback: a start Azure refused for lack of room (starting
    -> queued, workspaces.backends.vm_placement.vm_start_refused) is not tried again for
    QUEUE_START_RETRY_SECONDS, so a full region is not asked again at every pass."""
    if (expected, to) != (Status.STARTING, Status.QUEUED):
        return
    defaults: dict[str, object] = {
        "retry_at": now + timedelta(seconds=settings.QUEUE_START_RETRY_SECONDS)
    }
    started = (
        WorkspaceEvent.objects.filter(workspace_id=workspace_id, to_status=Status.STARTING)
        .order_by("-at", "-id")
        .values_list("from_status", flat=True)
        .first()
    )
    if started == Status.STOPPED:  # a person's Start (not the queue's for a schedule)
        defaults["scheduled"] = False
    QueueEntry.objects.update_or_create(workspace_id=workspace_id, defaults=defaults)


def _say_quiet(quiet: dict[int, datetime], now: datetime) -> None:
    """The queued workspaces of teams in their quiet hours say so (one UPDATE per team)."""
    for team_id, until in quiet.items():
        waiting = f"The team's quiet hours: nothing of it starts until {mark(until)}."
        Workspace.objects.filter(team_id=team_id, status=Status.QUEUED).exclude(
            waiting_reason=waiting
        ).update(waiting_reason=waiting)


def queue_admit(*, workspace_id: UUID, now: datetime) -> bool:
    """Move one queued workspace out of the queue if its team has room now (GPU quota and
    budget, checked holding the team row): requested to be created, or starting for a
    stopped VM. False when it has no room or left the queue meanwhile."""
    with transaction.atomic():
        workspace = Workspace.objects.select_related("owner").get(pk=workspace_id)
        team = Team.objects.select_for_update().get(pk=workspace.team_id)
        if not Workspace.objects.filter(pk=workspace_id, status=Status.QUEUED).exists():
            return False
        if workspace.team_id in quiet_until(team_ids=[workspace.team_id], now=now):
            _say_quiet(quiet_until(team_ids=[workspace.team_id], now=now), now)
            return False
        check = selectors.quota_check(
            team=team,
            user=workspace.owner,
            gpu_model=workspace.gpu_model,
            gpus=backend_for(workspace.kind).gpu_share(workspace),
            price_per_hour=workspace.price_per_hour,
            now=now,
        )
        if check.over_to_start:
            waiting = " ".join(check.over_to_start)
            Workspace.objects.filter(pk=workspace_id, status=Status.QUEUED).exclude(
                waiting_reason=waiting
            ).update(waiting_reason=waiting)
            return False
        return _leave_queue(workspace, now)


def _leave_queue(workspace: Workspace, now: datetime) -> bool:
    start = queued_from_stopped(workspace_id=workspace.pk)
    to = Status.STARTING if start else Status.REQUESTED
    fields = {"evicted_at": None} if start else {}
    moved = transition_and_queue(
        workspace_id=workspace.pk,
        expected=Status.QUEUED,
        to=to,
        now=now,
        reason="Its turn in the queue came and there is room: "
        + ("starting." if start else "creating it."),
        waiting_reason="",
        **fields,
    )
    if not moved:
        return False
    if start:
        telemetry.agent_activity_reset(workspace_id=workspace.pk)
    QueueEntry.objects.update_or_create(
        workspace_id=workspace.pk,
        defaults={
            "admitted_at": now,
            "claim_by": None,
            "claimed_at": None,
            "pinned_at": None,
            "retry_at": None,
        },
    )  # "scheduled" is kept: a scheduled start has nothing to claim
    return True


def queue_start(*, user: User, workspace: Workspace, now: datetime) -> None:
    """Put a stopped workspace in the queue to start when its turn comes (its owner, a team
    admin or a platform admin). The next pass starts it at once when there is room.
    Raises WorkspaceActionError (not stopped), ActionNotAllowed."""
    access_require(user=user, perm="workspaces.act_on_workspace", obj=workspace, message=NOT_YOURS)
    queued = states.transition(
        workspace_id=workspace.pk,
        expected=Status.STOPPED,
        to=Status.QUEUED,
        now=now,
        actor=user,
        reason="Queued to start when there is room",
    )
    if not queued:
        raise WorkspaceActionError("Only a stopped workspace can join the queue to start.")
    QueueEntry.objects.filter(workspace_id=workspace.pk).update(scheduled=False)
    queue_pass_soon()


def queue_pass_soon() -> None:
    """Run a pass once the caller's transaction commits (a Celery task; at once in tests)."""
    # A real cycle: scheduling.tasks imports this module.
    from scheduling.tasks import run_queue_pass

    transaction.on_commit(lambda: run_queue_pass.delay())


# Leaving these statuses frees GPUs against a quota, or Azure's quota in a region.
_FREES = HOLDS_GPUS | {Status.QUEUED}


def queue_pass_when_freed(
    *, workspace_id: UUID | str, expected: str, to: str, now: datetime
) -> None:
    """workspaces.hooks transition callback: a workspace that stopped holding GPUs (stopped,
    deleted, failed, back in the queue) or joined the queue is a reason to look at the queue
    now rather than at the next tick."""
    joined = to == Status.QUEUED
    freed = expected in HOLDS_GPUS and to not in HOLDS_GPUS
    if joined or freed:
        queue_pass_soon()


def queue_counts(*, now: datetime) -> dict[tuple[str, str], int]:
    """{(gpu_model, region): queued workspaces}. One query."""
    rows = Workspace.objects.filter(status=Status.QUEUED).values_list("gpu_model", "region")
    counts: dict[tuple[str, str], int] = {}
    for key in rows:
        counts[key] = counts.get(key, 0) + 1
    return counts
