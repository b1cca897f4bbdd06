"""What the emulator would bill: each VM's allocated stretches, each disk's lifetime, each
premium file share's provisioned size while it exists and each capacity reservation while held.

Azure bills a VM's compute while it is allocated (running, starting, stopping, or stopped
without deallocation) and a managed disk while it exists, each under that resource's own tags.
A premium (provisioned v1) file share bills its provisioned GiB ("Premium LRS Provisioned", per
GiB a month, prorated by the hour) under its storage account's tags, from its create to its
delete (a soft-deleted share's used bytes are not billed here). An on-demand capacity
reservation is priced at its size's pay-as-you-go rate from when Azure holds it until its
delete, used or not; a VM allocated to it is billed as the VM (under the VM's tags) and the
reservation only for its unused instances, so nothing is billed twice (Microsoft Learn,
capacity-reservation-overview, "Pricing and billing": with 10 reserved and 5 VMs deployed
into it, "a bill for 5 D2s_v3 VMs and 5 unused Capacity Reservation, both charged at the same
rate"). The reservation's usage is reopened whenever its unused count changes.
The portal tags its VMs with `workspace`; an OS disk created with a VM gets no tags in Azure
(tags are not inherited), so its cost stays untagged unless the disk is tagged itself.

`meter(cloud, now)` compares what is billable now with the open usages and opens or closes
them at `now`. The emulator calls it after every request and, with the operation's end time,
after every operation it completes (cloud.Cloud.advance), so each usage starts and ends at the
emulator-clock moment (unix seconds) its resource changed. Standard library only.
"""

from dataclasses import dataclass, field

# Managed disk tiers by the largest size (GiB) each covers; a disk is billed at the smallest
# tier that holds it (https://learn.microsoft.com/azure/virtual-machines/disks-types).
TIER_SIZES = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32767)
TIER_NUMBERS = (1, 2, 3, 4, 6, 10, 15, 20, 30, 40, 50, 60, 70, 80)
TIER_LETTERS = {"premium": "P", "standardssd": "E", "standard": "S"}


@dataclass
class Usage:
    """One billable stretch: kind "vm" (compute of VM size `sku`, Spot price if `spot`),
    "disk" (managed disk tier `sku`, e.g. "P10 LRS"), "files" (a premium share: `quantity`
    provisioned GiB of the meter `sku`, "Premium LRS Provisioned") or "reservation"
    (`quantity` unused reserved instances of VM size `sku`), from `start` until `end` (unix
    seconds; None while open). `tags` follow the resource while it exists and stay as they
    were."""

    kind: str
    resource_id: str
    subscription: str
    resource_group: str
    location: str
    sku: str
    spot: bool
    start: float
    tags: dict = field(default_factory=dict)
    end: float | None = None
    quantity: int = 1

    def state(self) -> dict:
        """The /_sim/costs view of this usage."""
        return {
            "kind": self.kind,
            "resourceId": self.resource_id,
            "sku": self.sku,
            "spot": self.spot,
            "quantity": self.quantity,
            "location": self.location,
            "tags": dict(self.tags),
            "start": self.start,
            "end": self.end,
        }


def disk_tier(storage_type: str, size_gb: int) -> str:
    """The billing tier of a managed disk, e.g. ("Premium_LRS", 128) -> "P10 LRS"."""
    kind, _, redundancy = storage_type.partition("_")
    letter = TIER_LETTERS.get(kind.lower(), "S")
    tiers = zip(TIER_NUMBERS, TIER_SIZES, strict=True)
    number = next((n for n, top in tiers if size_gb <= top), TIER_NUMBERS[-1])
    return f"{letter}{number} {redundancy.upper() or 'LRS'}"


def _is_spot(vm) -> bool:
    # Read defensively: the emulator may keep the priority as an attribute or only in the body.
    priority = getattr(vm, "priority", None) or (vm.properties or {}).get("priority")
    return isinstance(priority, str) and priority.lower() == "spot"


