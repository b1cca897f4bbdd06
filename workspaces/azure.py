"""The Azure facts a VM workspace depends on: the connection (azure_settings, from Django
settings; azure_in_request for a call a web request waits for), the pre-check of one size in
one region (azure_precheck: restrictions and quotas), and the vCPUs left per size and region
(azure_headroom), cached until a workspace's operation changes the usage
(azure_usage_changed).

Errors raised: CloudError (Azure refused or failed the read).
"""

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from django.conf import settings
from django.core.cache import cache

from cloud import azure_vm, bounded
from cloud.clients import AzureSettings
from cloud.errors import CloudError

T = TypeVar("T")


def azure_settings() -> AzureSettings:
    """The Azure connection from Django settings (AZURE_* environment variables)."""
    return AzureSettings(
        subscription_id=settings.AZURE_SUBSCRIPTION_ID,
        resource_group=settings.AZURE_RESOURCE_GROUP,
        subnet_id=settings.AZURE_SUBNET_ID,
        endpoint=settings.AZURE_ENDPOINT,
        credential=settings.AZURE_CREDENTIAL,
        retry_total=settings.AZURE_RETRY_TOTAL,
        retry_backoff=settings.AZURE_RETRY_BACKOFF,
        polling_interval=settings.AZURE_POLLING_INTERVAL,
        connection_timeout=settings.AZURE_CONNECT_TIMEOUT,
        read_timeout=settings.AZURE_READ_TIMEOUT,
    )


def azure_in_request(call: Callable[[AzureSettings], T]) -> T:
    """``call(settings)`` for a web request that waits for its answer: an Azure or Kubernetes
    call of cloud/ (no ORM: it runs in another thread), with the request's short timeouts
    (AZURE_REQUEST_CONNECT_TIMEOUT, AZURE_REQUEST_READ_TIMEOUT, all attempts within
    AZURE_REQUEST_DEADLINE seconds), in this process's pool of AZURE_REQUEST_SLOTS
    (cloud.bounded). Raises CloudBusy (no free slot: 503), CloudTimeout (the deadline passed:
    504), CloudError (Azure refused), ValueError."""
    deadline = settings.AZURE_REQUEST_DEADLINE
    request_settings = replace(
        azure_settings(),
        connection_timeout=settings.AZURE_REQUEST_CONNECT_TIMEOUT,
        read_timeout=settings.AZURE_REQUEST_READ_TIMEOUT,
        total_timeout=deadline,
    )
    pool = bounded.request_pool(settings.AZURE_REQUEST_SLOTS)
    return pool.run(lambda: call(request_settings), deadline=deadline)


@dataclass(frozen=True)
class Precheck:
    """Azure's answer for one size in one region: ``problem`` says in plain words why it cannot
    be created there now ("" when it fits), ``advice`` what happens meanwhile."""

    problem: str = ""
    advice: str = ""

    @property
    def fits(self) -> bool:
        return not self.problem


# Azure's usages name for the one regional quota every Spot VM counts against, whatever its
# family, instead of its family and "cores" (Total Regional vCPUs).
SPOT_QUOTA = "lowPriorityCores"
SPOT_QUOTA_LABEL = "Total Regional Low-priority vCPUs (Spot)"


def _quotas(family: str, *, spot: bool) -> tuple[str, ...]:
    """The usages names a VM of quota family ``family`` counts against, in checking order."""
    return (SPOT_QUOTA,) if spot else (family, "cores")


def azure_precheck(*, region: str, vm_size: str, spot: bool = False) -> Precheck:
    """Whether Azure would take one more VM of ``vm_size`` in ``region`` now: the size is
    offered to the subscription there (Resource SKUs restrictions), and the vCPUs in use plus
    the size's vCPUs stay within the limits of its quota family and the region's total, or for
    a Spot VM (``spot``) within the region's Spot (low-priority) vCPUs (usages API).

    Read-only (two ARM GETs). Raises CloudError when Azure does not answer them.
    """
    sku = azure_vm.sku_info(azure_settings(), location=region, vm_size=vm_size)
    if not sku.offered:
        return Precheck(
            f"{vm_size} is not available to this subscription in {region} ({sku.reason}).",
            "Waiting until Azure offers it; a platform admin can ask Azure to lift the "
            "restriction or allow another region.",
        )
    usages = {u.name.lower(): u for u in azure_vm.regional_usage(azure_settings(), location=region)}
    for quota in _quotas(sku.family, spot=spot):
        usage = usages.get(quota.lower())
        if usage is not None and usage.current_value + sku.vcpus > usage.limit:
            return Precheck(
                f"Azure quota for {_quota_label(usage)} in {region} is {usage.current_value}/"
                f"{usage.limit} vCPUs; this size needs {sku.vcpus} more.",
                "Waiting for capacity; a platform admin can raise the subscription's quota.",
            )
    return Precheck()


