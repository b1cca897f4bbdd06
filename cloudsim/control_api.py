"""The /_sim control API: JSON in and out, no api-version.

POST /_sim/reset                  {}                                  -> {"status": "ok"}
POST /_sim/faults                 {"op", "kind", "count"=1, "retry_after"=0}
POST /_sim/capacity               {"location", "vm_size", "available"}  (free slots from now)
POST /_sim/quota                  {"location", "family", "limit"}      ("cores" = regional,
                                  "lowPriorityCores" = the regional Spot quota, default 350)
POST /_sim/skus/restrict          {"location", "vm_size", "restricted"=true}
POST /_sim/quirks                 {"display_locations"?, "no_async_header_rate"?, "seed"?}
                                  (Azure answers the emulator gives only when asked: quirks.py)
GET  /_sim/quirks                 -> those settings
POST /_sim/latency                {"seconds"?, "retry_after"?}
POST /_sim/extensions             {"seconds"?, "drivers_required"?, "setup_seconds"?}  (how long
                                  a VM extension takes to install, default 4 x latency; whether a
                                  VM's agent sees GPUs only once a driver is there:
                                  cloudsim/extensions.py; how long an environment layer's setup
                                  takes in the guest, default 2 x latency: cloudsim/guest_setup.py)
POST /_sim/hang                   {"seconds"}  (every ARM and Kubernetes API request from now
                                  on waits that long before it is answered, as a hung Azure
                                  would; 0 lifts it and answers the waiting ones at once)
POST /_sim/vms/evict              {"vm", "resource_group"?}            (evict a running Spot VM)
POST /_sim/aks/clusters           {"subscription", "resource_group", "name", "location"="eastus"}
                                  (an AKS cluster that already exists: Succeeded, with a System
                                  pool "nodepool1" of one Standard_D4ds_v5) -> the ManagedCluster
GET  /_sim/state                  -> see Cloud.snapshot()
GET  /_sim/requests               -> {"requests": [{"t", "method", "path", "status",
                                      "correlation_id"}]}
POST /_sim/agents/profile         {"vm", "profile", "spike_every"?}   (VM created or not yet;
                                  "vm" may name a pod's StatefulSet, e.g. "ws-<12 hex>")
POST /_sim/agents/default         {"profile"}                          (VMs without their own)
POST /_sim/prices                 {"items": [...], "page_size"?}       (replace the price book)
POST /_sim/prices/add             {"items": [...]}                     (append, e.g. a price change)
GET  /_sim/prices                 -> {"items": [...], "page_size"}
POST /_sim/costs                  {"tag"?, "multiplier"?, "extra_per_day"?, "page_size"?}
                                  (skew Azure's actual cost of one workspace tag value, "" for
                                  untagged, or of every value without the tag; rows per page)
GET  /_sim/costs                  -> {"usages": [...], "skew": {...}, "page_size"}
GET  /_sim/agents                 -> {"agents": [{"vm", "workspace", "profile", "active", "posts",
                                      "accepted", "failures", "last_status", "last_error",
                                      "last_post_at"}]}   (VMs and pods; never a token)
GET  /_sim/k8s                    -> {"clusters": [{"key", "name", "server", "resourceVersion",
                                      "pools", "namespaces", "nodes": [{"name", "pool",
                                      "allocatable"}], "pods": [{"namespace", "name", "phase",
                                      "node", "ready", "reason", "message", "requests"}]}]}
POST /_sim/k8s/clusters           {"subscription", "resource_group", "name", "pools"=[{"name",
                                   "vm_size", "count", "vcpus", "memory_gb", "gpus", "gpu_model",
                                   "gpu_instance_profile"="", "taints"=[], "labels"={}}]}
                                  -> {"key", "server"}  (the AKS side does this for real clusters)
POST /_sim/k8s/pools/drop         {"subscription", "resource_group", "name", "pool"}
POST /_sim/k8s/namespaces         {"cluster", "name", "labels"={}}   (made outside the portal)
POST /_sim/storage/(mounts|read|write)   a workspace's view of its NFS mounts
                                  (cloudsim/storage_mounts.py)
/_sim/entra/...                   the emulated Entra ID tenant (cloudsim/entra/control.py)

Agent profiles: busy, batch (busy GPUs, nobody logged in), idle, spiky (idle with a 100 %
sample every spike_every=10), silent, tab_open (idle, a JupyterLab tab left open), training
(busy GPUs and a busy Jupyter kernel, nobody logged in).
Price items are Retail Prices API items, stored and served as given (see prices.py); faults for
op "price.list" may be throttle, server_error or unavailable, and those for "cost.query" (the
Cost Management Query API, costs.py) these or authorization_failed. Cost knobs: the actual cost
of a tag value on each day becomes cost x multiplier + extra_per_day (USD, numbers or strings).
"""

