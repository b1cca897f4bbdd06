"""SimControl: a small urllib client for the emulator's /_sim control API (tests, demo)."""

import json
import urllib.error
import urllib.request


class SimControlError(RuntimeError):
    """The control API refused a request; `status` is the HTTP status, `body` the JSON answer."""

    def __init__(self, status: int, body: dict):
        super().__init__(f"cloudsim control request failed ({status}): {body}")
        self.status = status
        self.body = body


class SimControl:
    """Drive a running emulator: SimControl("http://127.0.0.1:8100").inject("vm.get", "throttle").

    Every method raises SimControlError when the emulator refuses the request."""

    def __init__(self, url: str, timeout: float = 10.0):
        self.url = url.rstrip("/")
        self.timeout = timeout  # Seconds per control request.

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as err:
            raise SimControlError(err.code, _json_or_text(err.read())) from None

    def reset(self) -> None:
        """Drop resources, operations, faults, requests, agent stats; restore startup settings."""
        self._call("POST", "/_sim/reset", {})

    def inject(self, op: str, kind: str, count: int = 1, retry_after: int = 0) -> dict:
        """Queue `count` faults of `kind` for `op` (e.g. "vm.create", "throttle").

        Ops: vm.create, vm.update (PUT or PATCH), vm.sizes (ListAvailableSizes), vm.get,
        vm.list, vm.delete, vm.start, vm.deallocate, vm.powerOff, nic.create, nic.delete,
        disk.delete, operation.get, usage.list, sku.list,
        aks.cluster.get, aks.pool.create, aks.pool.delete, aks.pool.get, aks.pool.list,
        aks.credentials, entra.token, graph.users.get, graph.users.list, graph.groups.get,
        graph.groups.members, graph.memberObjects (the last six: throttle, server_error,
        unavailable only),
        price.list (the Retail Prices API: throttle, server_error, unavailable only) and
        cost.query (the Cost Management Query API: those and authorization_failed). Kinds:
        throttle, conflict, server_error, unavailable (retry_after = Retry-After seconds),
        authorization_failed (403, any op), sku_not_available, quota,
        allocation_failed, zonal_allocation_failed (the last four: vm.create/vm.update/vm.start
        and aks.pool.create, whose allocation failure ends the pool's operation Failed),
        no_async_header (vm.create, nic.create, aks.pool.create: the 201 comes without
        Azure-AsyncOperation, so the SDK polls the resource's provisioningState; quirks.py).
        vm.extension.create, vm.extension.get, vm.extension.delete (VM extensions) take the
        synchronous kinds, and vm.extension.create also extension_no_gpu (exit code 11),
        extension_size_unsupported (13) and extension_failed (14): the install ends Failed.
        """
        body = {"op": op, "kind": kind, "count": count, "retry_after": retry_after}
        return self._call("POST", "/_sim/faults", body)

    def quirks(
        self,
        *,
        display_locations: bool | None = None,
        no_async_header_rate: float | None = None,
        seed: int | None = None,
    ) -> dict:
        """Azure answers the emulator gives only when asked (cloudsim/quirks.py): locations as
        display names ("West US 2"), creates without Azure-AsyncOperation at a seeded rate."""
        body = {
            "display_locations": display_locations,
            "no_async_header_rate": no_async_header_rate,
        }
        body = {k: v for k, v in body.items() if v is not None}
        return self._call("POST", "/_sim/quirks", body | ({} if seed is None else {"seed": seed}))

    def extensions(
        self,
        *,
        seconds: float | None = None,
        drivers_required: bool | None = None,
        setup_seconds: float | None = None,
    ) -> dict:
        """How VM extensions play (cloudsim/extensions.py): seconds an install takes; whether a
        VM's agent sees its GPUs only once it has a driver (image or extension); seconds an
        environment layer's setup takes in the guest (cloudsim/guest_setup.py)."""
        body = {
            "seconds": seconds,
            "drivers_required": drivers_required,
            "setup_seconds": setup_seconds,
        }
        return self._call(
            "POST", "/_sim/extensions", {k: v for k, v in body.items() if v is not None}
        )

    def set_capacity(self, location: str, vm_size: str, available: int) -> dict:
        """Allow exactly `available` more allocations of the size in the location from now on."""
        body = {"location": location, "vm_size": vm_size, "available": available}
        return self._call("POST", "/_sim/capacity", body)

    def set_quota(self, location: str, family: str, limit: int) -> dict:
        """Set a family's vCPU limit; family "cores" is Total Regional vCPUs, "lowPriorityCores"
        the regional quota all Spot VMs count against (instead of family and "cores")."""
        body = {"location": location, "family": family, "limit": limit}
        return self._call("POST", "/_sim/quota", body)

    def restrict_sku(self, location: str, vm_size: str, restricted: bool = True) -> dict:
        """Mark the size NotAvailableForSubscription in the location (restricted=False lifts it)."""
        body = {"location": location, "vm_size": vm_size, "restricted": restricted}
        return self._call("POST", "/_sim/skus/restrict", body)

    def set_latency(self, seconds: float, retry_after: int | None = None) -> dict:
        """Seconds new LROs stay InProgress; optionally the Retry-After seconds they send."""
        body: dict = {"seconds": seconds}
        if retry_after is not None:
            body["retry_after"] = retry_after
        return self._call("POST", "/_sim/latency", body)

    def hang(self, seconds: float) -> dict:
        """Make every ARM and Kubernetes API request wait ``seconds`` before it is answered
        (a hung Azure); 0 lifts it."""
        return self._call("POST", "/_sim/hang", {"seconds": seconds})

    def evict(self, vm_name: str, resource_group: str | None = None) -> dict:
        """Evict a running Spot VM as Azure does when it needs the capacity back: deallocated
        (evictionPolicy Deallocate) or deleted (Delete). Returns {"vm", "id", "outcome"};
        refused (409) for a VM that is not Spot or not allocated, 404 for no such VM."""
        body: dict = {"vm": vm_name}
        if resource_group is not None:
            body["resource_group"] = resource_group
        return self._call("POST", "/_sim/vms/evict", body)

    def create_aks_cluster(
        self, subscription: str, resource_group: str, name: str, location: str = "eastus"
    ) -> dict:
        """An AKS managed cluster that exists at once (Succeeded, System pool "nodepool1" of one
        Standard_D4ds_v5 node), as a portal admin would register it. Returns the ManagedCluster
        body; 409 if it exists."""
        body = {"subscription": subscription, "resource_group": resource_group, "name": name}
        body["location"] = location
        return self._call("POST", "/_sim/aks/clusters", body)

    def set_prices(self, items: list, page_size: int | None = None) -> dict:
        """Replace the Retail Prices API's book with `items` (API item shape, served as given);
        optionally the items per page. Returns {"count", "page_size"}."""
        body: dict = {"items": items}
        if page_size is not None:
            body["page_size"] = page_size
        return self._call("POST", "/_sim/prices", body)

    def add_prices(self, items: list) -> dict:
        """Append items to the book, e.g. a meter's later price (same meterId, later
        effectiveStartDate). Returns {"count", "page_size"}."""
        return self._call("POST", "/_sim/prices/add", {"items": items})

    def prices(self) -> dict:
        """The book: {"items": [...], "page_size"}."""
        return self._call("GET", "/_sim/prices")

    def skew_costs(
        self,
        *,
        tag: str | None = None,
        multiplier: str | float | None = None,
        extra_per_day: str | float | None = None,
        page_size: int | None = None,
    ) -> dict:
        """Make the Cost Management Query API disagree with the ledger: the actual cost of
        workspace tag value `tag` ("" for untagged; None for every value without a knob of its
        own) on each day becomes cost x multiplier + extra_per_day (USD). page_size: rows per
        query page. Returns GET costs()."""
        body: dict = {} if tag is None else {"tag": tag}
        for name, value in (("multiplier", multiplier), ("extra_per_day", extra_per_day)):
            if value is not None:
                body[name] = str(value)
        if page_size is not None:
            body["page_size"] = page_size
        return self._call("POST", "/_sim/costs", body)

    def costs(self) -> dict:
        """{"usages": [{"kind", "resourceId", "sku", "spot", "location", "tags", "start",
        "end"}], "skew": {tag: {"multiplier", "extra_per_day"}}, "page_size"}: what the
        emulator bills (unix seconds) and the knobs."""
        return self._call("GET", "/_sim/costs")

    def state(self) -> dict:
        """{"virtualMachines", "networkInterfaces", "disks", "operations", "faults", ...}."""
        return self._call("GET", "/_sim/state")

    def requests(self) -> list[dict]:
        """Every ARM request so far, in arrival order: [{"t", "method", "path", "status"}]."""
        return self._call("GET", "/_sim/requests")["requests"]

    def set_agent_profile(self, vm_name: str, profile: str, spike_every: int | None = None) -> dict:
        """GPU-use profile of one VM's emulated agent, also for a VM not created yet; a
        pod's agent is named by its StatefulSet ("ws-<12 hex>").

        Profiles: busy, batch (GPUs busy, nobody logged in), idle, spiky (idle but 100 % every
        `spike_every` samples, default 10), silent (posts nothing)."""
        body: dict = {"vm": vm_name, "profile": profile}
        if spike_every is not None:
            body["spike_every"] = spike_every
        return self._call("POST", "/_sim/agents/profile", body)

    def set_default_agent_profile(self, profile: str) -> dict:
        """Profile of every VM without a profile of its own (until reset)."""
        return self._call("POST", "/_sim/agents/default", {"profile": profile})

    def agents(self) -> list[dict]:
        """The emulated agents: [{"vm", "workspace", "profile", "active", "posts", "accepted",
        "failures", "last_status", "last_error", "last_post_at"}], by VM name."""
        return self._call("GET", "/_sim/agents")["agents"]

    def k8s_state(self) -> list[dict]:
        """Simulated clusters: [{"key", "name", "server", "resourceVersion", "pools",
        "namespaces", "nodes", "pods": [{"namespace", "name", "phase", "node", "ready",
        "reason", "message", "requests"}]}]."""
        return self._call("GET", "/_sim/k8s")["clusters"]

    def k8s_cluster(
        self, subscription: str, resource_group: str, name: str, pools: list[dict] = ()
    ) -> dict:
        """Make a simulated cluster and pools exist (as the AKS side does); pools are
        PoolShape fields as dicts. Returns {"key", "server"} (server: the API path prefix)."""
        body = {"subscription": subscription, "resource_group": resource_group, "name": name}
        return self._call("POST", "/_sim/k8s/clusters", {**body, "pools": list(pools)})

    def kube_create_namespace(self, cluster: str, name: str, labels: dict | None = None) -> dict:
        """Create a namespace in the managed cluster named `cluster`, as someone outside the
        portal would (no portal labels unless given)."""
        body = {"cluster": cluster, "name": name, "labels": labels or {}}
        return self._call("POST", "/_sim/k8s/namespaces", body)

    def k8s_drop_pool(self, subscription: str, resource_group: str, name: str, pool: str) -> dict:
        """Remove a pool's nodes; their pods go back to Pending."""
        body = {"subscription": subscription, "resource_group": resource_group, "name": name}
        return self._call("POST", "/_sim/k8s/pools/drop", {**body, "pool": pool})

    # --- Entra ID and Graph (cloudsim.entra) ----------------------------------------------

    def entra(self) -> dict:
        """{"tenant", "client_id", "group_limit", "kids", "users", "groups"}."""
        return self._call("GET", "/_sim/entra")

    def entra_add(self, users: list[dict] = (), groups: list[dict] = ()) -> dict:
        """Bulk add users [{"name", "display_name"?, "id"?, "enabled"?, "roles"?}] and groups
        [{"display_name", "id"?, "members": [id | UPN | name]}]; returns their ids."""
        return self._call(
            "POST", "/_sim/entra/directory", {"users": list(users), "groups": list(groups)}
        )

    def entra_add_app(self, display_name: str, roles: list[str] = (), **given: str) -> dict:
        """Register an app (a pipeline's service principal or managed identity) whose principal
        holds app ``roles`` on the portal's app; ``given`` may fix client_id, client_secret,
        object_id. Returns {"client_id", "client_secret", "object_id", "roles"}."""
        body = {"display_name": display_name, "roles": list(roles), **given}
        return self._call("POST", "/_sim/entra/apps", body)

    def entra_disable_user(self, user: str, enabled: bool = False) -> dict:
        """Set accountEnabled of a user (id or UPN) to `enabled` (default: disable)."""
        return self._call("POST", "/_sim/entra/users/disable", {"user": user, "enabled": enabled})

    def entra_remove_member(self, group: str, user: str) -> dict:
        """Take a user (id or UPN) out of a group."""
        return self._call("POST", "/_sim/entra/members/remove", {"group": group, "user": user})

    def entra_rotate_keys(self, drop_old: bool = False) -> dict:
        """Sign with a new key from now; the old keys stay in the JWKS unless drop_old."""
        return self._call("POST", "/_sim/entra/keys/rotate", {"drop_old": drop_old})

    def entra_drop_key(self, kid: str) -> dict:
        """Retire a key that no longer signs: it leaves the JWKS."""
        return self._call("POST", "/_sim/entra/keys/drop", {"kid": kid})

    def entra_settings(self, group_limit: int) -> dict:
        """Groups an ID token may carry before the overage claims replace them."""
        return self._call("POST", "/_sim/entra/settings", {"group_limit": group_limit})

    # --- a workspace's view of its NFS mounts (cloudsim/storage_mounts.py) ------------------

    def storage_mounts(self, vm: str) -> list[dict]:
        """The VM's mounts: [{"path", "source", "read_only", "host_path", "live"}]."""
        return self._call("POST", "/_sim/storage/mounts", {"vm": vm})["mounts"]

    def storage_write(self, vm: str, path: str, content: str) -> dict:
        """Write a file at `path` inside the VM (EROFS 403, ENOENT 404, ENOSPC 507)."""
        return self._call(
            "POST", "/_sim/storage/write", {"vm": vm, "path": path, "content": content}
        )

    def storage_read(self, vm: str, path: str) -> str:
        """Read a file at `path` inside the VM (ENOENT 404)."""
        return self._call("POST", "/_sim/storage/read", {"vm": vm, "path": path})["content"]


def _json_or_text(raw: bytes) -> dict:
    try:
        value = json.loads(raw)
    except ValueError:
        return {"text": raw.decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"value": value}
