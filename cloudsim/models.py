"""In-memory resource records. Plain data; the rules live in cloud.py and the handlers."""

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

COMPUTE = "Microsoft.Compute"
NETWORK = "Microsoft.Network"
CONTAINER_SERVICE = "Microsoft.ContainerService"
SPOT_PRIORITIES = frozenset({"Spot", "Low"})  # VM priorities; Low is Spot's deprecated name.


def resource_id(sub: str, rg: str, provider_type: str, name: str) -> str:
    """ARM id, e.g. provider_type "Microsoft.Compute/virtualMachines"."""
    return f"/subscriptions/{sub}/resourceGroups/{rg}/providers/{provider_type}/{name}"


def key_of(rid: str) -> str:
    """Lookup key for an id: ARM ids are case-insensitive."""
    return rid.strip().rstrip("/").lower()


def iso(ts: float | None) -> str | None:
    """Unix seconds -> ISO 8601 UTC with offset, as ARM writes times."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat()


@dataclass
class Nic:
    id: str
    name: str
    resource_group: str
    location: str
    tags: dict
    properties: dict  # The request's properties, echoed back with computed fields on top.
    private_ip: str
    subnet_id: str
    ipconfig_name: str
    etag: str = field(default_factory=lambda: f'W/"{uuid.uuid4()}"')
    guid: str = field(default_factory=lambda: str(uuid.uuid4()))
    vm_id: str | None = None
    provisioning: str = "Succeeded"


@dataclass
class Disk:
    id: str
    name: str
    resource_group: str
    location: str
    storage_type: str
    size_gb: int
    image: dict
    managed_by: str | None  # VM id while attached.
    created: float = field(default_factory=time.time)
    unique_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    # Azure gives an OS disk none of its VM's tags; only a PATCH on the disk sets them.
    tags: dict = field(default_factory=dict)


@dataclass
class VM:
    id: str
    name: str
    subscription: str
    resource_group: str
    location: str
    size: str
    tags: dict
    properties: dict  # The request's properties minus secrets (customData, adminPassword).
    custom_data: str | None
    nic_ids: list[str]
    disk_id: str
    os_disk_name: str
    zones: list | None = None
    vm_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    created: float = field(default_factory=time.time)
    provisioning: str = "Creating"
    power: str = "starting"
    allocated: bool = False  # Holds a capacity slot (running, starting, stopping, stopped).
    wants_running: bool = True  # A PUT on a failed, unallocated VM retries the allocation.
    last_error: dict | None = None
    active_op: str | None = None
    evicted_at: float | None = None  # Last Spot eviction (unix seconds), for /_sim/state.
    # The NVIDIA driver: carried by the image (extensions.image_carries_driver) or installed by
    # the driver extension; the agent sees no GPU without it (when the Cloud asks for drivers).
    driver: bool = False
    rebooting: tuple[float, float] | None = None  # (from, until) unix seconds: a guest reboot.
    # The environment layer's setup in the guest (cloudsim.guest_setup): when it began (unix
    # seconds) and whether it fails.
    setup_began: float | None = None
    setup_fails: bool = False
    extensions: dict[str, "Extension"] = field(default_factory=dict)  # By lower-case name.

    @property
    def spot(self) -> bool:
        """An Azure Spot VM (priority Spot, or Low, its deprecated name)."""
        return self.properties.get("priority") in SPOT_PRIORITIES


@dataclass
class ExtensionPlay:
    """How VM extensions play (cloudsim.extensions): seconds an install takes (None: 4 x the
    LRO latency), and whether a VM's agent sees its GPUs only once it has a driver; and seconds
    an environment layer's setup takes in the guest (cloudsim.guest_setup; None: 2 x the LRO
    latency)."""

    seconds: float | None = None
    drivers_required: bool = False
    setup_seconds: float | None = None


@dataclass
class Extension:
    """A Microsoft.Compute/virtualMachines/extensions resource. exit_code: the handler's exit
    code once it finished (0 succeeded); message: what its status said."""

    id: str
    name: str
    vm_id: str
    location: str
    properties: dict  # The request's properties minus protectedSettings (write-only).
    tags: dict
    provisioning: str = "Creating"
    exit_code: int | None = None
    message: str = ""
    started: float = field(default_factory=time.time)
    finished: float | None = None
    active_op: str | None = None


@dataclass
class Operation:
    """An LRO: InProgress from start until end (unix seconds), then Succeeded or Failed."""

    id: str
    name: str  # The verb, e.g. "PUT", "Start", "Delete".
    provider: str
    location: str
    subscription: str
    target: str
    start: float
    end: float
    apply: Callable[["Operation"], None]  # Effect on the resources once the op completes.
    error: dict | None = None  # Decided at start, reported at end.
    status: str = "InProgress"
    done_status: int = 200  # What the Location monitor answers once it succeeded.


@dataclass
class Fault:
    kind: str
    retry_after: int = 0


@dataclass
class ManagedCluster:
    """A Microsoft.ContainerService managed cluster (its agent pools live in Cloud.pools)."""

    id: str
    name: str
    subscription: str
    resource_group: str
    location: str
    tags: dict
    kubernetes_version: str
    dns_prefix: str
    fqdn: str
    aad: bool = True  # Entra ID integration: user kubeconfigs default to kubelogin exec.
    provisioning: str = "Creating"
    power: str = "Running"
    active_op: str | None = None
    created: float = field(default_factory=time.time)


@dataclass
class AgentPool:
    """An AKS agent pool: `count` nodes of `vm_size`, each holding a capacity slot and `vcpus`
    of quota family `family` while allocated (from create until deleted or failed)."""

    id: str
    name: str
    cluster_id: str
    subscription: str
    location: str
    vm_size: str
    vcpus: int
    family: str
    count: int
    mode: str = "User"
    enable_auto_scaling: bool = False
    min_count: int | None = None
    max_count: int | None = None
    node_taints: list = field(default_factory=list)
    node_labels: dict = field(default_factory=dict)
    gpu_instance_profile: str | None = None
    # properties.capacityReservationGroupID: the nodes come from this group's reservations.
    capacity_reservation_group_id: str | None = None
    orchestrator_version: str = ""
    provisioning: str = "Creating"
    power: str = "Running"
    allocated: bool = True
    active_op: str | None = None
    last_error: dict | None = None
    etag: str = field(default_factory=lambda: str(uuid.uuid4()))


@dataclass
class CapacityReservationGroup:
    """A Microsoft.Compute/capacityReservationGroups resource (cloudsim.reservations), holding
    its capacity reservations by lower-case name."""

    id: str
    name: str
    location: str
    tags: dict
    zones: list | None = None
    reservations: dict[str, "CapacityReservation"] = field(default_factory=dict)


@dataclass
class CapacityReservation:
    """A capacity reservation of `capacity` instances of `size`; `held` while its instances
    hold slots of the region (from when its create was accepted until its delete ends)."""

    id: str
    name: str
    group_id: str
    location: str
    size: str
    capacity: int
    tags: dict = field(default_factory=dict)
    provisioning: str = "Creating"
    held: bool = False
    reservation_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    created: float = field(default_factory=time.time)
