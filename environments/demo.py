"""The catalog `make run` starts with (clusters' seed_demo calls seed_demo_environments).

Images are pinned to versions that existed when this was written; docs/environments.md says how
to list the current ones. PyTorch 2.5.1 wheels are built for CUDA 12.4 (pytorch.org).
NC and ND sizes get Ubuntu-HPC, whose driver is preinstalled: ready minutes sooner than the
extension, and the extension's CUDA drivers are documented for Ubuntu 20.04 only (end of
standard support 2025). NVadsA10 v5 gets the extension, which installs GRID on 22.04.
"""

from datetime import datetime
from typing import Any

from environments.models import Environment
from environments.validation import environment_clean

UBUNTU_HPC = "microsoft-dsvm:ubuntu-hpc:2204:22.04.2024102301"
UBUNTU_JAMMY = "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:22.04.202510230"
JUPYTER_PYTORCH = "quay.io/jupyter/pytorch-notebook:cuda12-2024-09-30"
_PYTORCH = ["torch==2.5.1", "torchvision==0.20.1", "numpy==2.1.3"]
_FRAMEWORKS = {"PyTorch": "2.5.1", "torchvision": "0.20.1", "JupyterLab": "4.3"}

DEMO_ENVIRONMENTS: list[dict[str, Any]] = [
    {
        "rank": 10,
        "name": "PyTorch 2.5 + CUDA 12 (Ubuntu-HPC)",
        "slug": "pytorch-cuda",
        "description": "PyTorch with CUDA on NC and ND sizes. The image carries the NVIDIA driver, "
        "CUDA and NCCL, so it is ready minutes sooner than a driver installed on boot.",
        "contents": {
            "os": "Ubuntu 22.04 (Ubuntu-HPC)",
            "driver": "NVIDIA datacenter driver (preinstalled)",
            "cuda": "12.4",
            "python": "3.11",
            "frameworks": _FRAMEWORKS,
        },
        "kinds": ["vm"],
        "vm_image": UBUNTU_HPC,
        "driver_method": "preinstalled",
        "gpu_families": ["T4", "A100", "H100", "V100"],
        "layer": {
            "conda": {"python": "3.11", "channels": ["conda-forge"]},
            "pip": _PYTORCH,
            "vscode": True,
        },
    },
    {
        "rank": 10,
        "name": "PyTorch 2.5 on a fractional A10 (GRID)",
        "slug": "pytorch-a10",
        "description": "PyTorch on the NVadsA10 v5 sizes, whose vGPU needs NVIDIA's GRID driver: "
        "the NVIDIA GPU Driver Extension installs it (GRID 17.x) while the VM boots.",
        "contents": {
            "os": "Ubuntu 22.04",
            "driver": "NVIDIA GRID 17.x (driver extension)",
            "cuda": "12.4 (PyTorch wheels)",
            "python": "3.10",
            "frameworks": _FRAMEWORKS,
        },
        "kinds": ["vm"],
        "vm_image": UBUNTU_JAMMY,
        "driver_method": "extension",
        "gpu_families": ["A10"],
        "extension_settings": {"A10": {"updateOS": False}},
        "layer": {"packages": ["python3-venv", "python3-pip"], "pip": _PYTORCH},
    },
    {
        "rank": 50,
        "name": "CUDA minimal (Ubuntu-HPC)",
        "slug": "cuda-minimal",
        "description": "The Ubuntu-HPC image's NVIDIA driver, CUDA and NCCL with a plain Python "
        "venv and JupyterLab: bring your own frameworks.",
        "contents": {
            "os": "Ubuntu 22.04 (Ubuntu-HPC)",
            "driver": "NVIDIA datacenter driver (preinstalled)",
            "cuda": "12 (preinstalled)",
            "python": "3.10",
        },
        "kinds": ["vm"],
        "vm_image": UBUNTU_HPC,
        "driver_method": "preinstalled",
        "gpu_families": ["T4", "A100", "H100", "V100"],
        "layer": {"packages": ["python3-venv", "python3-pip"]},
    },
    {
        "rank": 10,
        "name": "Jupyter PyTorch (CUDA 12) container",
        "slug": "jupyter-pytorch-container",
        "description": "The Jupyter project's PyTorch notebook image for MIG slices and "
        "namespaces, pinned to a dated tag.",
        "contents": {"os": "Ubuntu 24.04", "cuda": "12", "frameworks": {"PyTorch": "2.4"}},
        "kinds": ["mig", "namespace"],
        "container_image": JUPYTER_PYTORCH,
    },
]


def seed_demo_environments(*, now: datetime) -> list[Environment]:
    """Create or refresh the DEMO_ENVIRONMENTS in the catalog (team None), checked as a
    platform admin's would be, with pinned images. Returns them in DEMO_ENVIRONMENTS' order."""
    seeded = []
    for spec in DEMO_ENVIRONMENTS:
        values = {k: v for k, v in spec.items() if k != "rank"}
        clean = environment_clean(values, pinned=True)
        environment, _ = Environment.objects.update_or_create(
            team=None,
            slug=clean["slug"],
            defaults={**clean, "rank": spec["rank"], "updated_at": now},
            create_defaults={**clean, "rank": spec["rank"], "created_at": now, "updated_at": now},
        )
        seeded.append(environment)
    return seeded
