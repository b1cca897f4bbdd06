"""NVIDIA MIG profiles as AKS exposes them: an agent pool created with ``gpu_instance_profile``
MIG1g..MIG7g splits every GPU of its nodes into equal instances of one profile, each a
Kubernetes extended resource ``nvidia.com/mig-<profile>`` (MIG "single" strategy).

Facts: NVIDIA's MIG user guide (supported profiles of A100 40GB and 80GB, H100 80GB and H100
NVL 94GB) and AKS's "Create a multi-instance GPU node pool" (the GPUInstanceProfile values).
A profile's leading number is its compute slices, in sevenths of a GPU.
"""

from dataclasses import dataclass

INSTANCE_PROFILES = ("MIG1g", "MIG2g", "MIG3g", "MIG4g", "MIG7g")
# Instances of the profile one GPU holds: 7 x 1g, 3 x 2g (one slice unused), 2 x 3g, ...
INSTANCES_PER_GPU = {"MIG1g": 7, "MIG2g": 3, "MIG3g": 2, "MIG4g": 1, "MIG7g": 1}
# Memory of each instance, GB, by the GPU's memory (GiB as the catalog states it).
_MEMORY = {
    80: {"MIG1g": 10, "MIG2g": 20, "MIG3g": 40, "MIG4g": 40, "MIG7g": 80},
    40: {"MIG1g": 5, "MIG2g": 10, "MIG3g": 20, "MIG4g": 20, "MIG7g": 40},
    94: {"MIG1g": 12, "MIG2g": 24, "MIG3g": 47, "MIG4g": 47, "MIG7g": 94},  # H100 NVL
}
# GPU models whose MIG mode AKS supports (A100 and H100 N-series sizes).
MIG_GPU_MODELS = frozenset({"A100", "H100"})


@dataclass(frozen=True)
class MigProfile:
    """One MIG profile on one GPU kind: ``name`` ("1g.10gb"), ``slices`` (sevenths of a GPU),
    ``instance_profile`` (the AKS agent pool value, "MIG1g")."""

    name: str
    slices: int
    instance_profile: str
    memory_gb: int = 0  # the instance's GPU memory, as its name says ("1g.10gb": 10)

    @property
    def resource(self) -> str:
        """The Kubernetes extended resource a pod requests: "nvidia.com/mig-1g.10gb"."""
        return f"nvidia.com/mig-{self.name}"


def supports_mig(gpu_model: str, gpu_memory_gib: int) -> bool:
    """Whether AKS can create a MIG node pool of this GPU (A100 40/80 GB, H100 80/94 GB)."""
    return gpu_model in MIG_GPU_MODELS and gpu_memory_gib in _MEMORY


def profile_for(instance_profile: str, gpu_memory_gib: int) -> MigProfile:
    """The MIG profile a pool with ``instance_profile`` gives on GPUs of ``gpu_memory_gib``
    GiB. Raises ValueError for an unknown instance profile or a GPU without MIG support."""
    if instance_profile not in INSTANCES_PER_GPU:
        raise ValueError(
            f"{instance_profile!r} is not a GPU instance profile ({', '.join(INSTANCE_PROFILES)})."
        )
    if gpu_memory_gib not in _MEMORY:
        raise ValueError(f"A GPU with {gpu_memory_gib} GB has no MIG profiles (A100 or H100 only).")
    memory = _MEMORY[gpu_memory_gib][instance_profile]
    slices = int(instance_profile[3])
    return MigProfile(f"{slices}g.{memory}gb", slices, instance_profile, memory)


def instances_per_node(instance_profile: str, gpus: int) -> int:
    """MIG instances one node offers: instances per GPU x its GPUs."""
    return INSTANCES_PER_GPU[instance_profile] * gpus
