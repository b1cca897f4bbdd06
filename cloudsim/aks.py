"""Microsoft.ContainerService: managed clusters, their agent pools and user credentials.

Shapes follow Azure/azure-rest-api-specs .../Microsoft.ContainerService/aks/stable/2025-10-01/
examples (ManagedClustersGet, AgentPoolsCreate_GPUMIG, AgentPoolsList, AgentPoolsDelete,
ManagedClustersListClusterUserCredentials); error codes and texts are the ones AKS answers with
(errors.aks_*). PUT answers 201 (create) or 200 (update) with provisioningState Creating or
Updating and an Azure-AsyncOperation header; DELETE answers 202 with Azure-AsyncOperation and a
Location (operationresults) monitor, or 204 when there is nothing to delete.

When an operation succeeds the Kubernetes side hears of it through cloud.kube (KubeClusters):
ensure_cluster/sync_pool/drop_pool/drop_cluster, keyed by models.key_of(<cluster ARM id>).
"""

import base64
import re
import uuid
from dataclasses import dataclass, field

from . import aks_kubeconfig, errors, faults, quirks
from .cloud import ASYNC_KINDS, Cloud
from .errors import ArmError
from .kube import PoolShape, server_path
from .models import CONTAINER_SERVICE, AgentPool, ManagedCluster, key_of, resource_id
from .protocol import Request, Response, lro_headers
from .skus import SizeInfo, normalize_location

CLUSTER_TYPE = "Microsoft.ContainerService/managedClusters"
POOL_TYPE = "Microsoft.ContainerService/managedClusters/agentPools"
DEFAULT_KUBERNETES_VERSION = "1.33.5"
NODE_IMAGE = "AKSUbuntu-2204gen2containerd-202510.03.0"
MIG_PROFILES = ("MIG1g", "MIG2g", "MIG3g", "MIG4g", "MIG7g")
MIG_GPU_MODELS = ("A100", "H100")  # AKS offers MIG on A100 and H100 sizes only.
POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
TAINT = re.compile(
    r"^[A-Za-z0-9][-A-Za-z0-9_./]*=[-A-Za-z0-9_.]*:(NoSchedule|PreferNoSchedule|NoExecute)$"
)
MAX_COUNT = 1000  # Nodes per pool.
# CPU sizes for system pools: the GPU catalog has none. (vCPUs, GiB, quota family.)
SYSTEM_SIZES = {
    "standard_d4ds_v5": SizeInfo("Standard_D4ds_v5", 4, 16.0, 0, "standardDDSv5Family"),
    "standard_d8ds_v5": SizeInfo("Standard_D8ds_v5", 8, 32.0, 0, "standardDDSv5Family"),
}
SYSTEM_POOL_SIZE = "Standard_D4ds_v5"
SIZED_FAULTS = frozenset({"quota", "sku_not_available"})  # Worded by this module, as AKS does.


@dataclass
class PoolSpec:
    """What an agent pool PUT (or a profile in a cluster PUT) asks for, validated."""

    vm_size: str
    count: int
    mode: str = "User"
    enable_auto_scaling: bool = False
    min_count: int | None = None
    max_count: int | None = None
    taints: list = field(default_factory=list)
    labels: dict = field(default_factory=dict)
    gpu_instance_profile: str | None = None
    orchestrator_version: str = ""
    capacity_reservation_group_id: str | None = None


# --- ids and lookups ----------------------------------------------------------------------------


def cluster_id(sub: str, rg: str, name: str) -> str:
    return resource_id(sub, rg, CLUSTER_TYPE, name)


def _pool_key(cluster: ManagedCluster, name: str) -> str:
    return key_of(f"{cluster.id}/agentPools/{name}")


def _require_cluster(cloud: Cloud, req: Request) -> ManagedCluster:
    cluster = cloud.clusters.get(
        key_of(cluster_id(req.params["sub"], req.params["rg"], req.params["name"]))
    )
    if cluster is None:
        raise errors.not_found(CLUSTER_TYPE, req.params["name"], req.params["rg"])
    return cluster