import time
from decimal import Decimal, InvalidOperation

from . import (
    aks,
    costs,
    extensions,
    guest_setup,
    prices,
    quirks,
    spot,
    storage_mounts,
    storage_state,
)
from .agent_protocol import PROFILES
from .cloud import ASYNC_KINDS, FAULT_OPS, SYNC_KINDS, VM_SIZE_KINDS, Cloud
from .entra import control as entra_control
from .errors import ArmError
from .kube import control as kube_control
from .protocol import Request, Response
from .skus import normalize_location

# Ops with a VM size at hand.
SIZED_OPS = frozenset(
    {"vm.create", "vm.update", "vm.start", "aks.pool.create", "reservation.create"}
)


def _bad(message: str) -> ArmError:
    return ArmError(400, "InvalidControlRequest", message)


_REQUIRED = object()


def _field(body: dict, name: str, kind: type | tuple, default=_REQUIRED):
    """body[name] checked against `kind` (bools only where kind is bool); 400 if wrong."""
    value = body.get(name)
    if value is None:
        if default is _REQUIRED:
            raise _bad(f"'{name}' is required.")
        return default
    if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
        raise _bad(f"'{name}' has the wrong type.")
    return value


def _reset(cloud: Cloud, body: dict) -> Response:
    cloud.reset()
    return Response(200, {"status": "ok"})


def _faults(cloud: Cloud, body: dict) -> Response:
    op, kind = _field(body, "op", str), _field(body, "kind", str)
    count = _field(body, "count", int, default=1)
    retry_after = _field(body, "retry_after", int, default=0)
    if op not in FAULT_OPS:
        raise _bad(f"Unknown op '{op}'. Known: {', '.join(sorted(FAULT_OPS))}.")
    known = SYNC_KINDS | ASYNC_KINDS | quirks.FAULT_KINDS | set(extensions.EXIT_KINDS)
    known |= storage_state.FAULT_KINDS | guest_setup.FAULT_KINDS
    if kind in extensions.EXIT_KINDS and op != "vm.extension.create":
        raise _bad(f"Kind '{kind}' applies only to vm.extension.create.")
    if kind not in known:
        raise _bad(f"Unknown kind '{kind}'. Known: {', '.join(sorted(known))}.")
    if kind in quirks.FAULT_KINDS and op not in quirks.CREATE_OPS:
        raise _bad(f"Kind '{kind}' applies only to {', '.join(sorted(quirks.CREATE_OPS))}.")
    if kind in ASYNC_KINDS | VM_SIZE_KINDS and op not in SIZED_OPS:
        raise _bad(f"Kind '{kind}' applies only to {', '.join(sorted(SIZED_OPS))}.")
    for module in (prices, costs, entra_control, guest_setup, storage_state):
        ops = getattr(module, "FAULT_OPS", {getattr(module, "FAULT_OP", "")})
        if op in ops and kind not in module.FAULT_KINDS:
            raise _bad(f"Op '{op}' takes only {', '.join(sorted(module.FAULT_KINDS))}.")
    if count < 1 or retry_after < 0:
        raise _bad("'count' must be at least 1 and 'retry_after' not negative.")
    cloud.add_fault(op, kind, count, retry_after)
    return Response(200, {"op": op, "kind": kind, "count": count, "retry_after": retry_after})


def _capacity(cloud: Cloud, body: dict) -> Response:
    location, size = _field(body, "location", str), _field(body, "vm_size", str)
    available = _field(body, "available", int)
    cloud.set_available(location, size, available)
    answer = {"location": normalize_location(location), "vm_size": size}
    return Response(200, {**answer, "available": cloud.free_capacity(location, size)})


def _quota(cloud: Cloud, body: dict) -> Response:
    location, family = _field(body, "location", str), _field(body, "family", str)
    limit = _field(body, "limit", int)
    cloud.quotas[(normalize_location(location), family.lower())] = limit
    return Response(
        200, {"location": normalize_location(location), "family": family, "limit": limit}
    )


def _restrict(cloud: Cloud, body: dict) -> Response:
    location, size = _field(body, "location", str), _field(body, "vm_size", str)
    restricted = _field(body, "restricted", bool, default=True)
    key = (normalize_location(location), size.lower())
    if restricted:
        cloud.restricted.add(key)
    else:
        cloud.restricted.discard(key)
    return Response(200, {"location": key[0], "vm_size": size, "restricted": restricted})


