"""AKS on the ARM side: registered clusters, their GPU node pools and user kubeconfigs.

Node pool operations are split like VM ones (cloud.azure_vm): pool_begin() sends the PUT or
DELETE and returns the LRO continuation token without waiting; pool_poll() asks once how the
operation behind a token is doing, with GETs only, so a worker that crashed after saving the
token resumes the operation instead of sending the PUT again.

Facts from the AKS REST API (azure-mgmt-containerservice, api-version 2026-08-01): pool names are
1-12 lowercase letters and digits starting with a letter (https://aka.ms/aks-naming-rules);
gpuInstanceProfile is MIG1g, MIG2g, MIG3g, MIG4g or MIG7g; a PUT on a pool (or cluster) with an
operation in progress is refused with 409 OperationNotAllowed ("Another agentpool operation ...
is in progress", https://aka.ms/aks-pending-operation), which this module reports as transient.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml
from azure.core.exceptions import ResourceNotFoundError
from azure.core.polling import LROPoller
from azure.mgmt.containerservice import ContainerServiceClient

from .azure_vm import _PollOnce, _SendOnly, _text
from .clients import AzureSettings, container_client
from .errors import CloudError, azure_errors
from .locations import normalise_location

OPERATIONS = ("create", "delete")
MIG_PROFILES = ("MIG1g", "MIG2g", "MIG3g", "MIG4g", "MIG7g")
MAX_NODES = 1000  # Per pool, as AKS allows.
POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
TAINT = re.compile(
    r"^[A-Za-z0-9][-A-Za-z0-9_./]*=[-A-Za-z0-9_.]*:(NoSchedule|PreferNoSchedule|NoExecute)$"
)


@dataclass(frozen=True)
class ClusterRef:
    """Where a registered AKS cluster lives; its subscription may differ from the portal's."""

    subscription_id: str
    resource_group: str
    name: str


@dataclass(frozen=True)
class ClusterState:
    """A managed cluster as ARM reports it: provisioning_state e.g. "Succeeded", power_state
    "Running" or "Stopped"; kubernetes_version is the current one."""

    name: str
    location: str
    kubernetes_version: str
    fqdn: str
    provisioning_state: str
    power_state: str


def check_pool_name(name: str) -> None:
    """Raise ValueError unless `name` is a valid AKS Linux pool name."""
    if not isinstance(name, str) or not POOL_NAME.fullmatch(name):
        raise ValueError(
            f"invalid node pool name {name!r}: AKS needs 1-12 lowercase letters and digits, "
            "starting with a letter"
        )


@dataclass(frozen=True)
class PoolSpec:
    """A node pool to create or update. With min_count and max_count both set the cluster
    autoscaler is on and count is the initial node count, kept within [min_count, max_count].
    taints: "key=value:NoSchedule|PreferNoSchedule|NoExecute"; labels: (key, value) pairs.

    Raises ValueError on construction when anything is malformed."""

    name: str
    vm_size: str
    gpu_instance_profile: str = ""
    count: int = 1
    min_count: int | None = None
    max_count: int | None = None
    taints: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    # The fully qualified id of a capacity reservation group whose reservations give the
    # nodes (AgentPool properties.capacityReservationGroupID; "" none). AKS fixes it at
    # creation.
    capacity_reservation_group_id: str = ""

    def __post_init__(self) -> None:
        check_pool_name(self.name)
        if not isinstance(self.vm_size, str) or not self.vm_size.strip():
            raise ValueError("a node pool needs a VM size")
        if self.gpu_instance_profile not in ("", *MIG_PROFILES):
            raise ValueError(
                f"gpu_instance_profile {self.gpu_instance_profile!r} is not one of "
                f"{', '.join(MIG_PROFILES)} (or empty for whole GPUs)"
            )
        _check_counts(self.count, self.min_count, self.max_count)
        bad = [t for t in self.taints if not isinstance(t, str) or not TAINT.fullmatch(t)]
        if bad:
            raise ValueError(f"taints must look like key=value:NoSchedule, not {bad!r}")
        if not all(isinstance(k, str) and k and isinstance(v, str) for k, v in self.labels):
            raise ValueError("labels must be (non-empty key, value) string pairs")

    @property
    def autoscaling(self) -> bool:
        return self.min_count is not None


