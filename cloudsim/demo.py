"""The quota of the demo subscription (`make run`, CLOUDSIM_DEMO_QUOTA=1), as Azure support would
grant it for a demo: enough vCPUs in eastus for the demo AKS cluster's node pools (seed_demo's
DEMO_POOLS) plus VMs requested beside them. Azure's defaults (cloud.DEFAULT_FAMILY_LIMIT, 96 per
family) do not even fit those pools: 2 + 1 NC24ads_A100_v4 MIG nodes (72 vCPUs) and an
NC96ads_A100_v4 node (96 vCPUs) are 168 vCPUs of one family.
"""

from .cloud import Cloud
from .skus import normalize_location

DEMO_LOCATION = "eastus"
# (quota family as the usages API names it, vCPUs). A100 family: the pools' 168 vCPUs plus 96
# for VMs (four NC24ads_A100_v4, or one NC96ads_A100_v4). "cores" (Total Regional vCPUs): the
# system pool (4), the A100 family's 264 and a full default family (96) of other GPU VMs.
DEMO_QUOTA = {
    "standardNCADSA100v4Family": 264,
    "cores": 500,
}


def apply_demo_quota(cloud: Cloud) -> None:
    """Give the emulated subscription the demo quota (DEMO_QUOTA in DEMO_LOCATION)."""
    with cloud.lock:
        for family, limit in DEMO_QUOTA.items():
            cloud.quotas[(normalize_location(DEMO_LOCATION), family.lower())] = limit
