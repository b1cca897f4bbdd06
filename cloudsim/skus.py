"""The VM size catalog the emulator offers, read from data/azure_gpu_vms.csv and the fractional
(vGPU) NVadsA10 v5 sizes of data/azure_fractional_gpu_vms.csv.

A size exists in a location iff the CSV has a row for (InstanceType, Region). Each size belongs to
a quota family, named exactly as Azure names it in the usages API. Its Hyper-V generations come
from the CSV's Generation column ("V1", "V2" or "V1,V2"); whether it takes Premium SSD
(PremiumIO) from Microsoft's VM size naming conventions: an "s" among the additive features
after the vCPU count (NC24ads_A100_v4, NC6s_v3, ND40rs_v2) means premium storage capable
(learn.microsoft.com/azure/virtual-machines/vm-naming-conventions).
"""

import csv
import re
from dataclasses import dataclass
from pathlib import Path

DEFAULT_CATALOG = Path(__file__).resolve().parent.parent / "data" / "azure_gpu_vms.csv"
FRACTIONAL_CATALOG = DEFAULT_CATALOG.with_name("azure_fractional_gpu_vms.csv")

# (pattern on the size name without "_Promo", Azure quota family). First match wins.
FAMILY_TABLE: tuple[tuple[str, str], ...] = (
    (r"Standard_NC\d+ads_A100_v4", "standardNCADSA100v4Family"),
    (r"Standard_ND96asr_v4", "standardNDASv4_A100Family"),
    (r"Standard_ND96amsr_A100_v4", "standardNDAMSv4_A100Family"),
    (r"Standard_NC\d+adi?s_H100_v5", "standardNCadsH100v5Family"),
    (r"Standard_ND96isr_H100_v5", "standardNDSH100v5Family"),
    (r"Standard_NC\d+as_T4_v3", "standardNCASv3_T4Family"),
    (r"Standard_NV\d+adm?s_A10_v5", "StandardNVADSA10v5Family"),
    (r"Standard_NC\d+r?s_v3", "standardNCSv3Family"),
    (r"Standard_ND40rs_v2", "standardNDSv2Family"),
    (r"Standard_NC(6|12|24|24r)", "standardNCFamily"),
    (r"Standard_NV(6|12|24)", "standardNVFamily"),
    (r"Standard_NV\d+s_v3", "standardNVSv3Family"),
    (r"Standard_NV\d+as_v4", "standardNVASv4Family"),
)

# The CSV is a verbatim upstream copy with known wrong GPU counts; Azure's size docs win.
GPU_COUNT_FIXES = {"standard_nd96isr_h100_v5": 8}


@dataclass(frozen=True)
class SizeInfo:
    """One VM size: name as Azure spells it, vcpus (count), memory_gb (GiB), gpus (count);
    gpu_model as the catalog's AcceleratorName spells it ("A100-80GB", "H100", "T4"; "" if none)."""

    name: str
    vcpus: int
    memory_gb: float
    gpus: int
    family: str
    gpu_model: str = ""
    generations: tuple[str, ...] = (
        "V1",
        "V2",
    )  # Hyper-V generations it boots, as Azure spells them
    premium_io: bool = True  # Premium SSD (Premium_LRS) disks may be attached


def premium_io_for(size: str) -> bool:
    """Whether Azure lists PremiumIO True for the size: an "s" among its additive features
    ("Standard_NC24ads_A100_v4" -> True, "Standard_NC6" and "Standard_NC24r" -> False)."""
    match = re.match(r"Standard_[A-Z]+\d+([a-z]*)", size)
    return bool(match and "s" in match.group(1))


def image_generation(image: dict) -> str | None:
    """The Hyper-V generation of a marketplace imageReference, "V1" or "V2", as far as the
    emulator knows it: Microsoft names Gen2 image SKUs with "gen2" (Canonical
    "22_04-lts-gen2"), and Canonical's "0001-com-ubuntu-server-*" SKUs without it are Gen1.
    None for anything else (no check)."""
    sku = str(image.get("sku") or "").lower()
    if "gen2" in sku:
        return "V2"
    if "gen1" in sku or str(image.get("offer") or "").lower().startswith("0001-com-ubuntu"):
        return "V1"
    return None


