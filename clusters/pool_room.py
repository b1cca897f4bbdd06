"""How many units (MIG instances of its profile, or GPUs) each node pool has free now for a
workspace waiting in the fair queue (scheduling.room): Kubernetes' own count (allocatable on
the pool's nodes less what bound pods request, cloud.kube.pool_capacity) less what the portal
has already sent on its way there and Kubernetes has not bound yet (the workspaces in their
kind's PoolUse.waiting statuses: requested, provisioning, starting).

One read of the Kubernetes API per cluster, whatever the number of pools or entries. A
cluster that cannot be read (CloudError) falls back to the portal's own count of the pool
(clusters.selectors.pool_capacity), so a pass is never stopped by one cluster's API."""

from collections.abc import Iterable

from cloud import kube
from cloud.errors import CloudError
from clusters.backends.aks import kube_api
from clusters.models import NodePool
from clusters.selectors import PoolRow, pool_capacity


def pool_free_units(*, pool_ids: Iterable[int]) -> dict[int, int]:
    """{pool id: units free now, never below 0} for the pools of ``pool_ids`` that are not
    deleted; a pool not ready has 0. One query, and one Kubernetes read per cluster."""
    wanted = set(pool_ids)
    if not wanted:
        return {}
    clusters = NodePool.objects.filter(pk__in=wanted).values_list("cluster_id", flat=True)
    rows = [r for r in pool_capacity(cluster_ids=clusters) if r.pool.pk in wanted]
    counted: dict[int, dict[tuple[str, str], tuple[int, int]] | None] = {}
    free = {}
    for row in rows:
        cluster_id = row.pool.cluster_id
        if cluster_id not in counted:
            counted[cluster_id] = _kube_count(row.pool)
        free[row.pool.pk] = _free(row, counted[cluster_id])
    return free


def _kube_count(pool: NodePool) -> dict[tuple[str, str], tuple[int, int]] | None:
    """{(agent pool name, resource): (allocatable, requested by bound pods)} of the pool's
    cluster; None when Kubernetes cannot be asked."""
    try:
        lines = kube.pool_capacity(kube_api(pool))
    except CloudError:
        return None
    return {(c.pool, c.resource): (c.total, c.used) for c in lines}


def _free(row: PoolRow, counted: dict[tuple[str, str], tuple[int, int]] | None) -> int:
    if not row.total:  # not ready (being made, failed, being deleted): no room
        return 0
    profile = row.pool.mig
    resource = profile.resource if profile is not None else "nvidia.com/gpu"
    if counted is None:
        return max(0, row.total - row.used - row.waiting)
    total, used = counted.get((row.pool.name, resource), (0, 0))
    return max(0, total - used - row.waiting)
