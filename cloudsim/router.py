"""Maps ARM paths (and the Retail Prices API's) to handlers. Provider, type and keyword segments
match case-insensitively.

A resource route is keyed by (provider, type, segments after the name); a child resource such as
an AKS agent pool has CHILD ("*") where its own name goes, e.g. ("agentpools", CHILD), and that
name reaches the handler as params["child"]."""

from collections.abc import Callable

from . import (
    aks,
    costs,
    disk_snapshots,
    disks,
    errors,
    extensions,
    locations,
    network,
    prices,
    reservations,
    spot,
    storage,
    vm_resize,
    vms,
)
from .cloud import Cloud
from .protocol import Request, Response

Handler = Callable[[Cloud, Request], Response]
Methods = dict[str, Handler]

COMPUTE, NETWORK = "microsoft.compute", "microsoft.network"
CONTAINER = "microsoft.containerservice"
CHILD = "*"  # Stands for a child resource's name in a route key.
COST_QUERY = ["providers", "microsoft.costmanagement", "query"]

# (provider, resource type, segments after the name) -> {HTTP method: handler}
RESOURCE_ROUTES: dict[tuple[str, str, tuple[str, ...]], Methods] = {
    (COMPUTE, "virtualmachines", ()): {
        "GET": vms.get_vm,
        "PUT": vms.put_vm,
        "PATCH": vms.patch_vm,
        "DELETE": vms.delete_vm,
    },
    (COMPUTE, "virtualmachines", ("vmsizes",)): {"GET": vm_resize.list_vm_sizes},
    (COMPUTE, "virtualmachines", ("instanceview",)): {"GET": vms.get_instance_view},
    (COMPUTE, "virtualmachines", ("start",)): {"POST": vms.start_vm},
    (COMPUTE, "virtualmachines", ("deallocate",)): {"POST": vms.deallocate_vm},
    (COMPUTE, "virtualmachines", ("poweroff",)): {"POST": vms.power_off_vm},
    (COMPUTE, "virtualmachines", ("simulateeviction",)): {"POST": spot.simulate_eviction},
    (COMPUTE, "virtualmachines", ("extensions",)): {"GET": extensions.list_extensions},
    (COMPUTE, "virtualmachines", ("extensions", CHILD)): {
        "GET": extensions.get_extension,
        "PUT": extensions.put_extension,
        "DELETE": extensions.delete_extension,
    },
    (COMPUTE, "capacityreservationgroups", ()): {
        "GET": reservations.get_group,
        "PUT": reservations.put_group,
        "DELETE": reservations.delete_group,
    },
    (COMPUTE, "capacityreservationgroups", ("capacityreservations", CHILD)): {
        "GET": reservations.get_reservation,
        "PUT": reservations.put_reservation,
        "DELETE": reservations.delete_reservation,
    },
    (COMPUTE, "disks", ()): {
        "GET": disks.get_disk,
        "PUT": disk_snapshots.put_disk,
        "PATCH": disks.patch_disk,
        "DELETE": disks.delete_disk,
    },
    (NETWORK, "networkinterfaces", ()): {
        "GET": network.get_nic,
        "PUT": network.put_nic,
        "DELETE": network.delete_nic,
    },
    (CONTAINER, "managedclusters", ()): {
        "GET": aks.get_cluster,
        "PUT": aks.put_cluster,
        "DELETE": aks.delete_cluster,
    },
    (CONTAINER, "managedclusters", ("listclusterusercredential",)): {"POST": aks.user_credentials},
    (CONTAINER, "managedclusters", ("agentpools",)): {"GET": aks.list_pools},
    (CONTAINER, "managedclusters", ("agentpools", CHILD)): {
        "GET": aks.get_pool,
        "PUT": aks.put_pool,
        "DELETE": aks.delete_pool,
    },
}
RESOURCE_ROUTES |= disk_snapshots.ROUTES
# (provider, type) -> methods on the collection in a resource group.
GROUP_COLLECTION_ROUTES: dict[tuple[str, str], Methods] = {
    (CONTAINER, "managedclusters"): {"GET": aks.list_clusters},
}
OPERATION_ROUTE: Methods = {"GET": locations.get_operation}
# Paths outside ARM: no api-version required (the Retail Prices API defaults one).
UNVERSIONED_ROUTES: dict[str, Methods] = {prices.PRICES_PATH: {"GET": prices.list_prices}}


