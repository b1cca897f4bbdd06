"""GPU families of Azure VM sizes, and the driver each needs (docs/environments.md, "Drivers").

Pure: no Django. A family names the GPU as team quotas do (teams.models.GpuModel): "T4", "A10",
"A100", "H100", plus "V100". Each family needs one kind of NVIDIA driver:

- CUDA (the datacenter driver and toolkit) on the NC and ND sizes: NCasT4_v3, NC_A100_v4,
  ND_A100_v4, NCads_H100_v5, ND_H100_v5, NCv3 (learn.microsoft.com/azure/virtual-machines/
  extensions/hpccompute-gpu-linux: "NC/ND: CUDA toolkit version").
- GRID (the vGPU guest driver) on the NV sizes: NVadsA10_v5, whose fractional sizes support
  only GRID 17.x or later (learn.microsoft.com/azure/virtual-machines/linux/
  n-series-driver-setup).
"""

from __future__ import annotations

import re

CUDA, GRID = "cuda", "grid"
# (pattern on the size name without "_Promo", family). First match wins.
_FAMILY_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"Standard_NC\d+as_T4_v3", "T4"),
    (r"Standard_NV\d+adm?s_A10_v5", "A10"),
    (r"Standard_NC\d+ads_A100_v4", "A100"),
    (r"Standard_ND96a?m?sr_A100_v4", "A100"),
    (r"Standard_ND96asr_v4", "A100"),
    (r"Standard_NCC?\d+adi?s_H100_v5", "H100"),
    (r"Standard_ND96isr_H100_v5", "H100"),
    (r"Standard_NC\d+r?s_v3", "V100"),
)
DRIVER_OF_FAMILY: dict[str, str] = {
    "T4": CUDA,
    "A100": CUDA,
    "H100": CUDA,
    "V100": CUDA,
    "A10": GRID,
}
FAMILIES: tuple[str, ...] = tuple(DRIVER_OF_FAMILY)
# GRID 17.0 is the R550 driver branch (NVIDIA vGPU 17 release notes): the oldest NVadsA10 v5
# takes.
GRID_MIN_BRANCH = 550


def gpu_family(vm_size: str) -> str | None:
    """The GPU family of an Azure size ("Standard_NC24ads_A100_v4" -> "A100"), or None for a
    size this catalog knows no NVIDIA family of (a CPU size, an AMD NVv4)."""
    base = re.sub(r"_Promo$", "", vm_size.strip(), flags=re.IGNORECASE)
    for pattern, family in _FAMILY_PATTERNS:
        if re.fullmatch(pattern, base, flags=re.IGNORECASE):
            return family
    return None


def driver_kind(family: str) -> str:
    """CUDA or GRID for a family of FAMILIES; KeyError for any other."""
    return DRIVER_OF_FAMILY[family]