def _latency(cloud: Cloud, body: dict) -> Response:
    seconds = _field(body, "seconds", (int, float), default=None)
    retry_after = _field(body, "retry_after", int, default=None)
    if (seconds is not None and seconds < 0) or (retry_after is not None and retry_after < 0):
        raise _bad("'seconds' and 'retry_after' must not be negative.")
    if seconds is not None:
        cloud.latency = float(seconds)  # Applies to operations started from now on.
    if retry_after is not None:
        cloud.retry_after = retry_after
    return Response(200, {"seconds": cloud.latency, "retry_after": cloud.retry_after})


def _extensions(cloud: Cloud, body: dict) -> Response:
    seconds = _field(body, "seconds", (int, float), default=None)
    required = _field(body, "drivers_required", bool, default=None)
    setup = _field(body, "setup_seconds", (int, float), default=None)
    if (seconds is not None and seconds < 0) or (setup is not None and setup < 0):
        raise _bad("'seconds' and 'setup_seconds' must not be negative.")
    play = cloud.extension_play
    if seconds is not None:
        play.seconds = float(seconds)  # Applies to installs started from now on.
    if required is not None:
        play.drivers_required = required
    if setup is not None:
        play.setup_seconds = float(setup)
    shown = {"drivers_required": play.drivers_required, "setup_seconds": play.setup_seconds}
    return Response(200, {"seconds": play.seconds, **shown})


def _hang(cloud: Cloud, body: dict) -> Response:
    seconds = _field(body, "seconds", (int, float))
    if not 0 <= seconds <= 3600:
        raise _bad("'seconds' must be from 0 to 3600.")
    cloud.hang_seconds = float(seconds)
    if seconds:
        cloud.answering.clear()
    else:
        cloud.answering.set()
    return Response(200, {"seconds": cloud.hang_seconds})


def _evict(cloud: Cloud, body: dict) -> Response:
    name, group = _field(body, "vm", str), _field(body, "resource_group", str, default=None)
    found = [
        vm
        for vm in cloud.vms.values()
        if vm.name.lower() == name.lower()
        and (group is None or vm.resource_group.lower() == group.lower())
    ]
    if not found:
        raise ArmError(404, "ResourceNotFound", f"No virtual machine named '{name}'.")
    if len(found) > 1:
        raise _bad(f"Several VMs are named '{name}'; say which 'resource_group'.")
    outcome = spot.evict(cloud, found[0])
    return Response(200, {"vm": found[0].name, "id": found[0].id, "outcome": outcome})


def _aks_cluster(cloud: Cloud, body: dict) -> Response:
    names = [_field(body, key, str) for key in ("subscription", "resource_group", "name")]
    location = _field(body, "location", str, default="eastus")
    if not all(n.strip() and "/" not in n for n in names) or not location.strip():
        raise _bad("'subscription', 'resource_group', 'name' and 'location' must be plain names.")
    return Response(201, aks.create_cluster_now(cloud, *names, location))


def _profile(body: dict) -> str:
    profile = _field(body, "profile", str)
    if profile not in PROFILES:
        raise _bad(f"Unknown profile '{profile}'. Known: {', '.join(PROFILES)}.")
    return profile


def _agent_profile(cloud: Cloud, body: dict) -> Response:
    vm, profile = _field(body, "vm", str), _profile(body)
    spike_every = _field(body, "spike_every", int, default=None)
    if not vm.strip():
        raise _bad("'vm' must not be empty.")
    if spike_every is not None and spike_every < 1:
        raise _bad("'spike_every' must be at least 1.")
    cloud.agents.set_profile(vm, profile, spike_every)
    return Response(200, {"vm": vm, "profile": profile, "spike_every": spike_every})


def _agent_default(cloud: Cloud, body: dict) -> Response:
    cloud.agents.set_default(_profile(body))
    return Response(200, {"profile": cloud.agents.default_profile})


def _agents(cloud: Cloud, body: dict) -> Response:
    return Response(200, {"agents": cloud.agents.listing(cloud)})


def _price_items(body: dict) -> list:
    items = body.get("items")
    if not isinstance(items, list):
        raise _bad("'items' must be a list of Retail Prices API items.")
    return items


def _set_prices(cloud: Cloud, body: dict) -> Response:
    items = _price_items(body)
    page_size = _field(body, "page_size", int, default=cloud.price_page_size)
    if page_size < 1:
        raise _bad("'page_size' must be at least 1.")
    cloud.prices, cloud.price_page_size = items, page_size
    return Response(200, {"count": len(cloud.prices), "page_size": page_size})


