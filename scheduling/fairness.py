"""The fair order of the queue: each team's recent GPU-hours, decayed with a half-life
(QUEUE_HALF_LIFE_HOURS, 7 days by default, Slurm's default PriorityDecayHalfLife: a week's
use is forgotten by half, a month's by 94%), divided by 2**priority (TeamQueuePolicy).
The team with the lowest such score goes next; each workspace it is given counts at once as
one GPU-hour per GPU (QUEUE_CHARGE_HOURS), so one pass interleaves teams instead of serving
one team's whole queue. Within a team, first come first served. docs/scarce-gpus.md has a
worked example.
"""

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from fractions import Fraction
from uuid import UUID

from django.conf import settings
from django.db.models import Q

from billing.models import Meter, UsageInterval
from scheduling.models import TeamQueuePolicy
from workspaces.gpus import gpu_share

# Intervals that ended more than this many half-lives ago weigh under 0.1%: not read.
_HORIZON_HALF_LIVES = 10


def half_life() -> timedelta:
    return timedelta(hours=settings.QUEUE_HALF_LIFE_HOURS)


def decayed_hours(start: datetime, end: datetime, now: datetime, life: timedelta) -> float:
    """Hours between ``start`` and ``end``, each weighed 2**(-age/life) at ``now``: the
    integral of the decay, (life/ln 2)(2^(-(now-end)/life) - 2^(-(now-start)/life))."""
    h = life.total_seconds() / 3600
    age_end = (now - end).total_seconds() / 3600
    age_start = (now - start).total_seconds() / 3600
    return h / math.log(2) * (2 ** (-age_end / h) - 2 ** (-age_start / h))


def team_decayed_gpu_hours(*, team_ids: Iterable[int], now: datetime) -> dict[int, float]:
    """{team_id: decayed GPU-hours} from the compute meters (billing.UsageInterval): each
    interval's hours times its workspace's GPUs (a MIG slice as sevenths), open ones up to
    ``now``. One query; teams with no use are 0."""
    ids = list(team_ids)
    life = half_life()
    since = now - life * _HORIZON_HALF_LIVES
    rows = UsageInterval.objects.filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=since),
        team_id__in=ids,
        meter=Meter.COMPUTE,
        started_at__lt=now,
    ).values_list(
        "team_id",
        "started_at",
        "ended_at",
        "workspace__gpu_count",
        "workspace__gpu_slices",
        "workspace__gpu_partition",
    )
    usage = dict.fromkeys(ids, 0.0)
    for team_id, start, end, gpus, slices, partition in rows:
        share = gpu_share(gpus=gpus or 0, slices=slices or 0, partition=partition or 1)
        usage[team_id] += float(share) * decayed_hours(start, min(end or now, now), now, life)
    return usage


def team_priorities(*, team_ids: Iterable[int]) -> dict[int, int]:
    """{team_id: priority}, 0 for a team without a policy. One query."""
    ids = list(team_ids)
    found = dict(TeamQueuePolicy.objects.filter(team_id__in=ids).values_list("team_id", "priority"))
    return {t: found.get(t, 0) for t in ids}


@dataclass(frozen=True)
class Waiting:
    """One queued workspace as the order sees it."""

    workspace_id: UUID
    team_id: int
    gpu_model: str
    gpus: Fraction
    enqueued_at: datetime
    pinned_at: datetime | None = None
    held_back: bool = False
    region: str = ""
    vm_size: str = ""
    spot: bool = False
    restart: bool = False  # a stopped VM waiting to start: Azure already counts its vCPUs
    # The node pool it needs a free unit of (a MIG slice's), None when it waits for no pool
    # (its kind's PoolUse.queue_for_room is off).
    pool_id: int | None = None


def team_score(usage: float, priority: int) -> float:
    return usage / 2.0**priority


def fair_order(
    waiting: Sequence[Waiting], *, usage: dict[int, float], priority: dict[int, int]
) -> list[Waiting]:
    """The whole queue in the order it is served: pinned entries first (in pin order), then
    teams interleaved by score (lowest first; ties: the earlier head), first come first
    served within a team, and entries held back last (in the same rule among themselves).
    O(n log teams)."""
    pinned = sorted((w for w in waiting if w.pinned_at), key=lambda w: (w.pinned_at, w.enqueued_at))
    rest = [w for w in waiting if not w.pinned_at]
    front = [w for w in rest if not w.held_back]
    back = [w for w in rest if w.held_back]
    return pinned + _interleave(front, usage, priority) + _interleave(back, usage, priority)


def _interleave(
    waiting: Sequence[Waiting], usage: dict[int, float], priority: dict[int, int]
) -> list[Waiting]:
    per_team: dict[int, list[Waiting]] = {}
    for w in sorted(waiting, key=lambda w: (w.enqueued_at, str(w.workspace_id))):
        per_team.setdefault(w.team_id, []).append(w)
    charge = settings.QUEUE_CHARGE_HOURS
    scores = {t: usage.get(t, 0.0) for t in per_team}
    heap = [
        (team_score(scores[t], priority.get(t, 0)), q[0].enqueued_at, t)
        for t, q in per_team.items()
    ]
    heapq.heapify(heap)
    heads = dict.fromkeys(per_team, 0)
    order: list[Waiting] = []
    while heap:
        _score, _at, team = heapq.heappop(heap)
        item = per_team[team][heads[team]]
        order.append(item)
        heads[team] += 1
        scores[team] += float(item.gpus) * charge
        if heads[team] < len(per_team[team]):
            nxt = per_team[team][heads[team]]
            score = team_score(scores[team], priority.get(team, 0))
            heapq.heappush(heap, (score, nxt.enqueued_at, team))
    return order