def _check_counts(count: int, low: int | None, high: int | None) -> None:
    for label, value in (("count", count), ("min_count", low), ("max_count", high)):
        if value is None and label != "count":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_NODES:
            raise ValueError(f"{label} must be a whole number from 0 to {MAX_NODES}")
    if (low is None) != (high is None):
        raise ValueError("set both min_count and max_count for autoscaling, or neither")
    if low is not None and high is not None and low > high:
        raise ValueError(f"min_count {low} is larger than max_count {high}")


@dataclass(frozen=True)
class PoolState:
    """A node pool as AKS reports it. gpu_instance_profile "" for whole GPUs; min_count and
    max_count None without autoscaling; mode "System" or "User"; provisioning_state e.g.
    "Creating", "Succeeded", "Failed"; power_state "Running" or "Stopped"."""

    name: str
    vm_size: str
    gpu_instance_profile: str
    count: int
    min_count: int | None
    max_count: int | None
    taints: tuple[str, ...]
    labels: tuple[tuple[str, str], ...]
    mode: str
    provisioning_state: str
    power_state: str
    capacity_reservation_group_id: str = ""  # "" when its nodes come from no group


@dataclass(frozen=True)
class PoolProgress:
    """Where a pool operation stands after one poll; pool is set once a create is done."""

    done: bool
    pool: PoolState | None = None


@dataclass(frozen=True)
class KubeEndpoint:
    """The cluster's API server URL and its CA bundle (base64 PEM; None for plain http)."""

    server: str
    ca_data: str | None


# --- clients and errors -------------------------------------------------------------------------


def _client(settings: AzureSettings, cluster: ClusterRef) -> ContainerServiceClient:
    if not all(
        isinstance(v, str) and v.strip()
        for v in (cluster.subscription_id, cluster.resource_group, cluster.name)
    ):
        raise ValueError("a cluster needs a subscription id, a resource group and a name")
    if cluster.subscription_id != settings.subscription_id:
        settings = dataclasses.replace(settings, subscription_id=cluster.subscription_id)
    return container_client(settings)


@contextlib.contextmanager
def _aks_errors() -> Iterator[None]:
    """azure_errors(), plus: 409 OperationNotAllowed is AKS's "another operation is in
    progress", worth retrying later (AKS words quota failures differently, as 400s)."""
    try:
        with azure_errors():
            yield
    except CloudError as exc:
        if exc.status == 409 and exc.code == "OperationNotAllowed" and not exc.transient:
            raise CloudError(
                exc.code, exc.message, status=409, transient=True, retry_after=exc.retry_after
            ) from exc
        raise


# --- reading ------------------------------------------------------------------------------------


def cluster_get(settings: AzureSettings, cluster: ClusterRef) -> ClusterState | None:
    """The managed cluster, or None if ARM answers 404. Raises CloudError, ValueError."""
    client = _client(settings, cluster)
    with _aks_errors():
        try:
            found = client.managed_clusters.get(cluster.resource_group, cluster.name)
        except ResourceNotFoundError:
            return None
    props = found.properties
    power = props.power_state if props else None
    return ClusterState(
        name=_text(found.name),
        location=normalise_location(found.location),
        kubernetes_version=_text(
            (props.current_kubernetes_version or props.kubernetes_version) if props else None
        ),
        fqdn=_text((props.fqdn or props.private_fqdn) if props else None),
        provisioning_state=_text(props.provisioning_state if props else None) or "Unknown",
        power_state=_text(power.code if power else None) or "Unknown",
    )


def pools_list(settings: AzureSettings, cluster: ClusterRef) -> list[PoolState]:
    """Every node pool of the cluster (System pools included). Raises CloudError (404
    ResourceNotFound when the cluster does not exist), ValueError."""
    client = _client(settings, cluster)
    with _aks_errors():
        pools = list(client.agent_pools.list(cluster.resource_group, cluster.name))
    return [_pool_state(pool) for pool in pools]