def _require_pool(cloud: Cloud, req: Request, cluster: ManagedCluster) -> AgentPool:
    pool = cloud.pools.get(_pool_key(cluster, req.params["child"]))
    if pool is None:
        name = f"{cluster.name}/{req.params['child']}"
        raise errors.not_found(POOL_TYPE, name, req.params["rg"])
    return pool


def size_info(cloud: Cloud, location: str, vm_size: str) -> SizeInfo | None:
    """The size if the location offers it (catalog, unrestricted) or it is a system-pool CPU
    size, else None."""
    return cloud.offered(location, vm_size) or SYSTEM_SIZES.get(vm_size.lower())


def _ensure_idle(cloud: Cloud, cluster: ManagedCluster, pool: AgentPool | None) -> None:
    # AKS serialises operations on a pool and on its cluster: 409 OperationNotAllowed.
    if cloud.busy_with(cluster.active_op) is not None:
        raise errors.aks_busy(cluster.name, cluster.provisioning, agentpool=False)
    if pool is not None and cloud.busy_with(pool.active_op) is not None:
        raise errors.aks_busy(pool.name, pool.provisioning)


# --- pool spec validation -----------------------------------------------------------------------


def check_pool_name(name: str) -> None:
    """400 InvalidParameter unless 1-12 lowercase letters/digits starting with a letter."""
    if not POOL_NAME.fullmatch(name or ""):
        raise errors.aks_pool_name_invalid()


def _int_field(props: dict, name: str, default: int | None) -> int | None:
    value = props.get(name)
    if value is None:  # Absent or null: AKS fills in the default.
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.invalid_parameter(f"'{name}' must be an integer.", f"properties.{name}")
    if not 0 <= value <= MAX_COUNT:
        raise errors.invalid_parameter(
            f"'{name}' must be between 0 and {MAX_COUNT}.", f"properties.{name}"
        )
    return value


def _scaling(props: dict, mode: str) -> tuple[int, bool, int | None, int | None]:
    """(count, enableAutoScaling, minCount, maxCount), consistent as AKS requires."""
    auto = props.get("enableAutoScaling") is True
    low, high = _int_field(props, "minCount", None), _int_field(props, "maxCount", None)
    if not auto and (low is not None or high is not None):
        message = "minCount and maxCount can only be set when enableAutoScaling is true."
        raise errors.invalid_parameter(message, "properties.enableAutoScaling")
    if auto and (low is None or high is None or low > high):
        message = "enableAutoScaling needs minCount and maxCount with minCount <= maxCount."
        raise errors.invalid_parameter(message, "properties.minCount")
    count = _int_field(props, "count", low if auto else 1)
    if auto and not low <= count <= high:
        message = f"count {count} must be between minCount {low} and maxCount {high}."
        raise errors.invalid_parameter(message, "properties.count")
    if mode == "System" and (count < 1 or (auto and low < 1)):
        message = "A System mode agent pool needs at least one node."
        raise errors.invalid_parameter(message, "properties.count")
    return count, auto, low, high


def _taints_and_labels(props: dict) -> tuple[list, dict]:
    taints = props.get("nodeTaints") or []
    if not isinstance(taints, list) or not all(
        isinstance(t, str) and TAINT.fullmatch(t) for t in taints
    ):
        message = (
            "Each of 'nodeTaints' must look like key=value:NoSchedule|PreferNoSchedule|NoExecute."
        )
        raise errors.invalid_parameter(message, "properties.nodeTaints")
    labels = props.get("nodeLabels") or {}
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise errors.invalid_parameter(
            "'nodeLabels' must map strings to strings.", "properties.nodeLabels"
        )
    return list(taints), dict(labels)


def _mig_profile(props: dict) -> str | None:
    profile = props.get("gpuInstanceProfile")
    if profile in (None, ""):
        return None
    match = next(
        (p for p in MIG_PROFILES if isinstance(profile, str) and p.lower() == profile.lower()), None
    )
    if match is None:
        message = f"gpuInstanceProfile '{profile}' is not one of {', '.join(MIG_PROFILES)}."
        raise errors.invalid_parameter(message, "properties.gpuInstanceProfile")
    return match