def _match_resource(segs: list[str], low: list[str]) -> tuple[Methods, dict] | None:
    # /subscriptions/{sub}/resourceGroups/{rg}/providers/{ns}/{type}/{name}[/...]
    if len(segs) < 8 or low[0] != "subscriptions" or low[2] != "resourcegroups":
        return None
    if low[4] != "providers":
        return None
    params = {"sub": segs[1], "rg": segs[3], "name": segs[7]}
    methods = RESOURCE_ROUTES.get((low[5], low[6], tuple(low[8:])))
    if methods is None and len(segs) >= 10:
        child_key = (low[5], low[6], (low[8], CHILD, *low[10:]))
        methods, params["child"] = RESOURCE_ROUTES.get(child_key), segs[9]
    if methods is None:
        return None
    return methods, params


def _match_group_collection(segs: list[str], low: list[str]) -> tuple[Methods, dict] | None:
    # /subscriptions/{sub}/resourceGroups/{rg}/providers/{ns}/{type}
    if len(segs) != 7 or low[0] != "subscriptions" or low[2] != "resourcegroups":
        return None
    methods = GROUP_COLLECTION_ROUTES.get((low[5], low[6])) if low[4] == "providers" else None
    return (methods, {"sub": segs[1], "rg": segs[3]}) if methods else None


def _match_provider(segs: list[str], low: list[str]) -> tuple[Methods, dict] | None:
    # /subscriptions/{sub}/providers/{ns}/(skus|virtualMachines)
    # | /locations/{loc}/(usages|operations/{id})
    if len(segs) < 5 or low[0] != "subscriptions" or low[2] != "providers":
        return None
    ns, rest, params = low[3], low[4:], {"sub": segs[1]}
    if ns == COMPUTE and rest == ["skus"]:
        return {"GET": locations.list_skus}, params
    if ns == COMPUTE and rest == ["virtualmachines"]:
        return {"GET": vms.list_vms}, params
    if len(rest) < 3 or rest[0] != "locations":
        return None
    params["loc"] = segs[5]
    if ns == COMPUTE and rest[2:] == ["usages"]:
        return {"GET": locations.list_usages}, params
    if (
        ns in (COMPUTE, NETWORK, CONTAINER)
        and len(rest) == 4
        and rest[2] in ("operations", "operationresults")
    ):
        params["opid"] = segs[7]
        if rest[2] == "operationresults":
            params["monitor"] = "1"
        return OPERATION_ROUTE, params
    return None


def _match_cost_query(segs: list[str], low: list[str]) -> tuple[Methods, dict] | None:
    # /subscriptions/{sub}[/resourceGroups/{rg}]/providers/Microsoft.CostManagement/query
    if len(segs) < 5 or low[0] != "subscriptions" or low[-3:] != COST_QUERY:
        return None
    if len(segs) == 5:
        return {"POST": costs.query_usage}, {"sub": segs[1]}
    if len(segs) == 7 and low[2] == "resourcegroups":
        return {"POST": costs.query_usage}, {"sub": segs[1], "rg": segs[3]}
    return None


def needs_api_version(path: str) -> bool:
    """False for the non-ARM paths of UNVERSIONED_ROUTES."""
    return path.rstrip("/").lower() not in UNVERSIONED_ROUTES


def resolve(method: str, path: str) -> tuple[Handler, dict]:
    """(handler, path params) for an ARM or Retail Prices request; 404 InvalidResourceType or
    405 otherwise."""
    segs = [s for s in path.split("/") if s]
    low = [s.lower() for s in segs]
    unversioned = UNVERSIONED_ROUTES.get("/" + "/".join(low))
    found = (unversioned, {}) if unversioned else None
    found = found or _match_cost_query(segs, low) or storage.match(segs, low)
    found = found or _match_resource(segs, low) or _match_provider(segs, low)
    found = found or _match_group_collection(segs, low)
    if found is None:
        raise errors.invalid_resource_type(path)
    methods, params = found
    handler = methods.get(method)
    if handler is None:
        raise errors.method_not_allowed(method, path)
    return handler, params
