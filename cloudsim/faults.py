"""Turning queued faults into the failures Azure would produce."""

from . import errors
from .cloud import ASYNC_KINDS, SPOT_QUOTA, SYNC_KINDS, Cloud
from .skus import normalize_location


def raise_injected(
    cloud: Cloud,
    op: str,
    subscription: str = "",
    location: str = "",
    size: str = "",
    *,
    spot: bool = False,
) -> None:
    """Raise the ArmError for the next synchronous fault queued for `op`, if any.

    `location` and `size` word the SkuNotAvailable and quota messages; `spot` (a Spot VM)
    makes a quota fault name the Spot quota instead of the size's family."""
    fault = cloud.take_fault(op, SYNC_KINDS)
    if fault is None:
        return
    if fault.kind == "throttle":
        raise errors.throttled(op, fault.retry_after)
    if fault.kind == "conflict":
        raise errors.injected_conflict(op)
    if fault.kind == "server_error":
        raise errors.server_error()
    if fault.kind == "unavailable":
        raise errors.unavailable(fault.retry_after)
    if fault.kind == "authorization_failed":
        raise errors.authorization_failed(op, subscription)
    loc = normalize_location(location)
    if fault.kind == "sku_not_available":
        raise errors.sku_not_available(size, loc)
    raise _quota_fault(cloud, subscription, loc, size, spot)


def _quota_fault(
    cloud: Cloud, subscription: str, location: str, size: str, spot: bool
) -> errors.ArmError:
    # Word it with the real numbers, so the message reads like a genuine quota failure.
    info = cloud.catalog.lookup(size)
    family = SPOT_QUOTA if spot else (info.family if info else "cores")
    vcpus = info.vcpus if info else 0
    limit = cloud.quota_limit(location, family)
    used = cloud.usage(location, family)
    return errors.quota_exceeded(subscription, family, location, limit, used, vcpus)


def allocation_error(
    cloud: Cloud, op: str, location: str, size: str, *, reserved: bool = False
) -> dict | None:
    """The LRO error an allocation of `size` will end with, or None if it will succeed.

    Decided now (the slot is taken now) but reported when the operation completes, like Azure.
    An injected allocation fault wins over the capacity check; a VM taking an unused instance
    of its capacity reservation (`reserved`) needs no free slot of the region."""
    fault = cloud.take_fault(op, ASYNC_KINDS)
    if fault is not None:
        return errors.allocation_failed(zonal=fault.kind == "zonal_allocation_failed")
    if not reserved and cloud.free_capacity(location, size) <= 0:
        return errors.allocation_failed()
    return None