def parse_pool(props, cluster: ManagedCluster) -> PoolSpec:
    """Validate a pool's properties (shape only; size, quota and capacity come later)."""
    if not isinstance(props, dict):
        raise errors.invalid_parameter("'properties' must be an object.", "properties")
    vm_size = props.get("vmSize")
    if not isinstance(vm_size, str) or not vm_size.strip():
        raise errors.invalid_parameter(
            "Required parameter 'vmSize' is missing (null).", "properties.vmSize"
        )
    if str(props.get("osType") or "Linux") != "Linux":
        raise errors.invalid_parameter(
            "The emulator runs Linux agent pools only.", "properties.osType"
        )
    mode = props.get("mode") or "User"
    if mode not in ("System", "User"):
        raise errors.invalid_parameter("'mode' must be System or User.", "properties.mode")
    count, auto, low, high = _scaling(props, mode)
    taints, labels = _taints_and_labels(props)
    version = props.get("orchestratorVersion") or cluster.kubernetes_version
    return PoolSpec(
        vm_size,
        count,
        mode,
        auto,
        low,
        high,
        taints,
        labels,
        _mig_profile(props),
        str(version),
        _reservation_group(props),
    )


CRG_ID = re.compile(
    r"/subscriptions/[^/]+/resourcegroups/[^/]+/providers/microsoft\.compute/"
    r"capacityreservationgroups/[^/]+",
    re.IGNORECASE,
)


def _reservation_group(props: dict) -> str | None:
    """properties.capacityReservationGroupID (AgentPoolsAssociate_CRG.json): the fully
    qualified id of a capacity reservation group, kept as given; AKS checks its shape."""
    given = props.get("capacityReservationGroupID")
    if given is None:
        return None
    if not isinstance(given, str) or not CRG_ID.fullmatch(given):
        message = (
            "capacityReservationGroupID must be the resource ID of a capacity reservation "
            "group: /subscriptions/{sub}/resourcegroups/{rg}/providers/Microsoft.Compute/"
            "capacityReservationGroups/{name}."
        )
        raise errors.invalid_parameter(message, "properties.capacityReservationGroupID")
    return given


def _offered_size(cloud: Cloud, cluster: ManagedCluster, name: str, spec: PoolSpec) -> SizeInfo:
    """The pool's size, offered in the cluster's location; MIG only on a MIG-capable size."""
    info = size_info(cloud, cluster.location, spec.vm_size)
    if info is None:
        raise errors.aks_size_not_allowed(name, cluster.location)
    if spec.gpu_instance_profile and not info.gpu_model.upper().startswith(MIG_GPU_MODELS):
        message = (
            f"gpuInstanceProfile {spec.gpu_instance_profile} is not supported on VM size "
            f"{info.name}: multi-instance GPU needs an A100 or H100 VM size."
        )
        raise errors.invalid_parameter(message, "properties.gpuInstanceProfile")
    return info


def _check_quota(cloud: Cloud, cluster: ManagedCluster, size: SizeInfo, count: int, exclude=None):
    shortfall = cloud.quota_shortfall(cluster.location, size, count, exclude)
    if shortfall is not None:
        family, limit, used, needed = shortfall
        label = "Total Regional vCPUs" if family == "cores" else family
        raise errors.aks_insufficient_quota(label, cluster.location, needed, limit - used)


def _allocation_error(cloud: Cloud, location: str, size: str, count: int, held: int = 0):
    """The LRO error the nodes' allocation will end with (an injected allocation fault, or
    fewer free slots than nodes; `held`: slots the pool already holds), or None."""
    fault = cloud.take_fault("aks.pool.create", ASYNC_KINDS)
    if fault is not None:
        return errors.allocation_failed(zonal=fault.kind == "zonal_allocation_failed")
    if cloud.free_capacity(location, size) + held < count:
        return errors.allocation_failed()
    return None