def pool_get(settings: AzureSettings, cluster: ClusterRef, name: str) -> PoolState | None:
    """The node pool, or None if it (or its cluster) does not exist. Raises CloudError,
    ValueError (bad name)."""
    check_pool_name(name)
    client = _client(settings, cluster)
    with _aks_errors():
        try:
            pool = client.agent_pools.get(cluster.resource_group, cluster.name, name)
        except ResourceNotFoundError:
            return None
    return _pool_state(pool)


def _pool_state(pool: Any) -> PoolState:
    props = pool.properties
    power = props.power_state if props else None
    auto = bool(props and props.enable_auto_scaling)
    return PoolState(
        name=_text(pool.name),
        vm_size=_text(props.vm_size if props else None),
        gpu_instance_profile=_text(props.gpu_instance_profile if props else None),
        count=int(props.count or 0) if props else 0,
        min_count=props.min_count if auto else None,
        max_count=props.max_count if auto else None,
        taints=tuple(props.node_taints or ()) if props else (),
        labels=tuple(sorted((props.node_labels or {}).items())) if props else (),
        mode=_text(props.mode if props else None) or "User",
        provisioning_state=_text(props.provisioning_state if props else None) or "Unknown",
        power_state=_text(power.code if power else None) or "Unknown",
        capacity_reservation_group_id=_text(props.capacity_reservation_group_id if props else None),
    )


# --- node pool operations -----------------------------------------------------------------------


def _pool_body(spec: PoolSpec) -> dict[str, Any]:
    props: dict[str, Any] = {
        "vmSize": spec.vm_size,
        "count": spec.count,
        "mode": "User",
        "osType": "Linux",
        "type": "VirtualMachineScaleSets",
        "nodeTaints": list(spec.taints),
        "nodeLabels": dict(spec.labels),
        "enableAutoScaling": spec.autoscaling,
    }
    low, high = spec.min_count, spec.max_count
    if low is not None and high is not None:  # spec.autoscaling
        props["count"] = min(max(spec.count, low), high)
        props.update(minCount=spec.min_count, maxCount=spec.max_count)
    if spec.gpu_instance_profile:
        props["gpuInstanceProfile"] = spec.gpu_instance_profile
    if spec.capacity_reservation_group_id:
        props["capacityReservationGroupID"] = spec.capacity_reservation_group_id
    return {"properties": props}


def _check_operation(operation: str, name: str) -> None:
    if operation not in OPERATIONS:
        raise ValueError(f"unknown operation {operation!r}; expected one of {OPERATIONS}")
    check_pool_name(name)


def _check_arguments(operation: str, name: str, spec: PoolSpec | None) -> None:
    _check_operation(operation, name)
    if operation == "create" and (spec is None or spec.name != name):
        raise ValueError("create needs the PoolSpec of the pool it names")
    if operation == "delete" and spec is not None:
        raise ValueError("delete takes no spec")


def pool_begin(
    settings: AzureSettings,
    cluster: ClusterRef,
    operation: str,
    *,
    name: str,
    spec: PoolSpec | None = None,
) -> str:
    """Start "create" (a PUT: create, or update the pool to `spec`; the same spec again is an
    idempotent update that succeeds) or "delete" on pool `name`; return the LRO continuation
    token without waiting.

    Raises ValueError for an unknown operation, a bad name or a missing/mismatched spec;
    CloudError when AKS refuses: transient for throttling, 5xx and 409 OperationNotAllowed (an
    operation in progress); permanent e.g. 400 InvalidParameter, BadRequest (size not allowed),
    ErrCode_InsufficientVCPUQuota, PropertyChangeNotAllowed (vmSize/MIG profile of a pool).
    """
    _check_arguments(operation, name, spec)
    pools = _client(settings, cluster).agent_pools
    polling = _SendOnly(settings.polling_interval)
    with _aks_errors():
        if spec is not None:  # create: checked above
            poller = pools.begin_create_or_update(  # type: ignore[call-overload]  # a JSON dict
                cluster.resource_group, cluster.name, name, _pool_body(spec), polling=polling
            )
        else:
            poller = pools.begin_delete(cluster.resource_group, cluster.name, name, polling=polling)
        return str(poller.continuation_token())