def _subscription(resource_id: str) -> str:
    parts = resource_id.strip("/").split("/")
    return parts[1] if len(parts) > 1 else ""


FILES_METER = "Premium LRS Provisioned"


def _held_reservations(cloud) -> list:
    return [r for g in cloud.reservation_groups.values() for r in g.reservations.values() if r.held]


def _billable(cloud) -> dict[tuple[str, str], tuple[tuple, object, dict]]:
    """{(kind, resource key): (signature, resource, Usage fields)} of what is billable now."""
    now_billable = {}
    for key, vm in cloud.vms.items():
        if vm.allocated:  # inside a reservation too: Azure bills it as the VM
            spot = _is_spot(vm)
            fields = dict(kind="vm", sku=vm.size, spot=spot, subscription=vm.subscription)
            now_billable[("vm", key)] = ((vm.size.lower(), spot), vm, fields)
    for key, disk in cloud.disks.items():
        tier = disk_tier(disk.storage_type, disk.size_gb)
        fields = dict(kind="disk", sku=tier, spot=False, subscription=_subscription(disk.id))
        now_billable[("disk", key)] = ((tier,), disk, fields)
    return now_billable | _reservations(cloud) | _shares(cloud)


def _reservations(cloud) -> dict[tuple[str, str], tuple[tuple, object, dict]]:
    """Held reservations with unused instances: those bill, the used ones bill as VMs."""
    # A real cycle: cloudsim.reservations handles requests with a Cloud.
    from .reservations import allocated_to

    billable = {}
    for r in _held_reservations(cloud):
        unused = r.capacity - len(allocated_to(cloud, r))
        if unused <= 0:
            continue
        fields = dict(
            kind="reservation", sku=r.size, spot=False, subscription=_subscription(r.id),
            quantity=unused,
        )  # fmt: skip
        billed = _Billed(r.id, _group_of(r.id), r.location, dict(r.tags))
        billable[("reservation", r.id.lower())] = ((r.size.lower(), unused), billed, fields)
    return billable


def _shares(cloud) -> dict[tuple[str, str], tuple[tuple, object, dict]]:
    billable = {}
    for (account_name, _), share in cloud.storage.shares.items():
        account = cloud.storage.accounts.get(account_name)
        if account is None or account.kind != "FileStorage":
            continue  # Only premium (FileStorage) accounts bill provisioned GiB.
        fields = dict(
            kind="files", sku=FILES_METER, spot=False, subscription=account.subscription,
            quantity=share.quota_gib,
        )  # fmt: skip
        rid = f"{account.id}/fileServices/default/shares/{share.name}"
        billed = _Billed(rid, account.resource_group, account.location, dict(account.tags))
        billable[("files", rid.lower())] = ((share.quota_gib,), billed, fields)
    return billable


@dataclass
class _Billed:
    """A resource billed under another's id, group, location or tags: a share under its
    account's, a reservation under its own (it has no group attribute of its own here)."""

    id: str
    resource_group: str
    location: str
    tags: dict


def _group_of(resource_id: str) -> str:
    parts = resource_id.strip("/").split("/")
    return parts[3] if len(parts) > 3 else ""


def meter(cloud, now: float) -> None:
    """Close the open usages whose resource stopped being billable (or changed size) at `now`,
    open one for each newly billable resource, and keep open usages' tags current."""
    billable = _billable(cloud)
    for key, (usage, signature) in list(cloud.open_usages.items()):
        current = billable.get(key)
        if current is not None and current[0] == signature:
            usage.tags = dict(getattr(current[1], "tags", None) or {})
            continue
        usage.end = now
        del cloud.open_usages[key]
    for key, (signature, resource, fields) in billable.items():
        if key in cloud.open_usages:
            continue
        usage = Usage(
            resource_id=resource.id,
            resource_group=resource.resource_group,
            location=resource.location,
            start=now,
            tags=dict(getattr(resource, "tags", None) or {}),
            **fields,
        )
        cloud.usages.append(usage)
        cloud.open_usages[key] = (usage, signature)