def _raise_pool_fault(cloud: Cloud, req: Request, cluster: ManagedCluster, props) -> None:
    """Injected faults for aks.pool.create; quota and SKU faults in AKS's words."""
    fault = cloud.take_fault("aks.pool.create", SIZED_FAULTS)
    if fault is None:
        faults.raise_injected(cloud, "aks.pool.create", req.params["sub"])
        return
    if fault.kind == "sku_not_available":
        raise errors.aks_size_not_allowed(req.params["child"], cluster.location)
    props = props if isinstance(props, dict) else {}
    size = size_info(cloud, cluster.location, str(props.get("vmSize") or ""))
    family = size.family if size else "cores"
    count = props.get("count") if isinstance(props.get("count"), int) else 1
    needed = (size.vcpus if size else 0) * max(count, 1)
    remaining = cloud.quota_limit(cluster.location, family) - cloud.usage(cluster.location, family)
    raise errors.aks_insufficient_quota(family, cluster.location, needed, remaining)


# --- bodies -------------------------------------------------------------------------------------


def pool_profile(pool: AgentPool) -> dict:
    """An agent pool's properties (AgentPoolsGet), also a cluster's agentPoolProfiles entry
    once "name" is added."""
    props = {
        "count": pool.count,
        "vmSize": pool.vm_size,
        "maxPods": 110,
        "type": "VirtualMachineScaleSets",
        "osType": "Linux",
        "osSKU": "Ubuntu",
        "mode": pool.mode,
        "enableAutoScaling": pool.enable_auto_scaling,
        "orchestratorVersion": pool.orchestrator_version,
        "currentOrchestratorVersion": pool.orchestrator_version,
        "nodeImageVersion": NODE_IMAGE,
        "provisioningState": pool.provisioning,
        "powerState": {"code": pool.power},
        "eTag": pool.etag,
    }
    if pool.enable_auto_scaling:
        props.update(minCount=pool.min_count, maxCount=pool.max_count)
    if pool.node_taints:
        props["nodeTaints"] = list(pool.node_taints)
    if pool.node_labels:
        props["nodeLabels"] = dict(pool.node_labels)
    if pool.gpu_instance_profile:
        props["gpuInstanceProfile"] = pool.gpu_instance_profile
    if pool.capacity_reservation_group_id:
        props["capacityReservationGroupID"] = pool.capacity_reservation_group_id
    return props


def pool_body(pool: AgentPool) -> dict:
    """AgentPool: id, name, type, properties."""
    return {"id": pool.id, "name": pool.name, "type": POOL_TYPE, "properties": pool_profile(pool)}


def cluster_body(cloud: Cloud, cluster: ManagedCluster) -> dict:
    """ManagedCluster (ManagedClustersGet): properties with its agentPoolProfiles."""
    profiles = [{"name": p.name, **pool_profile(p)} for p in cloud.cluster_pools(cluster)]
    props = {
        "provisioningState": cluster.provisioning,
        "powerState": {"code": cluster.power},
        "kubernetesVersion": cluster.kubernetes_version,
        "currentKubernetesVersion": cluster.kubernetes_version,
        "dnsPrefix": cluster.dns_prefix,
        "fqdn": cluster.fqdn,
        "azurePortalFQDN": cluster.fqdn.replace(".hcp.", ".portal.hcp."),
        "agentPoolProfiles": profiles,
        "nodeResourceGroup": f"MC_{cluster.resource_group}_{cluster.name}_{cluster.location}",
        "enableRBAC": True,
        "maxAgentPools": 100,
    }
    if cluster.aad:
        aad = {"managed": True, "enableAzureRBAC": True, "tenantID": aks_kubeconfig.EMULATOR_TENANT}
        props["aadProfile"] = aad
    body = {"id": cluster.id, "name": cluster.name, "type": CLUSTER_TYPE}
    body.update(location=quirks.shown_location(cloud, cluster.location), tags=dict(cluster.tags))
    body.update(sku={"name": "Base", "tier": "Free"}, properties=props)
    return body


# --- the Kubernetes side ------------------------------------------------------------------------


