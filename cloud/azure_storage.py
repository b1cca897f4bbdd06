"""Team storage on Azure Files NFS, through azure-mgmt-storage: one premium FileStorage account
per team, private (no public network access), and one NFS share per team share or personal
home.

Why Azure Files NFS on a premium FileStorage account (Microsoft Learn):
- "NFS file shares" (learn.microsoft.com/azure/storage/files/files-nfs-protocol): NFS 4.1,
  POSIX permissions, mounted by many Linux clients at once; only on premium (FileStorage,
  SSD) accounts; reached only from a virtual network (private endpoint or service endpoint),
  never from the internet, which is what a team's data needs.
- "Mount an NFS Azure file share on Linux" (learn.microsoft.com/azure/storage/files/
  storage-files-how-to-mount-nfs-shares): the source is
  ``<account>.file.core.windows.net:/<account>/<share>``, options
  ``vers=4,minorversion=1,sec=sys,nconnect=4``.
- The AKS Azure Files CSI driver (learn.microsoft.com/azure/aks/azure-files-csi) mounts the
  same share as a static PersistentVolume (``file.csi.azure.com``, protocol nfs).
- Soft delete for shares ("Enable soft delete on Azure file shares",
  learn.microsoft.com/azure/storage/files/storage-files-enable-soft-delete) keeps a deleted
  share restorable for 1 to 365 days; share snapshots are read-only point-in-time copies.
- Billing: premium shares are billed by provisioned GiB per month, whatever is used
  (learn.microsoft.com/azure/storage/files/understanding-billing).
Blob NFS 3.0 was the alternative: cheaper per GiB, but no file locking nor in-place edits,
which notebooks and checkpoints need.

Every function raises cloud.errors.CloudError on an Azure failure and returns dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from azure.mgmt.storage import models

from .clients import AzureSettings, storage_client
from .errors import azure_errors

NFS_OPTIONS = "vers=4,minorversion=1,sec=sys,nconnect=4"
ROOT_SQUASH = "RootSquash"  # Root on a client is nobody on the share (the safe default).


@dataclass(frozen=True)
class AccountInfo:
    name: str
    id: str
    location: str
    public_network_access: str
    file_endpoint: str


@dataclass(frozen=True)
class ShareInfo:
    """A share, one of its snapshots (snapshot_time set), or a soft-deleted share (deleted,
    version and remaining_days set). used_bytes only when asked for (with_usage)."""

    account: str
    name: str
    quota_gib: int
    protocol: str
    snapshot_time: str | None = None
    deleted: bool = False
    version: str | None = None
    remaining_days: int | None = None
    used_bytes: int | None = None


def nfs_source(account: str, share: str) -> str:
    """What mount(8) takes as the NFS source of a share (Microsoft Learn, above)."""
    return f"{account}.file.core.windows.net:/{account}/{share}"


def account_body(*, location: str, tags: dict[str, str], subnet_ids: list[str]) -> dict[str, Any]:
    """The PUT body of a team's account: FileStorage, Premium_LRS, public network access
    Disabled, the network ACL denying all but the workspace subnets; secure transfer off, as
    NFS shares need it off (files-nfs-protocol, "Security and networking")."""
    return {
        "location": location,
        "kind": "FileStorage",
        "sku": {"name": "Premium_LRS"},
        "tags": dict(tags),
        "properties": {
            "publicNetworkAccess": "Disabled",
            "supportsHttpsTrafficOnly": False,
            "allowBlobPublicAccess": False,
            "allowSharedKeyAccess": False,
            "minimumTlsVersion": "TLS1_2",
            "networkAcls": {
                "defaultAction": "Deny",
                "bypass": "AzureServices",
                "virtualNetworkRules": [{"id": s, "action": "Allow"} for s in subnet_ids],
            },
        },
    }


def ensure_account(
    settings: AzureSettings,
    *,
    name: str,
    location: str,
    tags: dict[str, str],
    subnet_ids: list[str],
    retention_days: int,
) -> AccountInfo:
    """Create or update the account, and turn share soft delete on for `retention_days`."""
    client = storage_client(settings)
    body = models.StorageAccountCreateParameters(
        account_body(location=location, tags=tags, subnet_ids=subnet_ids)
    )
    with azure_errors():
        account = client.storage_accounts.begin_create(settings.resource_group, name, body).result()
        client.file_services.set_service_properties(
            settings.resource_group,
            name,
            models.FileServiceProperties(
                {
                    "properties": {
                        "shareDeleteRetentionPolicy": {"enabled": True, "days": retention_days}
                    }
                }
            ),
        )
    endpoints = account.primary_endpoints
    return AccountInfo(
        name=account.name or name,
        id=account.id or "",
        location=account.location or location,
        public_network_access=_text(account.public_network_access),
        file_endpoint=(endpoints.file if endpoints else None) or "",
    )


def _share_info(account: str, share: Any) -> ShareInfo:
    return ShareInfo(
        account=account,
        name=share.name or "",
        quota_gib=int(share.share_quota or 0),
        protocol=_text(share.enabled_protocols),
        snapshot_time=_iso(share.snapshot_time),
        deleted=bool(share.deleted),
        version=share.version,
        remaining_days=share.remaining_retention_days,
        used_bytes=getattr(share, "share_usage_bytes", None),
    )


def _text(value: Any) -> str:
    # The SDK's enums are str subclasses whose str() is "Enum.MEMBER"; their value is Azure's.
    return str(getattr(value, "value", value) or "")


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def put_share(settings: AzureSettings, *, account: str, name: str, quota_gib: int) -> ShareInfo:
    """Create or resize an NFS share of `quota_gib` provisioned GiB, root squashed."""
    body = models.FileShare(
        {
            "properties": {
                "enabledProtocols": "NFS",
                "rootSquash": ROOT_SQUASH,
                "shareQuota": quota_gib,
            }
        }
    )
    with azure_errors():
        share = storage_client(settings).file_shares.create(
            settings.resource_group, account, name, body
        )
    return _share_info(account, share)


def get_share(
    settings: AzureSettings, *, account: str, name: str, with_usage: bool = False
) -> ShareInfo | None:
    """The share (with used_bytes when with_usage), or None when there is none."""
    expand = "stats" if with_usage else None
    with azure_errors():
        try:
            share = storage_client(settings).file_shares.get(
                settings.resource_group, account, name, expand=expand
            )
        except ResourceNotFoundError:
            return None
    return _share_info(account, share)


def list_shares(
    settings: AzureSettings, *, account: str, deleted: bool = False, snapshots: bool = False
) -> list[ShareInfo]:
    """The account's shares; with deleted the soft-deleted ones too, with snapshots each
    snapshot as its own item."""
    expand = ",".join(e for e, on in (("deleted", deleted), ("snapshots", snapshots)) if on)
    with azure_errors():
        items = storage_client(settings).file_shares.list(
            settings.resource_group, account, expand=expand or None
        )
        return [_share_info(account, item) for item in items]


def snapshot_share(settings: AzureSettings, *, account: str, name: str) -> str:
    """Take a share snapshot now; returns its snapshotTime (the x-ms-snapshot value)."""
    with azure_errors():
        share = storage_client(settings).file_shares.create(
            settings.resource_group, account, name, models.FileShare({}), expand="snapshots"
        )
    stamp = _iso(share.snapshot_time)
    if not stamp:
        raise ValueError("Azure answered a snapshot without its snapshotTime")
    return stamp


def delete_share_snapshot(
    settings: AzureSettings, *, account: str, name: str, snapshot_time: str
) -> None:
    with azure_errors():
        storage_client(settings).file_shares.delete(
            settings.resource_group, account, name, x_ms_snapshot=snapshot_time
        )


def delete_share(settings: AzureSettings, *, account: str, name: str) -> None:
    """Delete the share with its snapshots; soft delete keeps it restorable (restore_share)."""
    with azure_errors():
        storage_client(settings).file_shares.delete(
            settings.resource_group, account, name, include="snapshots"
        )


def restore_share(settings: AzureSettings, *, account: str, name: str, version: str) -> None:
    """Bring a soft-deleted share back under its name."""
    body = models.DeletedShare({"deletedShareName": name, "deletedShareVersion": version})
    with azure_errors():
        storage_client(settings).file_shares.restore(settings.resource_group, account, name, body)
