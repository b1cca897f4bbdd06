"""What is free now, per GPU model and region, for one team: the GPUs its quota leaves, what
Azure's regional quota leaves for each offered size (workspaces.azure.azure_headroom, cached
AZURE_HEADROOM_CACHE_SECONDS), the free MIG instances or GPUs of its clusters' pools, how
many wait in the queue, and the next bookings of any team (bookings/: they hold Azure's
capacity).
The board page and the request form show it; GET /api/v1/free-now returns it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction

from bookings.models import LIVE, Booking
from clusters.selectors import PoolRow, pool_capacity, team_clusters
from scheduling.queue import queue_counts
from teams.models import GpuQuota, Team
from workspaces.azure import azure_headroom
from workspaces.quota import team_gpus_in_use
from workspaces.selectors import offering_list

# The board shows this many of the next bookings per GPU model and region.
NEXT_BOOKINGS = 3


@dataclass(frozen=True)
class SizeRoom:
    """One offered VM size: ``gpus`` each, how many more VMs Azure's quota allows
    (``azure_vms_left``; None with ``azure_problem`` when Azure gives no number) and how many
    the team can start now (``can_start``: the lower of that and its quota's)."""

    vm_size: str
    gpus: Fraction
    azure_vms_left: int | None
    azure_problem: str
    can_start: int


@dataclass
class BoardRow:
    gpu_model: str
    region: str
    team_quota: int
    team_gpus_left: Fraction
    queued: int
    sizes: list[SizeRoom] = field(default_factory=list)
    pools: list[PoolRow] = field(default_factory=list)
    bookings: list[Booking] = field(default_factory=list)  # the next few, any team's


def free_now(*, team: Team, now: datetime) -> list[BoardRow]:
    """The board of ``team``, one row per GPU model and region it can have (offered VM
    sizes, its clusters' pools), by model then region. Six queries, and two ARM reads per
    size and region not cached."""
    quotas = dict(GpuQuota.objects.filter(team=team).values_list("gpu_model", "gpus"))
    used = team_gpus_in_use(team_ids=[team.pk]).get(team.pk, {})
    queued = queue_counts(now=now)
    rows: dict[tuple[str, str], BoardRow] = {}

    def row(model: str, region: str) -> BoardRow:
        if (model, region) not in rows:
            left = max(Fraction(0), quotas.get(model, 0) - used.get(model, Fraction(0)))
            count = queued.get((model, region), 0)
            rows[(model, region)] = BoardRow(model, region, quotas.get(model, 0), left, count)
        return rows[(model, region)]

    for offering in offering_list():
        line = row(offering.gpu_model, offering.region)
        line.sizes.append(_size_room(offering.vm_size, offering.region, offering.gpu_share, line))
    clusters = [c.cluster_id for c in team_clusters(team=team)]
    for pool in pool_capacity(cluster_ids=clusters) if clusters else []:
        row(pool.pool.gpu_model, pool.pool.cluster.location).pools.append(pool)
    upcoming = Booking.objects.filter(state__in=LIVE, ends_at__gt=now).select_related("team")
    for booking in upcoming.order_by("starts_at"):
        line = row(booking.gpu_model, booking.region)
        if len(line.bookings) < NEXT_BOOKINGS:
            line.bookings.append(booking)
    return [rows[key] for key in sorted(rows)]


def _size_room(vm_size: str, region: str, gpus: Fraction, line: BoardRow) -> SizeRoom:
    headroom = azure_headroom(region=region, vm_size=vm_size)
    by_quota = int(line.team_gpus_left // gpus) if gpus else 0
    azure = headroom.vms_left
    can_start = by_quota if azure is None else min(by_quota, azure)
    return SizeRoom(vm_size, gpus, azure, headroom.problem, can_start)
