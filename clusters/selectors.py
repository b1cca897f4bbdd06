"""Reads for clusters and node pools: capacity, and what a team may request on them.

Capacity here is the portal's own count (workspaces placed on each pool), read in one query
whatever the number of pools; the worker asks Kubernetes itself before saying a slice is free.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any, TypedDict

from django.core.paginator import Page, Paginator
from django.db.models import Count, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce
from django.http import QueryDict

from clusters.filters import PoolFilter
from clusters.models import AksCluster, ClusterTeam, NodePool, PoolStatus
from common.listing import DEFAULT_PAGE_SIZE
from teams.models import Team
from workspaces.backends import backends
from workspaces.gpus import SLICES_PER_GPU
from workspaces.suitability import Suits, mig_profile_suits

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


@dataclass(frozen=True)
class PoolRow:
    """One pool's capacity: ``unit`` is its MIG profile ("1g.10gb") or "gpu"; ``total``
    instances (or GPUs) its nodes have, ``used`` held by workspaces, ``waiting`` workspaces
    waiting for one."""

    pool: NodePool
    unit: str
    total: int
    used: int
    waiting: int

    @property
    def free(self) -> int:
        return max(0, self.total - self.used)

    @property
    def used_percent(self) -> int:
        return round(100 * self.used / self.total) if self.total else 0


def pool_capacity(
    *,
    cluster: AksCluster | None = None,
    cluster_ids: Iterable[int] | QuerySet[ClusterTeam, Any] | None = None,
) -> list[PoolRow]:
    """Every pool that is not deleted (of ``cluster``, or of ``cluster_ids``), with its
    capacity, in one query (ordered by cluster and name): the one definition of pool capacity
    that the clusters pages and the MIG and namespace forms use. MIG pools count their MIG
    workspaces' slices; whole-GPU pools count the GPU quota of the namespace workspaces on
    them. Only a ready pool has capacity: one still being created, failed (e.g. Azure refused
    its nodes for quota) or being deleted counts a total of 0, whatever node count it asked
    for."""
    pools = NodePool.objects.exclude(status=PoolStatus.DELETED).select_related("cluster")
    if cluster is not None:
        pools = pools.filter(cluster=cluster)
    if cluster_ids is not None:
        pools = pools.filter(cluster_id__in=cluster_ids)
    return [_row(pool) for pool in _with_capacity(pools)]


@dataclass
class PoolPage:
    """One page of the clusters page's pool table: ``filters`` (bound
    clusters.filters.PoolFilter), ``page`` (Django's Page of pools), ``rows`` (PoolRows)."""

    filters: PoolFilter
    page: "Page[WithAnnotations[NodePool, _Capacity]]"
    rows: list[PoolRow]


def pool_capacity_page(*, params: QueryDict, size: int = DEFAULT_PAGE_SIZE) -> PoolPage:
    """pool_capacity of one page of the pools that are not deleted, filtered as the query
    string ``params`` asks (clusters.filters.PoolFilter), by cluster and name. Two queries
    (the page and its count)."""
    pools = NodePool.objects.exclude(status=PoolStatus.DELETED).select_related("cluster")
    filters = PoolFilter(params, queryset=pools)
    qs = _with_capacity(filters.qs).order_by("cluster__name", "name", "pk")
    page = Paginator(qs, size).get_page(params.get("page"))
    return PoolPage(filters=filters, page=page, rows=[_row(pool) for pool in page.object_list])


class _Capacity(TypedDict):
    used: int | None
    waiting: int | None


def _with_capacity(pools: QuerySet[NodePool]) -> "QuerySet[WithAnnotations[NodePool, _Capacity]]":
    """``used`` and ``waiting``: the units the pool's workspaces hold and wait for, summed over
    the kinds, each as its backend counts them (workspaces.backends.PoolUse). A pool serves
    one kind of unit (MIG instances, or whole GPUs), so the sum is that unit's."""
    used: list[Any] = []
    waiting: list[Any] = []
    for backend in backends():
        use = backend.pool_use
        if use is None:
            continue
        field = f"workspaces__{use.units_field}" if use.units_field else "workspaces"
        aggregate = Sum if use.units_field else Count
        for statuses, into in ((use.holding, used), (use.waiting, waiting)):
            if statuses:
                only = Q(workspaces__kind=backend.kind, workspaces__status__in=statuses)
                into.append(aggregate(field, filter=only))
    return pools.annotate(used=_total(used), waiting=_total(waiting))


def _total(counts: list[Any]) -> Any:
    """The sum of the aggregates ``counts`` (each 0 where it counts nothing), or 0."""
    if not counts:
        return Value(0)
    total: Any = Coalesce(counts[0], 0)
    for count in counts[1:]:
        total = total + Coalesce(count, 0)
    return total


def _row(pool: "WithAnnotations[NodePool, _Capacity]") -> PoolRow:
    capacity = pool.capacity
    total = capacity.total if pool.status == PoolStatus.READY else 0
    return PoolRow(pool, capacity.unit, total, pool.used or 0, pool.waiting or 0)


def team_clusters(*, team: Team) -> list[ClusterTeam]:
    """The clusters ``team`` may run MIG slices and namespaces on, with its namespace."""
    return list(ClusterTeam.objects.filter(team=team).select_related("cluster"))


@dataclass(frozen=True)
class MigChoice:
    """A MIG profile a team can ask for, on the pool with the most free instances.
    price_per_hour: USD, the slice's share of the node price (slices / 7 per GPU)."""

    profile: str
    gpu_model: str
    slices: int
    pool: NodePool
    free: int
    total: int
    price_per_hour: Decimal

    @property
    def gpu_share(self) -> Fraction:
        return Fraction(self.slices, SLICES_PER_GPU)

    @property
    def memory_gib(self) -> int:
        """The instance's own GPU memory, GB, as its profile names it ("3g.40gb": 40)."""
        return int(self.profile.rsplit(".", 1)[1].removesuffix("gb"))

    @property
    def suits(self) -> Suits:
        """Training, inference or both (workspaces.suitability, the one rule)."""
        return mig_profile_suits(self.profile)


def mig_share(pool: NodePool, slices: int) -> tuple[int, int]:
    """The fraction of a node's price a MIG instance of ``slices`` sevenths costs:
    slices / (7 x GPUs per node), as (numerator, denominator)."""
    return slices, SLICES_PER_GPU * pool.gpus_per_node


def mig_choices(*, team: Team) -> list[MigChoice]:
    """MIG profiles served by ready pools on the team's clusters, one per profile and GPU
    model (the pool with most free instances), smallest first. One query."""
    clusters = ClusterTeam.objects.filter(team=team).values("cluster_id")
    best: dict[tuple[str, str], MigChoice] = {}
    for row in pool_capacity(cluster_ids=clusters):
        pool = row.pool
        if pool.status != PoolStatus.READY or not pool.gpu_instance_profile:
            continue
        profile = pool.mig
        if profile is None:  # a MIG pool always has one (gpu_instance_profile checked)
            continue
        num, den = mig_share(pool, profile.slices)
        choice = MigChoice(
            profile.name,
            pool.gpu_model,
            profile.slices,
            pool,
            row.free,
            row.total,
            (pool.price_per_hour * num / den).quantize(Decimal("0.0001")),
        )
        key = (profile.name, pool.gpu_model)
        if key not in best or choice.free > best[key].free:
            best[key] = choice
    return sorted(best.values(), key=lambda c: (c.slices, c.profile, c.gpu_model))


def namespace_pools(*, team: Team) -> list[PoolRow]:
    """Ready whole-GPU pools on the team's clusters a namespace can take GPUs of (one
    query)."""
    clusters = ClusterTeam.objects.filter(team=team).values("cluster_id")
    return [
        row
        for row in pool_capacity(cluster_ids=clusters)
        if row.pool.status == PoolStatus.READY and not row.pool.gpu_instance_profile
    ]
