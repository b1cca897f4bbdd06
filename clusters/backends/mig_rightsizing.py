"""What a workspace could move to as a MIG slice, for right-sizing (billing.recommendations):
the MIG profiles of the ready MIG pools on the clusters each team may use, at the slice's
share of the node price (clusters.selectors.mig_share)."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from clusters.models import ClusterTeam, NodePool, PoolStatus
from clusters.selectors import mig_share
from workspaces.backends import RightsizeOption, RightsizeOptions

# A MIG profile's memory is its name's GB (10^9 bytes): at or under what NVML reports
# (1g.10gb: 9,536 MiB against NVML's 9,728 on an A100 80GB), so a slice is never overstated.
MIB_PER_GB = Decimal(10**9) / Decimal(2**20)


def mig_rightsizing_options(*, kind: str, regions: set[str]) -> RightsizeOptions:
    """{(team id, region): the cheapest option per MIG profile and GPU model} of the ready MIG
    pools on each team's clusters in ``regions``, as options of ``kind``. Two queries."""
    pools = (
        NodePool.objects.filter(status=PoolStatus.READY, cluster__location__in=regions)
        .exclude(gpu_instance_profile="")
        .select_related("cluster")
    )
    per_cluster: defaultdict[int, list[RightsizeOption]] = defaultdict(list)
    region_of: dict[int, str] = {}
    for pool in pools:
        per_cluster[pool.cluster_id].append(mig_option(pool, kind=kind))
        region_of[pool.cluster_id] = pool.cluster.location
    best: dict[tuple[int | None, str], dict[tuple[str, str], RightsizeOption]] = defaultdict(dict)
    access = ClusterTeam.objects.filter(cluster_id__in=list(per_cluster))
    for team_id, cluster_id in access.values_list("team_id", "cluster_id"):
        found = best[(team_id, region_of[cluster_id])]
        for option in per_cluster[cluster_id]:
            key = (option.name, option.gpu_model)
            if key not in found or option.price_per_hour < found[key].price_per_hour:
                found[key] = option
    return {key: list(found.values()) for key, found in best.items()}


def mig_option(pool: NodePool, *, kind: str) -> RightsizeOption:
    """The MIG profile a ready MIG pool serves as an option: one device of the profile's
    memory (MIB_PER_GB per GB of its name), at the slice's share of the node's USD/hour."""
    profile = pool.mig
    assert profile is not None
    gigabytes = int(profile.name.split(".")[1].removesuffix("gb"))
    num, den = mig_share(pool, profile.slices)
    return RightsizeOption(
        kind=kind,
        name=profile.name,
        mig_profile=profile.name,
        gpu_model=pool.gpu_model,
        devices=1,
        memory_mib=int(gigabytes * MIB_PER_GB),
        price_per_hour=(pool.price_per_hour * num / den).quantize(Decimal("0.0001")),
    )