def _shape(cloud: Cloud, pool: AgentPool) -> PoolShape:
    info = size_info(cloud, pool.location, pool.vm_size) or cloud.catalog.lookup(pool.vm_size)
    return PoolShape(
        name=pool.name,
        vm_size=pool.vm_size,
        count=pool.count,
        vcpus=pool.vcpus,
        memory_gb=info.memory_gb if info else 0.0,
        gpus=info.gpus if info else 0,
        gpu_model=info.gpu_model if info else "",
        gpu_instance_profile=pool.gpu_instance_profile or "",
        taints=tuple(pool.node_taints),
        labels=dict(pool.node_labels),
    )


def _finish_pool(cloud: Cloud, cluster: ManagedCluster, pool: AgentPool, error) -> None:
    """End of a pool create/update: Succeeded (nodes synced to Kubernetes) or Failed with
    `error` (no nodes allocated, so no slots or quota held)."""
    if error:
        pool.provisioning, pool.last_error, pool.allocated = "Failed", error, False
        return
    pool.provisioning, pool.last_error = "Succeeded", None
    cloud.kube.ensure_cluster(key_of(cluster.id), name=cluster.name)
    cloud.kube.sync_pool(key_of(cluster.id), _shape(cloud, pool))


def _start_op(cloud: Cloud, subject, cluster: ManagedCluster, verb: str, apply, **kw):
    op = cloud.start_operation(
        verb, CONTAINER_SERVICE, cluster.location, cluster.subscription, subject.id, apply, **kw
    )
    subject.active_op = op.id
    return op


# --- agent pools --------------------------------------------------------------------------------


def put_pool(cloud: Cloud, req: Request) -> Response:
    """PUT .../agentPools/{pool}: 201 Creating or 200 Updating, with Azure-AsyncOperation."""
    cluster = _require_cluster(cloud, req)
    props = req.json().get("properties")
    _raise_pool_fault(cloud, req, cluster, props)
    name = req.params["child"]
    check_pool_name(name)
    pool = cloud.pools.get(_pool_key(cluster, name))
    _ensure_idle(cloud, cluster, pool)
    spec = parse_pool(props, cluster)
    if pool is not None:
        return _update_pool(cloud, req, cluster, pool, spec)
    return _create_pool(cloud, req, cluster, spec)


def _new_pool(cluster: ManagedCluster, name: str, spec: PoolSpec, size: SizeInfo) -> AgentPool:
    return AgentPool(
        id=f"{cluster.id}/agentPools/{name}",
        name=name,
        cluster_id=cluster.id,
        subscription=cluster.subscription,
        location=cluster.location,
        vm_size=size.name,
        vcpus=size.vcpus,
        family=size.family,
        count=spec.count,
    )


def _apply_spec(pool: AgentPool, spec: PoolSpec) -> None:
    pool.count, pool.mode = spec.count, spec.mode
    pool.enable_auto_scaling, pool.min_count, pool.max_count = (
        spec.enable_auto_scaling,
        spec.min_count,
        spec.max_count,
    )
    pool.node_taints, pool.node_labels = list(spec.taints), dict(spec.labels)
    pool.gpu_instance_profile = spec.gpu_instance_profile
    pool.capacity_reservation_group_id = spec.capacity_reservation_group_id
    pool.orchestrator_version = spec.orchestrator_version
    pool.etag = str(uuid.uuid4())


def add_pool(cloud: Cloud, cluster: ManagedCluster, name: str, spec: PoolSpec):
    """Validate size, MIG, quota and capacity, then record a Creating pool holding its slots
    now (so concurrent creates see them). Returns (pool, the LRO error it will end with)."""
    size = _offered_size(cloud, cluster, name, spec)
    _check_quota(cloud, cluster, size, spec.count)
    error = _allocation_error(cloud, cluster.location, size.name, spec.count)
    pool = _new_pool(cluster, name, spec, size)
    _apply_spec(pool, spec)
    pool.allocated = error is None
    cloud.pools[_pool_key(cluster, name)] = pool
    return pool, error


