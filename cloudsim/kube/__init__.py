"""The emulator's Kubernetes API subset: one simulated API server per AKS managed cluster.

The ARM side (cloudsim.aks) owns clusters and agent pools and tells this package what nodes
exist through KubeClusters; everything inside a cluster (namespaces, quotas, pods, ...) lives
here and is served under server_path(sub, rg, cluster) (see cloudsim.kube.api).
"""

import time
from dataclasses import dataclass, field

from .cluster import Cluster


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
        self.clusters: dict[str, Cluster] = {}
        self._by_prefix: dict[str, str] = {}  # server_path -> key.

    def ensure_cluster(self, key: str, *, name: str) -> None:
        """Make the API server of a managed cluster exist (idempotent)."""
        if key not in self.clusters:
            prefix = prefix_of(key, name)
            self.clusters[key] = Cluster(key, name, prefix, time.time())
            self._by_prefix[prefix] = key

    def drop_cluster(self, key: str) -> None:
        """The managed cluster was deleted: forget all of its objects."""
        cluster = self.clusters.pop(key, None)
        if cluster is not None:
            self._by_prefix.pop(cluster.prefix, None)

    def sync_pool(self, key: str, shape: PoolShape) -> None:
        """Create or reshape an agent pool's nodes (count, profile, taints, labels).
        KeyError when the cluster does not exist."""
        self.clusters[key].sync_pool(shape, time.time())

    def drop_pool(self, key: str, pool_name: str) -> None:
        """The agent pool was deleted: its nodes go, and their pods become Pending."""
        cluster = self.clusters.get(key)
        if cluster is not None:
            cluster.drop_pool(pool_name, time.time())

    def find(self, path: str) -> tuple[Cluster, str] | None:
        """(cluster, path after its prefix) for a request path under /k8s/, or None."""
        parts = path.split("/")
        key = self._by_prefix.get("/".join(parts[:5]).lower())
        if key is None:
            return None
        return self.clusters[key], "/" + "/".join(parts[5:])


def server_path(subscription: str, resource_group: str, cluster: str) -> str:
    """Path prefix of a managed cluster's simulated API server, as the kubeconfig from
    listClusterUserCredential names it: ``/k8s/<sub>/<rg>/<cluster>`` (lower case)."""
    return f"/k8s/{subscription}/{resource_group}/{cluster}".lower()


def prefix_of(key: str, name: str) -> str:
    """server_path of a cluster from its ARM id key (/subscriptions/<sub>/resourcegroups/<rg>/
    providers/microsoft.containerservice/managedclusters/<name>)."""
    parts = key.strip("/").split("/")
    if (
        len(parts) >= 8
        and parts[0].lower() == "subscriptions"
        and parts[2].lower() == "resourcegroups"
    ):
        return server_path(parts[1], parts[3], parts[-1])
    return server_path("-", "-", name)  # Not an ARM id: still reachable, by name alone.


__all__ = ["Cluster", "KubeClusters", "PoolShape", "prefix_of", "server_path"]
