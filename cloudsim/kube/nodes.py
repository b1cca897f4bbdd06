"""Node objects of an AKS agent pool, as the kubelet and the NVIDIA device plugin report them.

MIG: slices per GPU and profile names from NVIDIA's MIG user guide ("Supported MIG Profiles"):
MIG1g 7, MIG2g 3, MIG3g 2, MIG4g 1, MIG7g 1 per GPU; named after the GPU's memory (A100 40 GB:
1g.5gb...; A100 80 GB and H100: 1g.10gb...). The device plugin's "mixed" strategy advertises
each as ``nvidia.com/mig-<profile>``. Reserved CPU and memory follow the AKS docs ("Resource
reservations"): kube-reserved CPU by core count, memory 20 MiB per pod + 50 MiB, plus the
kubelet's 100 MiB eviction threshold.
"""

import hashlib
import uuid

MIG_PER_GPU = {"MIG1g": 7, "MIG2g": 3, "MIG3g": 2, "MIG4g": 1, "MIG7g": 1}
MIG_NAMES = {
    80: {"MIG1g": "1g.10gb", "MIG2g": "2g.20gb", "MIG3g": "3g.40gb", "MIG4g": "4g.40gb"},
    40: {"MIG1g": "1g.5gb", "MIG2g": "2g.10gb", "MIG3g": "3g.20gb", "MIG4g": "4g.20gb"},
}
MIG_NAMES[80]["MIG7g"], MIG_NAMES[40]["MIG7g"] = "7g.80gb", "7g.40gb"
GPU_MEMORY_GB = {"A100-80GB": 80, "H100": 80, "A100": 40}  # MIG-capable models only.
MAX_PODS = 110
RESERVED_MILLICORES = ((64, 740), (32, 420), (16, 260), (8, 180), (4, 140), (2, 100), (1, 60))
KUBELET_VERSION = "v1.31.2"


def gpu_resources(shape) -> dict[str, int]:
    """Extended resources of one node: {"nvidia.com/gpu": n} or {"nvidia.com/mig-1g.10gb": n}."""
    if shape.gpus <= 0:
        return {}
    memory = GPU_MEMORY_GB.get(shape.gpu_model)
    profile = shape.gpu_instance_profile
    if not profile or memory is None or profile not in MIG_PER_GPU:
        return {"nvidia.com/gpu": shape.gpus}  # No MIG on this GPU: whole GPUs.
    name = MIG_NAMES[memory][profile]
    return {f"nvidia.com/mig-{name}": MIG_PER_GPU[profile] * shape.gpus}


def mig_profile_name(gpu_model: str, profile: str) -> str | None:
    """ "1g.10gb" for ("A100-80GB", "MIG1g"); None when the model or profile has no MIG."""
    memory = GPU_MEMORY_GB.get(gpu_model)
    return None if memory is None else MIG_NAMES[memory].get(profile)


def scale_set_id(cluster_key: str, pool: str) -> str:
    """The 8 digits AKS puts in a pool's scale set name, stable per cluster and pool."""
    digest = hashlib.sha256(f"{cluster_key}/{pool}".encode()).hexdigest()
    return f"{int(digest, 16) % 10**8:08d}"


def node_name(cluster_key: str, pool: str, index: int) -> str:
    """aks-<pool>-<8 digits>-vmss<index in base 36, 6 wide>, as AKS names VMSS nodes."""
    digits, number = "", index
    while True:
        number, rest = divmod(number, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[rest] + digits
        if number == 0:
            break
    return f"aks-{pool}-{scale_set_id(cluster_key, pool)}-vmss{digits.zfill(6)}"


def parse_taint(text: str) -> dict:
    """ "sku=gpu:NoSchedule" (or "key:Effect") -> {"key", "value"?, "effect"}."""
    pair, _, effect = text.rpartition(":")
    key, _, value = pair.partition("=")
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def allocatable(shape) -> dict[str, str]:
    """What the scheduler may hand out on one node (capacity less AKS's reservations)."""
    cores = max(int(shape.vcpus), 1)
    reserved_cpu = next(m for c, m in RESERVED_MILLICORES if cores >= c)
    memory_mi = int(shape.memory_gb * 1024) - (20 * MAX_PODS + 50) - 100
    found = {
        "cpu": f"{cores * 1000 - reserved_cpu}m",
        "memory": f"{max(memory_mi, 0)}Mi",
        "pods": str(MAX_PODS),
        "ephemeral-storage": "119716326407",
    }
    found.update({name: str(count) for name, count in gpu_resources(shape).items()})
    return found


def _node_info(digest: str) -> dict:
    return {
        "machineID": digest[:32],
        "systemUUID": str(uuid.UUID(digest[:32])),
        "bootID": digest[32:64],
        "kernelVersion": "5.15.0-1074-azure",
        "kubeProxyVersion": KUBELET_VERSION,
        "kubeletVersion": KUBELET_VERSION,
        "osImage": "Ubuntu 22.04.5 LTS",
        "operatingSystem": "linux",
        "architecture": "amd64",
        "containerRuntimeVersion": "containerd://1.7.22-1",
    }


def node_object(cluster_key: str, shape, index: int) -> dict:
    """The Node as `kubectl get node -o json` shows it (no uid/resourceVersion yet)."""
    name = node_name(cluster_key, shape.name, index)
    digest = hashlib.sha256(f"{cluster_key}/{name}".encode()).hexdigest()
    labels = {
        "agentpool": shape.name,
        "kubernetes.azure.com/agentpool": shape.name,
        "node.kubernetes.io/instance-type": shape.vm_size,
        "beta.kubernetes.io/instance-type": shape.vm_size,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/role": "agent",
    }
    if shape.gpus > 0:
        labels["kubernetes.azure.com/accelerator"] = "nvidia"
    labels.update(shape.labels or {})
    capacity = allocatable(shape) | {"cpu": str(int(shape.vcpus))}
    capacity["memory"] = f"{int(shape.memory_gb * 1024)}Mi"
    spec = {"providerID": f"azure:///{cluster_key}/vmss/{name}"}
    if shape.taints:
        spec["taints"] = [parse_taint(t) for t in shape.taints]
    status = {
        "capacity": capacity,
        "allocatable": allocatable(shape),
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        "addresses": [
            {"type": "InternalIP", "address": f"10.224.{int(digest[:2], 16)}.{4 + index % 250}"},
            {"type": "Hostname", "address": name},
        ],
        "nodeInfo": _node_info(digest),
    }
    metadata = {"name": name, "labels": labels, "annotations": {}}
    return {"metadata": metadata, "spec": spec, "status": status}