def _create_pool(cloud: Cloud, req: Request, cluster: ManagedCluster, spec: PoolSpec) -> Response:
    pool, error = add_pool(cloud, cluster, req.params["child"], spec)
    finish = lambda op: _finish_pool(cloud, cluster, pool, op.error)  # noqa: E731
    op = _start_op(cloud, pool, cluster, "PUT", finish, error=error)
    headers = quirks.create_headers(cloud, req, op, "aks.pool.create")
    return Response(201, pool_body(pool), headers)


def _update_pool(cloud, req: Request, cluster: ManagedCluster, pool: AgentPool, spec: PoolSpec):
    """Same size and MIG profile (AKS fixes both at creation); more nodes need quota and slots,
    and so does a pool whose allocation failed."""
    if spec.vm_size.lower() != pool.vm_size.lower():
        raise errors.aks_property_change("properties.vmSize")
    if (spec.gpu_instance_profile or "") != (pool.gpu_instance_profile or ""):
        raise errors.aks_property_change("properties.gpuInstanceProfile")
    if (spec.capacity_reservation_group_id or "").lower() != (
        pool.capacity_reservation_group_id or ""
    ).lower():
        raise errors.aks_property_change("properties.capacityReservationGroupID")
    size = _offered_size(cloud, cluster, pool.name, spec)
    held = pool.count if pool.allocated else 0
    error = None
    if spec.count > held:
        _check_quota(cloud, cluster, size, spec.count, exclude=pool)
        error = _allocation_error(cloud, cluster.location, size.name, spec.count, held)
    _apply_spec(pool, spec)
    pool.allocated = error is None
    pool.provisioning = "Updating"
    finish = lambda op: _finish_pool(cloud, cluster, pool, op.error)  # noqa: E731
    op = _start_op(cloud, pool, cluster, "PUT", finish, error=error)
    return Response(200, pool_body(pool), lro_headers(req, op, cloud.retry_after, location=False))


def get_pool(cloud: Cloud, req: Request) -> Response:
    """GET .../agentPools/{pool}: the AgentPool, or 404 ResourceNotFound."""
    faults.raise_injected(cloud, "aks.pool.get", req.params["sub"])
    cluster = _require_cluster(cloud, req)
    return Response(200, pool_body(_require_pool(cloud, req, cluster)))


def list_pools(cloud: Cloud, req: Request) -> Response:
    """GET .../agentPools: {"value": [AgentPool]} (AgentPoolsList), one page."""
    faults.raise_injected(cloud, "aks.pool.list", req.params["sub"])
    cluster = _require_cluster(cloud, req)
    return Response(200, {"value": [pool_body(p) for p in cloud.cluster_pools(cluster)]})


def _drop_pool(cloud: Cloud, cluster: ManagedCluster, pool: AgentPool) -> None:
    cloud.pools.pop(key_of(pool.id), None)
    cloud.kube.drop_pool(key_of(cluster.id), pool.name)


def delete_pool(cloud: Cloud, req: Request) -> Response:
    """DELETE .../agentPools/{pool}: 202 (Azure-AsyncOperation, Location), 204 if absent."""
    faults.raise_injected(cloud, "aks.pool.delete", req.params["sub"])
    cluster = _require_cluster(cloud, req)
    pool = cloud.pools.get(_pool_key(cluster, req.params["child"]))
    if pool is None:
        return Response(204)
    _ensure_idle(cloud, cluster, pool)
    pool.provisioning = "Deleting"
    finish = lambda op: _drop_pool(cloud, cluster, pool)  # noqa: E731
    op = _start_op(cloud, pool, cluster, "Delete", finish, done_status=204)
    return Response(202, None, lro_headers(req, op, cloud.retry_after))


# --- managed clusters ---------------------------------------------------------------------------


