"""GPU amounts as quotas count them: whole GPUs, fractional (vGPU) VMs as their share, and MIG
slices as sevenths of a GPU.

A fractional VM size gets 1/partition of one GPU (Azure's NVadsA10 v5: Standard_NV6ads_A10_v5
is 1/6 of an A10, NV12ads 1/3, NV18ads 1/2; see workspaces.catalog), so six NV6ads VMs are
exactly one A10 of the quota.

An A100 or H100 splits into 7 compute slices; a MIG profile's leading number is how many it
takes (``1g.10gb`` = 1/7 of a GPU, ``3g.40gb`` = 3/7, ``7g.80gb`` = the whole GPU). An AKS
namespace counts as its GPU quota, in whole GPUs. Amounts are exact ``Fraction`` values, so
seven 1g slices are exactly one GPU.
"""

import re
from fractions import Fraction

SLICES_PER_GPU = 7
_PROFILE = re.compile(r"^([1-7])g\.\d+gb$")


def mig_slices(profile: str) -> int:
    """Compute slices (sevenths of a GPU) that a MIG profile such as ``3g.40gb`` takes.
    Raises ValueError for a string that is not a MIG profile."""
    match = _PROFILE.match(profile)
    if not match or match.group(1) in {"5", "6"}:
        raise ValueError(f"{profile!r} is not a MIG profile (1g, 2g, 3g, 4g or 7g).")
    return int(match.group(1))


def gpu_share(*, gpus: int = 0, slices: int = 0, partition: int = 1) -> Fraction:
    """GPUs counted against a quota: ``gpus`` GPUs of 1/``partition`` of a GPU each (1: whole
    GPUs) plus ``slices`` sevenths."""
    return Fraction(gpus, partition) + Fraction(slices, SLICES_PER_GPU)


def format_gpus(amount: int | Fraction) -> str:
    """'3', '3/7' or '1 3/7' for a GPU amount (int or Fraction)."""
    amount = Fraction(amount)
    whole, part = divmod(amount.numerator, amount.denominator)
    if not part:
        return str(whole)
    fraction = f"{part}/{amount.denominator}"
    return f"{whole} {fraction}" if whole else fraction
