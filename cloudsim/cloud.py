"""The emulator's whole state: resources, operations, faults, capacity and quota.

Every request runs its handler with `lock` held and after `advance()`, so operations whose time is
up have applied their effects before anything is read or changed (lazy, but always consistent).
"""

import copy
import threading
import time
import uuid
from collections import deque

from . import errors, ledger, models, quirks, storage_state
from .agents import AgentBook
from .entra.directory import Directory
from .kube import KubeClusters
from .kube import control as kube_control
from .models import VM, AgentPool, Disk, Fault, ManagedCluster, Nic, Operation, iso, key_of
from .skus import Catalog, SizeInfo, normalize_location

DEFAULT_CAPACITY = 10  # VMs of one size per location.
DEFAULT_FAMILY_LIMIT = 96  # vCPUs per quota family per location.
DEFAULT_REGIONAL_LIMIT = 350  # "cores": Total Regional vCPUs per location.
# The one regional quota every Spot VM counts against, whatever its family, instead of its
# family and "cores" (Azure's usages name it so: "Total Regional Low-priority vCPUs").
SPOT_QUOTA = "lowPriorityCores"
DEFAULT_SPOT_LIMIT = DEFAULT_REGIONAL_LIMIT  # vCPUs of Spot VMs per location.
DEFAULT_PRICE_PAGE_SIZE = 100  # Items per Retail Prices page, as the real API's default.
DEFAULT_COST_PAGE_SIZE = 1000  # Rows per Cost Management query page.

FAULT_OPS = frozenset(
    {
        "vm.create",
        "vm.update",
        "vm.sizes",
        "vm.get",
        "vm.list",
        "vm.delete",
        "vm.start",
        "vm.deallocate",
        "vm.powerOff",
        "vm.extension.create",
        "vm.extension.get",
        "vm.extension.delete",
        "guest.setup",
        "reservation.create",
        "nic.create",
        "nic.delete",
        "disk.update",
        "disk.delete",
        "operation.get",
        "usage.list",
        "sku.list",
        "price.list",
        "cost.query",
        "aks.cluster.get",
        "aks.pool.create",
        "aks.pool.delete",
        "aks.pool.get",
        "aks.pool.list",
        "aks.credentials",
        "entra.token",
        "graph.users.get",
        "graph.users.list",
        "graph.groups.get",
        "graph.groups.members",
        "graph.memberObjects",
    }
)
# The emulated Microsoft.Storage and disk snapshot operations (cloudsim.storage_state).
FAULT_OPS = FAULT_OPS | storage_state.FAULT_OPS
SYNC_KINDS = frozenset(
    {
        "throttle",
        "conflict",
        "server_error",
        "unavailable",
        "authorization_failed",
        "sku_not_available",
        "quota",
    }
)
ASYNC_KINDS = frozenset({"allocation_failed", "zonal_allocation_failed"})
VM_SIZE_KINDS = frozenset({"sku_not_available", "quota"})  # Need a VM size to word the message.