def new_cluster(sub: str, rg: str, name: str, location: str, body: dict | None = None):
    """A ManagedCluster record (not stored) from a PUT body's location, tags, dnsPrefix and
    kubernetesVersion."""
    body = body or {}
    props = body.get("properties") if isinstance(body.get("properties"), dict) else {}
    location = normalize_location(location)
    prefix = str(props.get("dnsPrefix") or f"{name}-dns")
    return ManagedCluster(
        id=cluster_id(sub, rg, name),
        name=name,
        subscription=sub,
        resource_group=rg,
        location=location,
        tags=dict(body.get("tags") or {}) if isinstance(body.get("tags"), dict) else {},
        kubernetes_version=str(props.get("kubernetesVersion") or DEFAULT_KUBERNETES_VERSION),
        dns_prefix=prefix,
        fqdn=f"{prefix}-{uuid.uuid4().hex[:8]}.hcp.{location}.azmk8s.io",
    )


def _profiles(props: dict, cluster: ManagedCluster) -> list[tuple[str, PoolSpec]]:
    """(name, spec) of each agentPoolProfiles entry; AKS needs at least one System pool."""
    profiles = props.get("agentPoolProfiles")
    if not isinstance(profiles, list) or not profiles:
        message = "Required parameter 'agentPoolProfiles' is missing (null)."
        raise errors.invalid_parameter(message, "properties.agentPoolProfiles")
    specs = []
    for profile in profiles:
        name = profile.get("name") if isinstance(profile, dict) else None
        check_pool_name(name if isinstance(name, str) else "")
        specs.append((name, parse_pool(profile, cluster)))
    if not any(spec.mode == "System" for _, spec in specs):
        message = "A managed cluster needs at least one agent pool with mode System."
        raise errors.invalid_parameter(message, "properties.agentPoolProfiles")
    return specs


def _finish_cluster(cloud: Cloud, cluster: ManagedCluster, pools: list, error) -> None:
    cluster.provisioning = "Failed" if error else "Succeeded"
    cloud.kube.ensure_cluster(key_of(cluster.id), name=cluster.name)
    for pool in pools:
        _finish_pool(cloud, cluster, pool, error)


def put_cluster(cloud: Cloud, req: Request) -> Response:
    """PUT managedClusters/{name}: 201 Creating (with its agentPoolProfiles' pools) or 200
    Updating (tags and kubernetesVersion; pools change through agentPools)."""
    body, sub, rg, name = req.json(), req.params["sub"], req.params["rg"], req.params["name"]
    cluster = cloud.clusters.get(key_of(cluster_id(sub, rg, name)))
    if cluster is not None:
        return _update_cluster(cloud, req, cluster, body)
    location = body.get("location")
    if not isinstance(location, str) or not location.strip():
        raise errors.invalid_parameter(
            "Required parameter 'location' is missing (null).", "location"
        )
    cluster = new_cluster(sub, rg, name, location, body)
    specs = _profiles(body.get("properties") or {}, cluster)
    created, error = [], None
    for pool_name, spec in specs:
        pool, pool_error = add_pool(cloud, cluster, pool_name, spec)
        created.append(pool)
        error = error or pool_error
    cloud.clusters[key_of(cluster.id)] = cluster
    finish = lambda op: _finish_cluster(cloud, cluster, created, op.error)  # noqa: E731
    op = _start_op(cloud, cluster, cluster, "PUT", finish, error=error)
    headers = lro_headers(req, op, cloud.retry_after, location=False)
    return Response(201, cluster_body(cloud, cluster), headers)


def _update_cluster(cloud: Cloud, req: Request, cluster: ManagedCluster, body: dict) -> Response:
    _ensure_idle(cloud, cluster, None)
    props = body.get("properties") if isinstance(body.get("properties"), dict) else {}
    if isinstance(body.get("tags"), dict):
        cluster.tags = dict(body["tags"])
    cluster.kubernetes_version = str(props.get("kubernetesVersion") or cluster.kubernetes_version)
    cluster.provisioning = "Updating"
    finish = lambda op: _finish_cluster(cloud, cluster, [], op.error)  # noqa: E731
    op = _start_op(cloud, cluster, cluster, "PUT", finish)
    headers = lro_headers(req, op, cloud.retry_after, location=False)
    return Response(200, cluster_body(cloud, cluster), headers)


def get_cluster(cloud: Cloud, req: Request) -> Response:
    """GET managedClusters/{name}: the ManagedCluster, or 404 ResourceNotFound."""
    faults.raise_injected(cloud, "aks.cluster.get", req.params["sub"])
    return Response(200, cluster_body(cloud, _require_cluster(cloud, req)))


