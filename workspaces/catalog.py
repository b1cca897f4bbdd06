"""The GPU VM catalog: which Azure sizes exist where, with GPUs, GPU memory and price.

Source: data/azure_gpu_vms.csv, the GPU rows of SkyPilot's Azure catalog, itself built from the
Azure Retail Prices API (Linux pay-as-you-go, USD/hour); see data/SOURCE.md. GPU memory is not in
that file and comes from Azure's VM size documentation.
"""

import csv
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from django.conf import settings

CATALOG_CSV = Path(settings.BASE_DIR) / "data" / "azure_gpu_vms.csv"

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


@dataclass(frozen=True)
class CatalogRow:
    vm_size: str
    region: str
    gpu_model: str
    gpu_count: int
    gpu_memory_gib: int
    vcpus: int
    memory_gib: Decimal
    price_per_hour: Decimal  # USD/hour


def _decimal(text: str) -> Decimal | None:
    try:
        return Decimal(text) if text.strip() else None
    except InvalidOperation:
        return None


def _gpu(accelerator: str, vm_size: str) -> tuple[str, int] | None:
    if accelerator == "H100":
        return "H100", H100_MEMORY.get(vm_size, 80)
    return GPU_MODELS.get(accelerator)


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
        gpu_memory_gib=gpu[1],
        vcpus=int(float(row["vCPUs"])),
        memory_gib=Decimal(row["MemoryGiB"]),
        price_per_hour=price,
    )


def read_catalog(path: Path = CATALOG_CSV) -> list[CatalogRow]:
    """All offerable rows of the catalog file, in file order."""
    with open(path, newline="") as fh:
        return [r for r in map(parse_row, csv.DictReader(fh)) if r is not None]