class Cloud:
    """In-memory ARM state. Callers hold `lock` for every read or write."""

    def __init__(
        self,
        catalog: Catalog,
        latency: float = 3.0,
        retry_after: int = 1,
        agent_profile: str = "busy",
        prices: list | None = None,
    ):
        """agent_profile: GPU-use profile the emulated telemetry agents start with (agents.py);
        prices: the Retail Prices API items reset() restores (prices.py; default none)."""
        self.lock = threading.RLock()
        self.catalog = catalog
        self._default_prices = copy.deepcopy(prices or [])
        self.agents = AgentBook(agent_profile)  # Reset with everything else by reset().
        self._default_latency = latency
        self._default_retry_after = retry_after
        # Set while ARM and the Kubernetes API answer; cleared by a hang (POST /_sim/hang), so
        # that lifting it wakes every request held at once. Never replaced: waiters hold it.
        self.answering = threading.Event()
        self.drivers_required = False  # What reset() restores (cloudsim --drivers-required).
        # Where emulated Azure Files shares keep their files (cloudsim.storage_state).
        self.storage_root = storage_state.storage_root()
        self.reset()

    def reset(self) -> None:
        """Forget every resource, operation, fault, request and agent; restore startup settings
        and the startup price book."""
        with self.lock:
            self.latency = self._default_latency  # Seconds an LRO stays InProgress.
            self.retry_after = self._default_retry_after  # Retry-After on LROs, seconds.
            self.vms: dict[str, VM] = {}
            self.nics: dict[str, Nic] = {}
            self.disks: dict[str, Disk] = {}
            self.clusters: dict[str, ManagedCluster] = {}  # AKS managed clusters by id key.
            self.pools: dict[str, AgentPool] = {}  # Their agent pools by id key.
            # Capacity reservation groups by id key (cloudsim.reservations).
            self.reservation_groups: dict[str, models.CapacityReservationGroup] = {}
            self.operations: dict[str, Operation] = {}
            self.faults: dict[str, deque[Fault]] = {}
            self.capacity: dict[tuple[str, str], int] = {}  # Total slots; default 10.
            self.quotas: dict[tuple[str, str], int] = {}  # (location, family lower) -> vCPUs.
            self.restricted: set[tuple[str, str]] = set()  # (location, size lower).
            self.requests: list[dict] = []
            self.prices: list = copy.deepcopy(self._default_prices)  # Retail Prices API items.
            self.price_page_size = DEFAULT_PRICE_PAGE_SIZE
            self.usages: list[ledger.Usage] = []  # What Azure would bill, oldest first.
            self.open_usages: dict[tuple, tuple] = {}  # (kind, key) -> (Usage, signature).
            self.cost_skew: dict[str, dict] = {}  # Tag value ("*": all) -> multiplier, extra.
            self.cost_page_size = DEFAULT_COST_PAGE_SIZE
            self.agents.reset()
            self.kube = KubeClusters()  # Kubernetes API state of each managed cluster.
            self.entra = Directory()  # Entra ID tenant and Graph directory (cloudsim.entra).
            self.storage = storage_state.StorageState(self.storage_root)  # Files wiped too.
            self.quirks = quirks.Quirks()  # Azure answers off by default (quirks.py).
            self.hang_seconds = 0.0  # How long ARM and Kubernetes requests hang (/_sim/hang).
            self.extension_play = models.ExtensionPlay(drivers_required=self.drivers_required)
            self.answering.set()

    # --- operations -------------------------------------------------------------------------

    def start_operation(self, name, provider, location, subscription, target, apply, **kw):
        """Register an LRO ending `latency` seconds from now (or `duration=` seconds).

        Keyword options: error ({"code","message"} to fail with), duration, done_status.
        """
        now = time.time()
        duration = kw.pop("duration", self.latency)
        op = Operation(
            id=str(uuid.uuid4()),
            name=name,
            provider=provider,
            location=normalize_location(location),
            subscription=subscription,
            target=target,
            start=now,
            end=now + max(duration, 0.0),
            apply=apply,
            **kw,
        )
        self.operations[op.id] = op
        return op

    def advance(self, now: float | None = None) -> None:
        """Complete every InProgress operation whose end time has passed, oldest end first."""
        now = time.time() if now is None else now
        due = [op for op in self.operations.values() if op.status == "InProgress"]
        for op in sorted((op for op in due if op.end <= now), key=lambda o: o.end):
            op.status = "Failed" if op.error else "Succeeded"
            op.apply(op)
            self.meter(op.end)  # Billing changes when the operation did, not when we noticed.

    def meter(self, now: float | None = None) -> None:
        """Bring the billing ledger up to date with the resources at `now` (ledger.meter)."""
        ledger.meter(self, time.time() if now is None else now)

    def busy_with(self, active_op: str | None) -> Operation | None:
        """The operation if it is still InProgress, else None."""
        op = self.operations.get(active_op or "")
        return op if op is not None and op.status == "InProgress" else None

    # --- faults -----------------------------------------------------------------------------

    def add_fault(self, op: str, kind: str, count: int = 1, retry_after: int = 0) -> None:
        """Queue `count` faults of `kind` for `op` (validated by the caller)."""
        queue = self.faults.setdefault(op, deque())
        queue.extend(Fault(kind, retry_after) for _ in range(count))

    def take_fault(self, op: str, kinds: frozenset[str]) -> Fault | None:
        """Pop the oldest fault for `op` if its kind is in `kinds` (FIFO: never skip ahead)."""
        queue = self.faults.get(op)
        if queue and queue[0].kind in kinds:
            return queue.popleft()
        return None

    # --- capacity and quota -----------------------------------------------------------------

    def _slots(self, location: str, size: str) -> int:
        return self.capacity.get((normalize_location(location), size.lower()), DEFAULT_CAPACITY)

    def allocated_count(self, location: str, size: str) -> int:
        """VMs and AKS nodes of the size holding a capacity slot in the location (deallocated
        VMs and pools whose allocation failed do not), and reserved instances no VM uses."""
        # A real cycle: cloudsim.reservations handles requests with a Cloud.
        from .reservations import unused_reserved

        loc, wanted = normalize_location(location), size.lower()
        reserved = unused_reserved(self, loc, wanted)
        vms = sum(
            1
            for vm in self.vms.values()
            if vm.allocated and vm.location == loc and vm.size.lower() == wanted
        )
        return (
            reserved
            + vms
            + sum(
                pool.count
                for pool in self.pools.values()
                if pool.allocated and pool.location == loc and pool.vm_size.lower() == wanted
            )
        )

    def free_capacity(self, location: str, size: str) -> int:
        """How many more VMs of the size can be allocated in the location right now."""
        return self._slots(location, size) - self.allocated_count(location, size)

    def set_available(self, location: str, size: str, available: int) -> None:
        """Make exactly `available` more allocations possible, counting current ones."""
        total = self.allocated_count(location, size) + max(available, 0)
        self.capacity[(normalize_location(location), size.lower())] = total

    def quota_limit(self, location: str, family: str) -> int:
        """vCPU limit for a family, for "cores" (Total Regional vCPUs) or for SPOT_QUOTA."""
        defaults = {"cores": DEFAULT_REGIONAL_LIMIT, SPOT_QUOTA.lower(): DEFAULT_SPOT_LIMIT}
        default = defaults.get(family.lower(), DEFAULT_FAMILY_LIMIT)
        return self.quotas.get((normalize_location(location), family.lower()), default)

    def usage(self, location: str, family: str, exclude=None) -> int:
        """vCPUs counted against a quota in the location: of every VM not yet deleted (allocated
        or not) and every allocated AKS node; a Spot VM counts toward SPOT_QUOTA only, any other
        toward its family and "cores". `exclude`: a VM or AgentPool left out."""
        loc, total = normalize_location(location), 0
        for vm in self.vms.values():
            info = self.catalog.get(vm.location, vm.size)
            if vm is exclude or vm.location != loc or info is None:
                continue
            if _counts_toward(family, info.family, spot=vm.spot):
                total += info.vcpus
        for pool in self.pools.values():
            if pool is exclude or not pool.allocated or pool.location != loc:
                continue
            if _counts_toward(family, pool.family, spot=False):
                total += pool.vcpus * pool.count
        return total

    def quota_shortfall(
        self, location: str, size: SizeInfo, count: int = 1, exclude=None, *, spot: bool = False
    ):
        """(family, limit, used, needed) of the first quota `count` more of `size` would
        exceed (its family, then "cores"; SPOT_QUOTA alone for Spot VMs), or None when they
        fit."""
        needed = size.vcpus * count
        for family in (SPOT_QUOTA,) if spot else (size.family, "cores"):
            limit = self.quota_limit(location, family)
            used = self.usage(location, family, exclude)
            if used + needed > limit:
                return family, limit, used, needed
        return None

    def check_quota(
        self, subscription: str, location: str, size: SizeInfo, exclude=None, *, spot: bool = False
    ) -> None:
        """Raise 409 OperationNotAllowed if one more `size` VM would exceed its family or
        regional quota, or for a Spot VM (`spot`) the regional Spot quota."""
        shortfall = self.quota_shortfall(location, size, 1, exclude, spot=spot)
        if shortfall is not None:
            family, limit, used, needed = shortfall
            raise errors.quota_exceeded(
                subscription, family, normalize_location(location), limit, used, needed
            )

    def offered(self, location: str, size: str) -> SizeInfo | None:
        """The size if the location offers it and it is not restricted, else None."""
        info = self.catalog.get(location, size)
        if info is None or (normalize_location(location), size.lower()) in self.restricted:
            return None
        return info

    # --- lookups and snapshots --------------------------------------------------------------

    def vm(self, rid: str) -> VM | None:
        """The VM with this id (any casing), or None. Likewise nic() and disk()."""
        return self.vms.get(key_of(rid))

    def nic(self, rid: str) -> Nic | None:
        return self.nics.get(key_of(rid))

    def disk(self, rid: str) -> Disk | None:
        return self.disks.get(key_of(rid))

    def disk_state(self, disk: Disk) -> str:
        """Attached (VM allocated), Reserved (VM deallocated) or Unattached (no VM)."""
        owner = self.vm(disk.managed_by) if disk.managed_by else None
        if owner is None:
            return "Unattached"
        return "Attached" if owner.allocated else "Reserved"

    def snapshot(self) -> dict:
        """The /_sim/state document (see the module docs of control_api)."""
        with self.lock:
            self.advance()
            return {
                "virtualMachines": [_vm_state(vm) for vm in self.vms.values()],
                "networkInterfaces": [_nic_state(nic) for nic in self.nics.values()],
                "disks": [
                    {"id": d.id, "name": d.name, "diskState": self.disk_state(d)}
                    for d in self.disks.values()
                ],
                "managedClusters": [self._cluster_state(c) for c in self.clusters.values()],
                "kubernetes": kube_control.snapshot(self, time.time()),
                "operations": [_op_state(op) for op in self.operations.values()],
                "faults": {
                    op: [{"kind": f.kind, "retry_after": f.retry_after} for f in queue]
                    for op, queue in self.faults.items()
                    if queue
                },
                "latency": self.latency,
                "retryAfter": self.retry_after,
            }

    def cluster_pools(self, cluster: ManagedCluster) -> list[AgentPool]:
        """The cluster's agent pools, in creation order."""
        prefix = key_of(cluster.id) + "/agentpools/"
        return [pool for key, pool in self.pools.items() if key.startswith(prefix)]

    def _cluster_state(self, cluster: ManagedCluster) -> dict:
        return {
            "id": cluster.id,
            "name": cluster.name,
            "location": cluster.location,
            "provisioningState": cluster.provisioning,
            "agentPools": [_pool_state(p) for p in self.cluster_pools(cluster)],
        }


