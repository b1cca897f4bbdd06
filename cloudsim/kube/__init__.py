"""The emulator's Kubernetes API subset: one simulated API server per AKS managed cluster.

The ARM side (cloudsim.aks) owns clusters and agent pools and tells this package what nodes
exist through KubeClusters; everything inside a cluster (namespaces, quotas, pods, ...) lives
here and is served under ``/k8s/<cluster key>/`` (see cloudsim.kube.router).
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PoolShape:
    """What an agent pool's nodes look like to Kubernetes.

    gpus: GPUs per node; gpu_model: as the emulator's catalog spells it ("A100-80GB", "A100",
    "H100", "T4"...); gpu_instance_profile: "" (whole GPUs, ``nvidia.com/gpu``) or
    MIG1g/MIG2g/MIG3g/MIG4g/MIG7g (``nvidia.com/mig-<profile>`` per the MIG table);
    taints: "key=value:Effect"; labels: node labels added to the ones AKS sets."""

    name: str
    vm_size: str
    count: int
    vcpus: int
    memory_gb: float
    gpus: int
    gpu_model: str
    gpu_instance_profile: str = ""
    taints: tuple[str, ...] = ()
    labels: dict = field(default_factory=dict)


class KubeClusters:
    """Every simulated cluster's API state, keyed by the managed cluster's ARM id key
    (cloudsim.models.key_of). Callers hold Cloud.lock."""

    def __init__(self):
        self.clusters: dict = {}

    def ensure_cluster(self, key: str, *, name: str) -> None:
        """Make the API server of a managed cluster exist (idempotent)."""
        self.clusters.setdefault(key, {"name": name, "pools": {}})

    def drop_cluster(self, key: str) -> None:
        """The managed cluster was deleted: forget all of its objects."""
        self.clusters.pop(key, None)

    def sync_pool(self, key: str, shape: PoolShape) -> None:
        """Create or reshape an agent pool's nodes (count, profile, taints, labels)."""
        self.clusters[key]["pools"][shape.name] = shape

    def drop_pool(self, key: str, pool_name: str) -> None:
        """The agent pool was deleted: its nodes go, and their pods become Pending."""
        cluster = self.clusters.get(key)
        if cluster is not None:
            cluster["pools"].pop(pool_name, None)


def server_path(subscription: str, resource_group: str, cluster: str) -> str:
    """Path prefix of a managed cluster's simulated API server, as the kubeconfig from
    listClusterUserCredential names it: ``/k8s/<sub>/<rg>/<cluster>`` (lower case)."""
    return f"/k8s/{subscription}/{resource_group}/{cluster}".lower()
