"""Maps ARM paths (and the Retail Prices API's) to handlers. Provider, type and keyword segments
match case-insensitively."""

from collections.abc import Callable

from . import costs, disks, errors, locations, network, prices, spot, vms
from .cloud import Cloud
from .protocol import Request, Response

Handler = Callable[[Cloud, Request], Response]
Methods = dict[str, Handler]

COMPUTE, NETWORK = "microsoft.compute", "microsoft.network"
COST_QUERY = ["providers", "microsoft.costmanagement", "query"]

# (provider, resource type, segments after the name) -> {HTTP method: handler}
RESOURCE_ROUTES: dict[tuple[str, str, tuple[str, ...]], Methods] = {
    (COMPUTE, "virtualmachines", ()): {
        "GET": vms.get_vm,
        "PUT": vms.put_vm,
        "DELETE": vms.delete_vm,
    },
    (COMPUTE, "virtualmachines", ("instanceview",)): {"GET": vms.get_instance_view},
    (COMPUTE, "virtualmachines", ("start",)): {"POST": vms.start_vm},
    (COMPUTE, "virtualmachines", ("deallocate",)): {"POST": vms.deallocate_vm},
    (COMPUTE, "virtualmachines", ("poweroff",)): {"POST": vms.power_off_vm},
    (COMPUTE, "virtualmachines", ("simulateeviction",)): {"POST": spot.simulate_eviction},
    (COMPUTE, "disks", ()): {"GET": disks.get_disk, "DELETE": disks.delete_disk},
    (NETWORK, "networkinterfaces", ()): {
        "GET": network.get_nic,
        "PUT": network.put_nic,
        "DELETE": network.delete_nic,
    },
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
    methods = RESOURCE_ROUTES.get((low[5], low[6], tuple(low[8:])))
    if methods is None:
        return None
    return methods, {"sub": segs[1], "rg": segs[3], "name": segs[7]}


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
        ns in (COMPUTE, NETWORK)
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
    found = found or _match_cost_query(segs, low)
    found = found or _match_resource(segs, low) or _match_provider(segs, low)
    if found is None:
        raise errors.invalid_resource_type(path)
    methods, params = found
    handler = methods.get(method)
    if handler is None:
        raise errors.method_not_allowed(method, path)
    return handler, params