def _counts_toward(quota: str, family: str, *, spot: bool) -> bool:
    """Whether vCPUs of `family` (of a Spot VM if `spot`) count toward `quota`."""
    if quota.lower() == SPOT_QUOTA.lower():
        return spot
    return not spot and (quota == "cores" or quota.lower() == family.lower())


def _pool_state(pool: AgentPool) -> dict:
    return {
        "name": pool.name,
        "vmSize": pool.vm_size,
        "count": pool.count,
        "enableAutoScaling": pool.enable_auto_scaling,
        "minCount": pool.min_count,
        "maxCount": pool.max_count,
        "mode": pool.mode,
        "gpuInstanceProfile": pool.gpu_instance_profile,
        "nodeTaints": list(pool.node_taints),
        "nodeLabels": dict(pool.node_labels),
        "provisioningState": pool.provisioning,
        "error": pool.last_error,
    }


def _vm_state(vm: VM) -> dict:
    os_profile = vm.properties.get("osProfile") or {}
    ssh = (os_profile.get("linuxConfiguration") or {}).get("ssh") or {}
    return {
        "id": vm.id,
        "name": vm.name,
        "location": vm.location,
        "vmSize": vm.size,
        "provisioningState": vm.provisioning,
        "powerState": vm.power,
        "tags": dict(vm.tags),
        "customData": vm.custom_data,
        "adminUsername": os_profile.get("adminUsername"),
        "sshPublicKeys": [k.get("keyData") for k in ssh.get("publicKeys") or []],
        "nics": list(vm.nic_ids),
        "osDisk": vm.os_disk_name,
        "priority": vm.properties.get("priority", "Regular"),
        "evictionPolicy": vm.properties.get("evictionPolicy"),
        "billingProfile": vm.properties.get("billingProfile"),
        "evictedAt": iso(vm.evicted_at),
    }


def _nic_state(nic: Nic) -> dict:
    return {
        "id": nic.id,
        "name": nic.name,
        "privateIPAddress": nic.private_ip,
        "tags": dict(nic.tags),
        "virtualMachine": nic.vm_id,
    }


def _op_state(op: Operation) -> dict:
    return {
        "id": op.id,
        "name": op.name,
        "resourceId": op.target,
        "status": op.status,
        "startTime": iso(op.start),
        "endTime": iso(op.end) if op.status != "InProgress" else None,
        "error": op.error,
    }