def pool_poll(
    settings: AzureSettings, cluster: ClusterRef, operation: str, *, name: str, token: str
) -> PoolProgress:
    """Ask AKS once how the operation behind ``token`` (from pool_begin) is doing; GETs only.

    Done: PoolProgress(done=True, pool=<PoolState>) after a create, pool None after a delete.
    Raises ValueError (bad operation, name or token), CloudError when polling fails (transient:
    poll again with the same token) or the operation ended Failed (status None, AKS's code,
    e.g. AllocationFailed).
    """
    _check_operation(operation, name)
    if not isinstance(token, str) or not token:
        raise ValueError("pool_poll needs the continuation token pool_begin returned")
    pools = _client(settings, cluster).agent_pools
    with _aks_errors():
        poller = _resumed(pools, cluster, operation, name, token, settings.polling_interval)
        result = poller.result()
        if not poller.polling_method().finished():
            return PoolProgress(done=False)
    if operation == "delete":
        return PoolProgress(done=True)
    pool = _pool_state(result) if result is not None else pool_get(settings, cluster, name)
    return PoolProgress(done=True, pool=pool)


def _resumed(
    pools: Any, cluster: ClusterRef, operation: str, name: str, token: str, interval: float
) -> LROPoller[Any]:
    polling = _PollOnce(interval)
    poller: LROPoller[Any]
    if operation == "create":
        # The body is in the token's past; the SDK ignores `parameters` when resuming.
        poller = pools.begin_create_or_update(
            cluster.resource_group, cluster.name, name, None,
            continuation_token=token, polling=polling,
        )  # fmt: skip
        return poller
    poller = pools.begin_delete(
        cluster.resource_group, cluster.name, name, continuation_token=token, polling=polling
    )
    return poller


# --- credentials --------------------------------------------------------------------------------


def user_kubeconfig(settings: AzureSettings, cluster: ClusterRef) -> bytes:
    """The cluster's user kubeconfig (listClusterUserCredential, format exec: its user runs
    kubelogin, so a researcher signs in with Entra ID), as YAML bytes to download.

    Raises CloudError (NoKubeconfig when AKS returns none), ValueError."""
    client = _client(settings, cluster)
    with _aks_errors():
        result = client.managed_clusters.list_cluster_user_credentials(
            cluster.resource_group, cluster.name, format="exec"
        )
    configs = list(result.kubeconfigs or [])
    chosen = next((c for c in configs if c.name == "clusterUser"), configs[0] if configs else None)
    if chosen is None or not chosen.value:
        raise CloudError("NoKubeconfig", f"AKS returned no user kubeconfig for {cluster.name}.")
    return bytes(chosen.value)


def kube_endpoint(settings: AzureSettings, cluster: ClusterRef) -> KubeEndpoint:
    """The API server of the cluster from its user kubeconfig (see user_kubeconfig).

    Raises CloudError (also InvalidKubeconfig when it cannot be read), ValueError."""
    return parse_endpoint(user_kubeconfig(settings, cluster))


def parse_endpoint(kubeconfig: bytes) -> KubeEndpoint:
    """Server and certificate-authority-data of the current context's cluster (the first
    cluster when there is no current context). Raises CloudError InvalidKubeconfig."""
    try:
        document = yaml.safe_load(kubeconfig)
        contexts = {c["name"]: c["context"] for c in document.get("contexts") or []}
        clusters = {c["name"]: c["cluster"] for c in document["clusters"]}
        context = contexts.get(document.get("current-context") or "")
        entry = clusters[context["cluster"]] if context else next(iter(clusters.values()))
        server = entry["server"]
    except (yaml.YAMLError, AttributeError, KeyError, TypeError, StopIteration) as exc:
        raise CloudError("InvalidKubeconfig", f"unreadable kubeconfig: {exc!r}") from exc
    if not isinstance(server, str) or not server:
        raise CloudError("InvalidKubeconfig", "the kubeconfig's cluster has no server")
    return KubeEndpoint(server=server, ca_data=entry.get("certificate-authority-data") or None)
