"""The GPU VM catalog: which Azure sizes exist where, with GPUs, GPU memory and price.

Sources: data/azure_gpu_vms.csv, the GPU rows of SkyPilot's Azure catalog, itself built from the
Azure Retail Prices API (Linux pay-as-you-go, USD/hour), and data/azure_fractional_gpu_vms.csv,
the fractional (vGPU) NVadsA10 v5 rows of an earlier SkyPilot catalog that the first leaves out;
see data/SOURCE.md. GPU memory and GPU partitions are not in those files and come from Azure's
VM size documentation.
"""

import csv
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from django.conf import settings

CATALOG_CSV = Path(settings.BASE_DIR) / "data" / "azure_gpu_vms.csv"
FRACTIONAL_CSV = Path(settings.BASE_DIR) / "data" / "azure_fractional_gpu_vms.csv"
CATALOG_FILES = (CATALOG_CSV, FRACTIONAL_CSV)

# Accelerator name in the CSV -> (GPU model as quotas count it, GiB per GPU, per Azure docs).
GPU_MODELS = {
    "A100-80GB": ("A100", 80),
    "A100": ("A100", 40),
    "T4": ("T4", 16),
    "A10": ("A10", 24),
}
# H100 memory differs by series: NCads H100 v5 has 94 GB (NVL), ND H100 v5 has 80 GB (SXM).
H100_MEMORY = {"Standard_NC40ads_H100_v5": 94, "Standard_NC80adis_H100_v5": 94}
# The source miscounts this size (12); Azure documents 8 H100 GPUs.
GPU_COUNT_FIXES = {"Standard_ND96isr_H100_v5": 8}
# Fractional GPU sizes (NVadsA10 v5, Microsoft's size docs "GPU partition" and "GPU memory"
# columns): the VM gets 1/partition of one A10 and that many GiB of its frame buffer. The source
# counts them as 1 GPU each.
GPU_PARTITIONS = {
    "Standard_NV6ads_A10_v5": (6, 4),
    "Standard_NV12ads_A10_v5": (3, 8),
    "Standard_NV18ads_A10_v5": (2, 12),
}


@dataclass(frozen=True)
class CatalogRow:
    vm_size: str
    region: str
    gpu_model: str
    gpu_count: int
    gpu_memory_gib: int  # per GPU; per partition for a fractional size
    vcpus: int
    memory_gib: Decimal
    price_per_hour: Decimal  # USD/hour
    gpu_partition: int = 1  # 1: whole GPUs; n: each "GPU" is 1/n of one (vGPU)


def _decimal(text: str) -> Decimal | None:
    try:
        return Decimal(text) if text.strip() else None
    except InvalidOperation:
        return None


def _gpu(accelerator: str, vm_size: str) -> tuple[str, int] | None:
    if accelerator == "H100":
        return "H100", H100_MEMORY.get(vm_size, 80)
    gpu = GPU_MODELS.get(accelerator)
    if gpu and vm_size in GPU_PARTITIONS:
        return gpu[0], GPU_PARTITIONS[vm_size][1]
    return gpu


def parse_row(row: dict[str, str]) -> CatalogRow | None:
    """One CSV row as a CatalogRow, or None for what cannot be offered: retired or AMD GPUs,
    promotional sizes, and rows without a price."""
    vm_size = row["InstanceType"]
    gpu = _gpu(row["AcceleratorName"], vm_size)
    price = _decimal(row["Price"])
    if gpu is None or price is None or vm_size.endswith("_Promo"):
        return None
    return CatalogRow(
        vm_size=vm_size,
        region=row["Region"],
        gpu_model=gpu[0],
        gpu_count=GPU_COUNT_FIXES.get(vm_size, int(row["AcceleratorCount"])),
        gpu_partition=GPU_PARTITIONS.get(vm_size, (1, 0))[0],
        gpu_memory_gib=gpu[1],
        vcpus=int(float(row["vCPUs"])),
        memory_gib=Decimal(row["MemoryGiB"]),
        price_per_hour=price,
    )


def read_catalog(*paths: Path | str) -> list[CatalogRow]:
    """All offerable rows of the catalog files (default: CATALOG_FILES), in file order."""
    rows: list[CatalogRow] = []
    for path in paths or CATALOG_FILES:
        with open(path, newline="") as fh:
            rows += [r for r in map(parse_row, csv.DictReader(fh)) if r is not None]
    return rows