def _quota_label(usage: azure_vm.Usage) -> str:
    if usage.name.lower() == SPOT_QUOTA.lower():
        return SPOT_QUOTA_LABEL
    return usage.localized_name if usage.name == "cores" else usage.name


@dataclass(frozen=True)
class Headroom:
    """What Azure has left for one size in one region: ``vcpus_left`` (the lower of its quota
    family's and the region's total vCPUs left; for ``spot``, the region's Spot vCPUs left)
    and ``vms_left``, how many more VMs of the size that allows. ``problem`` says in words why
    there is no number (the size is restricted to this subscription, or Azure did not
    answer)."""

    region: str
    vm_size: str
    family: str = ""
    vcpus_left: int | None = None
    vms_left: int | None = None
    problem: str = ""
    spot: bool = False

    @property
    def quota_label(self) -> str:
        """What ``vcpus_left`` is of: the Spot quota, or the size's quota family."""
        return SPOT_QUOTA_LABEL if self.spot else self.family


def _usage_generation_key(region: str) -> str:
    return f"azure-usage-generation:{region}"


def azure_usage_changed(*, region: str) -> None:
    """Forget what Azure's quota usage in ``region`` was: the portal has just begun or ended
    an operation that changes it (a VM's or a node pool's create, start, deallocate or
    delete), so the next azure_headroom asks Azure again instead of showing the vCPUs left
    before it."""
    key = _usage_generation_key(region)
    try:
        cache.incr(key)
    except ValueError:  # never counted yet (or evicted): any new value makes old entries stale
        cache.set(key, uuid.uuid4().int % 10**9, None)


def azure_headroom(*, region: str, vm_size: str, spot: bool = False) -> Headroom:
    """Azure headroom: the quota left for ``vm_size`` in ``region``, as a Spot VM if ``spot``
    (Resource SKUs and usages APIs: two ARM GETs), the one definition the approvals page
    shows. Freshness rule: kept at most AZURE_HEADROOM_CACHE_SECONDS so a busy approval queue
    does not get the subscription throttled, and forgotten at once whenever the portal
    changes the region's usage (azure_usage_changed), so it never shows the vCPUs left before
    a VM or node pool the portal made or deleted. Azure errors come back as ``problem``; it
    never raises them."""
    generation = cache.get(_usage_generation_key(region), 0)
    key = f"azure-headroom:{region}:{vm_size}:{'spot' if spot else 'regular'}:{generation}"
    headroom: Headroom | None = cache.get(key)
    if headroom is None:
        try:
            headroom = _headroom(region, vm_size, spot=spot)
        except CloudError as exc:
            problem = f"Azure did not answer: {exc.code}."
            return Headroom(region, vm_size, problem=problem, spot=spot)
        cache.set(key, headroom, settings.AZURE_HEADROOM_CACHE_SECONDS)
    return headroom


def _headroom(region: str, vm_size: str, *, spot: bool) -> Headroom:
    sku = azure_vm.sku_info(azure_settings(), location=region, vm_size=vm_size)
    if not sku.offered:
        return Headroom(region, vm_size, problem=f"Not available here ({sku.reason}).", spot=spot)
    usages = {u.name.lower(): u for u in azure_vm.regional_usage(azure_settings(), location=region)}
    found = [usages.get(quota.lower()) for quota in _quotas(sku.family, spot=spot)]
    left = [u.limit - u.current_value for u in found if u is not None]
    if not left:
        problem = "Azure reports no quota for it."
        return Headroom(region, vm_size, sku.family, problem=problem, spot=spot)
    vcpus = max(0, min(left))
    vms = vcpus // sku.vcpus if sku.vcpus else None
    return Headroom(region, vm_size, sku.family, vcpus, vms, spot=spot)
