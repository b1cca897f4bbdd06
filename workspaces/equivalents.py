"""Equivalent sizes: the other GPU VM sizes a request may take when Azure has no capacity or
quota for the one chosen. Azure Compute Fleet's lesson ("accepting several VM sizes beats
waiting for one", learn.microsoft.com/azure/azure-compute-fleet/overview) applied to one
interactive VM. The rule lives here alone; the request form lists what it lets in, the request
stores the accepted sizes, and the VM backend tries them (workspaces.backends.vm_placement).

The rule: a size is equivalent to the chosen one when what fits the chosen one fits it, so it
has at least the chosen size's GPU memory per GPU (a model sharded for 80 GB GPUs still fits
each of its GPUs) and at least its GPU memory in total. So the same GPU model with as many GPUs
or more is equivalent, and so is another model with at least as much memory. It must cost at
most the price ceiling the requester accepts (USD/hour; the chosen size's price x
DEFAULT_CEILING_FACTOR unless they set another), at the price they would pay: pay-as-you-go, or
the Spot price for a Spot VM. GPU model, count and memory per GPU are SizeOffering's facts
(Microsoft's size documentation, via data/azure_gpu_vms.csv).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Protocol

from workspaces import selectors
from workspaces.models import SizeOffering

# The default ceiling: half as dear again as the chosen size. Dearer than that, most teams would
# rather wait than pay; the requester sees it and can set another.
DEFAULT_CEILING_FACTOR = Decimal("1.5")
# The highest ceiling accepted at the edge (USD/hour): above every Azure GPU VM price.
MAX_CEILING = Decimal("1000")


class GpuShape(Protocol):
    vm_size: str
    gpu_count: int
    gpu_memory_gib: int


def default_max_price(price_per_hour: Decimal) -> Decimal:
    """The ceiling shown by default for a size at ``price_per_hour`` (USD/hour): the price x
    DEFAULT_CEILING_FACTOR, rounded to the cent."""
    return (price_per_hour * DEFAULT_CEILING_FACTOR).quantize(Decimal("0.01"), ROUND_HALF_UP)


def is_equivalent(*, chosen: GpuShape, other: GpuShape) -> bool:
    """Whether ``other`` holds what fits ``chosen``: at least its GPU memory per GPU and in
    total (GiB). A size is not its own equivalent."""
    if other.vm_size == chosen.vm_size:
        return False
    total = chosen.gpu_count * chosen.gpu_memory_gib
    return (
        other.gpu_memory_gib >= chosen.gpu_memory_gib
        and other.gpu_count * other.gpu_memory_gib >= total
    )


def offering_price(offering: SizeOffering, *, spot: bool) -> Decimal | None:
    """USD/hour a workspace pays for ``offering``: its pay-as-you-go price, or for ``spot`` its
    Spot price (the offering must come from selectors.offering_list with ``now``; None where
    Azure has no Spot price)."""
    if not spot:
        return offering.price_per_hour
    spot_hourly = getattr(offering, "spot_hourly", None)
    return None if spot_hourly is None else Decimal(spot_hourly).quantize(Decimal("0.0001"))


@dataclass(frozen=True)
class Equivalent:
    """One equivalent size in the chosen size's region and the price it would be paid at
    (USD/hour)."""

    offering: SizeOffering
    price_per_hour: Decimal

    @property
    def vm_size(self) -> str:
        return self.offering.vm_size


def offering_equivalents(
    *, offering: SizeOffering, max_price: Decimal, now: datetime, spot: bool = False
) -> list[Equivalent]:
    """The offered sizes in ``offering``'s region that are equivalent to it (see the module)
    and cost at most ``max_price`` (USD/hour; Spot prices for ``spot``), cheapest first, then
    by name. One query."""
    found = []
    for other in selectors.offering_list(region=offering.region, now=now):
        price = offering_price(other, spot=spot)
        if price is None or price > max_price:
            continue
        if is_equivalent(chosen=offering, other=other):
            found.append(Equivalent(other, price))
    return sorted(found, key=lambda e: (e.price_per_hour, e.vm_size))