def list_clusters(cloud: Cloud, req: Request) -> Response:
    """GET resourceGroups/{rg}/providers/Microsoft.ContainerService/managedClusters:
    {"value": [ManagedCluster]}, one page."""
    faults.raise_injected(cloud, "aks.cluster.get", req.params["sub"])
    prefix = key_of(f"/subscriptions/{req.params['sub']}/resourceGroups/{req.params['rg']}/")
    found = [c for key, c in cloud.clusters.items() if key.startswith(prefix)]
    return Response(200, {"value": [cluster_body(cloud, c) for c in found]})


def _drop_cluster(cloud: Cloud, cluster: ManagedCluster) -> None:
    for pool in cloud.cluster_pools(cluster):
        cloud.pools.pop(key_of(pool.id), None)
    cloud.clusters.pop(key_of(cluster.id), None)
    cloud.kube.drop_cluster(key_of(cluster.id))


def delete_cluster(cloud: Cloud, req: Request) -> Response:
    """DELETE managedClusters/{name}: 202 LRO removing it and its pools, 204 if absent."""
    cluster = cloud.clusters.get(
        key_of(cluster_id(req.params["sub"], req.params["rg"], req.params["name"]))
    )
    if cluster is None:
        return Response(204)
    _ensure_idle(cloud, cluster, None)
    for pool in cloud.cluster_pools(cluster):
        _ensure_idle(cloud, cluster, pool)
    cluster.provisioning = "Deleting"
    finish = lambda op: _drop_cluster(cloud, cluster)  # noqa: E731
    op = _start_op(cloud, cluster, cluster, "Delete", finish, done_status=204)
    return Response(202, None, lro_headers(req, op, cloud.retry_after))


def user_credentials(cloud: Cloud, req: Request) -> Response:
    """POST .../listClusterUserCredential[?format=exec|azure]: {"kubeconfigs": [{"name":
    "clusterUser", "value": base64 kubeconfig}]}; its server is this emulator's API server of
    the cluster (cloudsim.kube.server_path)."""
    faults.raise_injected(cloud, "aks.credentials", req.params["sub"])
    cluster = _require_cluster(cloud, req)
    format_ = req.query.get("format", "exec").lower()
    if format_ not in aks_kubeconfig.FORMATS:
        message = f"The value '{req.query.get('format')}' of parameter 'format' is invalid."
        raise errors.invalid_parameter(message, "format")
    path = server_path(cluster.subscription, cluster.resource_group, cluster.name)
    text = aks_kubeconfig.kubeconfig(
        f"{req.base_url}{path}", cluster.resource_group, cluster.name, format_
    )
    value = base64.b64encode(text.encode()).decode("ascii")
    return Response(200, {"kubeconfigs": [{"name": "clusterUser", "value": value}]})


# --- control (/_sim/aks/clusters, CLOUDSIM_AKS_CLUSTER) -----------------------------------------


def create_cluster_now(cloud: Cloud, sub: str, rg: str, name: str, location: str) -> dict:
    """Make a Succeeded cluster with one System pool "nodepool1" (1 x SYSTEM_POOL_SIZE) at once,
    as if it had existed before; the Kubernetes side learns of both. 409 if it exists."""
    cluster = new_cluster(sub, rg, name, location)
    if key_of(cluster.id) in cloud.clusters:
        raise ArmError(409, "Conflict", f"Managed cluster '{name}' already exists.")
    spec = PoolSpec(SYSTEM_POOL_SIZE, 1, "System", orchestrator_version=cluster.kubernetes_version)
    pool, error = add_pool(cloud, cluster, "nodepool1", spec)
    if error is not None:
        cloud.pools.pop(key_of(pool.id), None)
        raise ArmError(409, error["code"], error["message"])
    cloud.clusters[key_of(cluster.id)] = cluster
    _finish_cluster(cloud, cluster, [pool], None)
    return cluster_body(cloud, cluster)