def family_for(size: str) -> str | None:
    """Azure quota family of a size: "Standard_NC24ads_A100_v4" -> "standardNCADSA100v4Family"."""
    base = re.sub(r"_Promo$", "", size, flags=re.IGNORECASE)
    for pattern, family in FAMILY_TABLE:
        if re.fullmatch(pattern, base, flags=re.IGNORECASE):
            return family
    return None


def family_display_name(family: str) -> str:
    """Usage label: "standardNCADSA100v4Family" -> "Standard NCADSA100v4 Family vCPUs"."""
    core = re.sub(r"^standard", "", family, flags=re.IGNORECASE)
    core = re.sub(r"Family$", "", core)
    return f"Standard {core} Family vCPUs"


def normalize_location(location: str) -> str:
    """ARM accepts display names too: "East US" -> "eastus"."""
    return location.replace(" ", "").lower()


class Catalog:
    """Sizes per location. Lookups are case-insensitive, as in ARM."""

    def __init__(self, sizes: dict[tuple[str, str], SizeInfo]):
        self._sizes = sizes

    def get(self, location: str, size: str) -> SizeInfo | None:
        """The size offered in the location, or None when the catalog has no such row."""
        return self._sizes.get((normalize_location(location), size.lower()))

    def lookup(self, size: str) -> SizeInfo | None:
        """The size in any location (for messages about sizes a location lacks)."""
        wanted = size.lower()
        return next((s for (_, key), s in self._sizes.items() if key == wanted), None)

    def in_location(self, location: str) -> list[SizeInfo]:
        """Sizes offered in one location, sorted by name."""
        loc = normalize_location(location)
        return sorted((s for (lo, _), s in self._sizes.items() if lo == loc), key=lambda s: s.name)

    def locations(self) -> list[str]:
        """Every location with at least one size, sorted."""
        return sorted({lo for lo, _ in self._sizes})

    def families_in(self, location: str) -> list[str]:
        """Quota families with at least one size in the location, sorted case-insensitively."""
        return sorted({s.family for s in self.in_location(location)}, key=str.lower)


def _size_from_row(row: dict[str, str]) -> SizeInfo | None:
    name = row["InstanceType"].strip()
    family = family_for(name)
    if family is None:
        return None  # A size we have no quota family for cannot be deployed meaningfully.
    gpus = GPU_COUNT_FIXES.get(name.lower(), int(float(row["AcceleratorCount"] or 0)))
    return SizeInfo(
        name=name,
        vcpus=int(float(row["vCPUs"])),
        memory_gb=float(row["MemoryGiB"]),
        gpus=gpus,
        family=family,
        gpu_model=(row.get("AcceleratorName") or "").strip(),
        generations=_generations(row.get("Generation")),
        premium_io=premium_io_for(name),
    )


def _generations(value: str | None) -> tuple[str, ...]:
    found = tuple(g.strip().upper() for g in (value or "").split(",") if g.strip())
    return found or ("V1",)  # Azure: a size without HyperVGenerations boots Gen1 only.


def load_catalog(path: str | Path | None = None) -> Catalog:
    """Read the CSV (default: data/azure_gpu_vms.csv and data/azure_fractional_gpu_vms.csv at
    the repository root). A fractional size counts 1 GPU, as Azure's resource SKUs say."""
    sizes: dict[tuple[str, str], SizeInfo] = {}
    for one in [path] if path else [DEFAULT_CATALOG, FRACTIONAL_CATALOG]:
        with open(one, newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                info = _size_from_row(row)
                if info is not None:
                    sizes[(normalize_location(row["Region"]), info.name.lower())] = info
    return Catalog(sizes)