def _add_prices(cloud: Cloud, body: dict) -> Response:
    cloud.prices = cloud.prices + _price_items(body)
    return Response(200, {"count": len(cloud.prices), "page_size": cloud.price_page_size})


def _get_prices(cloud: Cloud, body: dict) -> Response:
    return Response(200, {"items": cloud.prices, "page_size": cloud.price_page_size})


def _money(body: dict, name: str, default: Decimal) -> Decimal:
    value = _field(body, name, (int, float, str), default=None)
    if value is None:
        return default
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        raise _bad(f"'{name}' is not a number.") from None
    if not number.is_finite():
        raise _bad(f"'{name}' is not a number.")
    return number


def _set_costs(cloud: Cloud, body: dict) -> Response:
    tag = _field(body, "tag", str, default="*")
    page_size = _field(body, "page_size", int, default=cloud.cost_page_size)
    if page_size < 1:
        raise _bad("'page_size' must be at least 1.")
    knob = dict(cloud.cost_skew.get(tag, {}))
    knob["multiplier"] = _money(body, "multiplier", knob.get("multiplier", Decimal(1)))
    knob["extra_per_day"] = _money(body, "extra_per_day", knob.get("extra_per_day", Decimal(0)))
    cloud.cost_skew[tag], cloud.cost_page_size = knob, page_size
    return _get_costs(cloud, body)


def _get_costs(cloud: Cloud, body: dict) -> Response:
    skew = {
        tag: {name: str(value) for name, value in knob.items()}
        for tag, knob in cloud.cost_skew.items()
    }
    usages = [usage.state() for usage in cloud.usages]
    return Response(200, {"usages": usages, "skew": skew, "page_size": cloud.cost_page_size})


def _k8s_state(cloud: Cloud, body: dict) -> Response:
    return Response(200, kube_control.state(cloud, time.time()))


def _k8s_cluster(cloud: Cloud, body: dict) -> Response:
    return Response(200, kube_control.ensure(cloud, body))


def _k8s_namespace(cloud: Cloud, body: dict) -> Response:
    return Response(201, kube_control.create_namespace(cloud, body, time.time()))


def _k8s_drop_pool(cloud: Cloud, body: dict) -> Response:
    return Response(200, kube_control.drop_pool(cloud, body))


def _state(cloud: Cloud, body: dict) -> Response:
    return Response(200, cloud.snapshot())


def _requests(cloud: Cloud, body: dict) -> Response:
    return Response(200, {"requests": [dict(entry) for entry in cloud.requests]})


ROUTES = {
    ("POST", "/_sim/reset"): _reset,
    ("POST", "/_sim/faults"): _faults,
    ("POST", "/_sim/capacity"): _capacity,
    ("POST", "/_sim/quota"): _quota,
    ("POST", "/_sim/skus/restrict"): _restrict,
    ("POST", "/_sim/latency"): _latency,
    ("POST", "/_sim/hang"): _hang,
    ("POST", "/_sim/extensions"): _extensions,
    ("POST", "/_sim/vms/evict"): _evict,
    ("POST", "/_sim/aks/clusters"): _aks_cluster,
    ("GET", "/_sim/state"): _state,
    ("GET", "/_sim/requests"): _requests,
    ("POST", "/_sim/agents/profile"): _agent_profile,
    ("POST", "/_sim/agents/default"): _agent_default,
    ("GET", "/_sim/agents"): _agents,
    ("POST", "/_sim/prices"): _set_prices,
    ("POST", "/_sim/prices/add"): _add_prices,
    ("GET", "/_sim/prices"): _get_prices,
    ("POST", "/_sim/costs"): _set_costs,
    ("GET", "/_sim/costs"): _get_costs,
    ("GET", "/_sim/k8s"): _k8s_state,
    ("POST", "/_sim/k8s/clusters"): _k8s_cluster,
    ("POST", "/_sim/k8s/pools/drop"): _k8s_drop_pool,
    ("POST", "/_sim/k8s/namespaces"): _k8s_namespace,
}


def _entra(action):
    return lambda cloud, body: action(cloud.entra, body)


ROUTES |= {key: _entra(action) for key, action in entra_control.ROUTES.items()}
ROUTES |= quirks.ROUTES
ROUTES |= storage_mounts.ROUTES


def handle(cloud: Cloud, req: Request) -> Response:
    """Run one control request (raises ArmError on bad input or an unknown endpoint)."""
    action = ROUTES.get((req.method, req.path.rstrip("/")))
    if action is None:
        raise ArmError(404, "NotFound", f"No control endpoint {req.method} {req.path}.")
    body = req.json()
    with cloud.lock:
        cloud.advance()
        try:
            return action(cloud, body)
        finally:
            cloud.meter()
