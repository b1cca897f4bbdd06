"""Microsoft.Storage: storage accounts and Azure Files shares (NFS), in the shapes of the
azure-rest-api-specs examples (specification/storage/resource-manager/Microsoft.Storage/
stable/2024-01-01/examples: StorageAccountCreateDisallowPublicNetworkAccess.json,
FileSharesPut_NFS.json, FileSharesDelete.json, FileSharesRestore.json,
DeletedFileSharesList.json, FileShareSnapshotsList.json).

- A storage account PUT answers 200 at once with provisioningState Succeeded (the examples'
  200; Azure may answer 202 first).
- A share PUT answers 201 when new, 200 when updated; with ``$expand=snapshots`` it takes a
  snapshot of the share instead (FileShares_Create) and answers it with ``snapshotTime``.
- DELETE of a share soft-deletes it when the file service's shareDeleteRetentionPolicy is on
  (7 days by default): ``$expand=deleted`` lists it with ``deleted``/``version``, and POST
  .../restore brings it back. A share with snapshots needs ``$include=snapshots``, else 409
  ShareHasSnapshots; the ``x-ms-snapshot`` header names one snapshot to GET or DELETE.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from . import errors, faults
from .cloud import Cloud
from .errors import ArmError
from .models import iso
from .protocol import Request, Response
from .storage_state import (
    ACCOUNT_LIMIT_GIB,
    ACCOUNT_TYPE,
    FILE_SERVICE_TYPE,
    PREMIUM_MIN_GIB,
    SHARE_TYPE,
    Share,
    StorageAccount,
    demo_dataset,
    normalize_stamp,
)

Handler = Callable[[Cloud, Request], Response]
_ACCOUNT_NAME = re.compile(r"^[a-z0-9]{3,24}$")
_SHARE_NAME = re.compile(r"^[a-z0-9](?!.*--)[a-z0-9-]{1,61}[a-z0-9]$")


def match(segs: list[str], low: list[str]) -> tuple[dict[str, Handler], dict] | None:
    """Routes under /subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Storage/
    storageAccounts/{account}[/fileServices/default[/shares[/{share}[/restore]]]]."""
    if len(segs) < 8 or low[0] != "subscriptions" or low[2] != "resourcegroups":
        return None
    if low[4:7] != ["providers", "microsoft.storage", "storageaccounts"]:
        return None
    params = {"sub": segs[1], "rg": segs[3], "name": segs[7]}
    rest = low[8:]
    if not rest:
        return {"GET": get_account, "PUT": put_account, "DELETE": delete_account}, params
    if rest[:2] != ["fileservices", "default"]:
        return None
    if len(rest) == 2:
        return {"GET": get_file_service, "PUT": put_file_service}, params
    if rest[2:] == ["shares"]:
        return {"GET": list_shares}, params
    if len(rest) >= 4 and rest[2] == "shares":
        params["share"] = segs[11]
        if len(rest) == 4:
            return {"GET": get_share, "PUT": put_share, "DELETE": delete_share}, params
        if rest[4:] == ["restore"]:
            return {"POST": restore_share}, params
    return None


# --- faults ---------------------------------------------------------------------------------


def _raise_fault(cloud: Cloud, op: str, req: Request) -> None:
    fault = cloud.take_fault(op, frozenset({"share_in_use", "share_quota"}))
    if fault is not None and fault.kind == "share_in_use":
        message = (
            "There is currently a lease on the file share and no lease ID was specified in "
            "the request."
        )
        raise ArmError(409, "LeaseIdMissing", message)
    if fault is not None:
        raise _over_account_limit()
    faults.raise_injected(cloud, op, req.params["sub"])


def _over_account_limit() -> ArmError:
    message = (
        "The total provisioned capacity of all shares in the storage account exceeds the "
        "account limit."
    )
    return ArmError(409, "TotalSharesProvisionedCapacityExceedsAccountLimit", message)


# --- accounts -------------------------------------------------------------------------------


def _account(cloud: Cloud, req: Request) -> StorageAccount:
    account = cloud.storage.accounts.get(req.params["name"].lower())
    if account is None or account.resource_group.lower() != req.params["rg"].lower():
        raise errors.not_found(ACCOUNT_TYPE, req.params["name"], req.params["rg"])
    return account


def account_body(account: StorageAccount) -> dict:
    endpoint = f"https://{account.name}.file.core.windows.net/"
    properties = {
        **account.properties,
        "provisioningState": "Succeeded",
        "creationTime": iso(account.created),
        "primaryLocation": account.location,
        "statusOfPrimary": "available",
        "primaryEndpoints": {"file": endpoint},
        "publicNetworkAccess": account.properties.get("publicNetworkAccess", "Enabled"),
        "supportsHttpsTrafficOnly": account.properties.get("supportsHttpsTrafficOnly", True),
    }
    return {
        "id": account.id,
        "name": account.name,
        "type": ACCOUNT_TYPE,
        "location": account.location,
        "kind": account.kind,
        "sku": {"name": account.sku, "tier": account.sku.split("_")[0]},
        "tags": account.tags,
        "properties": properties,
    }


def get_account(cloud: Cloud, req: Request) -> Response:
    return Response(200, account_body(_account(cloud, req)))


def put_account(cloud: Cloud, req: Request) -> Response:
    """Create or update; 400 AccountNameInvalid, 409 StorageAccountAlreadyTaken (names are
    global), 400 for NFS on a kind other than FileStorage with a Premium SKU."""
    _raise_fault(cloud, "storage.account.create", req)
    name, body = req.params["name"], req.json()
    if not _ACCOUNT_NAME.match(name):
        message = (
            f"{name} is not a valid storage account name. Storage account name must be between "
            "3 and 24 characters in length and use numbers and lower-case letters only."
        )
        raise ArmError(400, "AccountNameInvalid", message)
    existing = cloud.storage.accounts.get(name)
    if existing is not None and existing.resource_group.lower() != req.params["rg"].lower():
        message = f"The storage account named {name} is already taken."
        raise ArmError(409, "StorageAccountAlreadyTaken", message)
    kind, sku = str(body.get("kind") or "StorageV2"), str((body.get("sku") or {}).get("name", ""))
    if not sku:
        raise errors.invalid_parameter("sku.name is required.", "sku")
    properties = body.get("properties") or {}
    rid = (
        f"/subscriptions/{req.params['sub']}/resourceGroups/{req.params['rg']}"
        f"/providers/{ACCOUNT_TYPE}/{name}"
    )
    account = StorageAccount(
        id=rid,
        name=name,
        subscription=req.params["sub"],
        resource_group=req.params["rg"],
        location=str(body.get("location") or "eastus"),
        kind=kind,
        sku=sku,
        properties=properties if isinstance(properties, dict) else {},
        tags=body.get("tags") or {},
    )
    if existing is not None:
        account.created, account.retention_days = existing.created, existing.retention_days
    cloud.storage.accounts[name] = account
    return Response(200, account_body(account))


def delete_account(cloud: Cloud, req: Request) -> Response:
    """200, or 204 when absent; its shares, live and soft-deleted, go with it (Azure's
    account delete cannot be undone by share soft delete)."""
    _raise_fault(cloud, "storage.account.delete", req)
    account = cloud.storage.accounts.get(req.params["name"].lower())
    if account is None:
        return Response(204)
    state = cloud.storage
    for key, share in [*state.shares.items(), *state.deleted.items()]:
        if share.account == account.name:
            state.shares.pop(key, None)  # type: ignore[call-overload]
            state.deleted.pop(key, None)  # type: ignore[call-overload]
            state.purge(share)
    del state.accounts[account.name]
    return Response(200)


# --- the file service -----------------------------------------------------------------------


def _file_service_body(account: StorageAccount) -> dict:
    days = account.retention_days
    policy = {"enabled": days is not None, **({"days": days} if days else {})}
    return {
        "id": f"{account.id}/fileServices/default",
        "name": "default",
        "type": FILE_SERVICE_TYPE,
        "properties": {"shareDeleteRetentionPolicy": policy},
    }


def get_file_service(cloud: Cloud, req: Request) -> Response:
    return Response(200, _file_service_body(_account(cloud, req)))


def put_file_service(cloud: Cloud, req: Request) -> Response:
    """Sets shareDeleteRetentionPolicy ({"enabled", "days" 1..365})."""
    account = _account(cloud, req)
    policy = (req.json().get("properties") or {}).get("shareDeleteRetentionPolicy")
    if isinstance(policy, dict):
        days = policy.get("days", 7)
        if policy.get("enabled") and not (type(days) is int and 1 <= days <= 365):
            raise errors.invalid_parameter("days must be between 1 and 365.", "days")
        account.retention_days = days if policy.get("enabled") else None
    return Response(200, _file_service_body(account))


# --- shares ---------------------------------------------------------------------------------


def share_body(account: StorageAccount, share: Share, snapshot: str | None = None) -> dict:
    """A share (or one of its snapshots, or a soft-deleted share) as FileShares_Get shows it."""
    properties: dict = {
        "lastModifiedTime": iso(share.modified),
        "shareQuota": share.quota_gib,
        "enabledProtocols": share.protocols,
        "accessTier": "Premium" if account.sku.startswith("Premium") else "TransactionOptimized",
        "metadata": share.metadata,
    }
    if share.root_squash:
        properties["rootSquash"] = share.root_squash
    if snapshot:
        properties["snapshotTime"] = snapshot
    rid = f"{account.id}/fileServices/default/shares/{share.name}"
    if share.version:
        rid = f"{rid}_{share.version}"
        days_left = share.retention_days - int((time.time() - (share.deleted_at or 0)) // 86400)
        properties |= {
            "version": share.version,
            "deleted": True,
            "deletedTime": iso(share.deleted_at),
            "remainingRetentionDays": max(days_left, 0),
        }
    body = {"id": rid, "name": share.name, "type": SHARE_TYPE, "etag": share.etag}
    return body | {"properties": properties}


def _share(cloud: Cloud, req: Request, account: StorageAccount) -> Share:
    share = cloud.storage.shares.get((account.name, req.params["share"].lower()))
    if share is None:
        raise ArmError(404, "ShareNotFound", "The specified share does not exist.")
    return share


def _expand(req: Request) -> set[str]:
    return {part.strip().lower() for part in req.query.get("$expand", "").split(",") if part}


def get_share(cloud: Cloud, req: Request) -> Response:
    """The share, or its snapshot named by the x-ms-snapshot header; 404 ShareNotFound."""
    _raise_fault(cloud, "storage.share.get", req)
    account = _account(cloud, req)
    share = _share(cloud, req, account)
    stamp = req.headers.get("x-ms-snapshot")
    stamp = normalize_stamp(stamp) if stamp else None
    if stamp and stamp not in share.snapshots:
        raise ArmError(404, "ShareSnapshotNotFound", "The specified share snapshot does not exist.")
    body = share_body(account, share, stamp)
    if "stats" in _expand(req):
        body["properties"]["shareUsageBytes"] = share.used_bytes()
    return Response(200, body)


def _quota(body: dict, account: StorageAccount, current: Share | None) -> int:
    quota = (body.get("properties") or {}).get("shareQuota")
    if quota is None:
        return current.quota_gib if current else PREMIUM_MIN_GIB
    premium = account.sku.startswith("Premium")
    low = PREMIUM_MIN_GIB if premium else 1
    if type(quota) is not int or not low <= quota <= ACCOUNT_LIMIT_GIB:
        raise ArmError(
            400,
            "InvalidHeaderValue",
            "The value for one of the HTTP headers is not in the correct format.",
        )
    return quota


def put_share(cloud: Cloud, req: Request) -> Response:
    """Create (201) or update (200) a share; with $expand=snapshots, snapshot it (200)."""
    _raise_fault(cloud, "storage.share.create", req)
    account, body = _account(cloud, req), req.json()
    state, name = cloud.storage, req.params["share"]
    current = state.shares.get((account.name, name.lower()))
    if "snapshots" in _expand(req):
        if current is None:
            raise ArmError(404, "ShareNotFound", "The specified share does not exist.")
        stamp = state.snapshot_share(current, time.time())
        return Response(200, share_body(account, current, stamp))
    if not _SHARE_NAME.match(name):
        raise errors.invalid_parameter(f"The share name '{name}' is invalid.", "shareName")
    properties = body.get("properties") or {}
    protocols = str(properties.get("enabledProtocols") or (current.protocols if current else "SMB"))
    if protocols == "NFS" and (
        account.kind != "FileStorage" or not account.sku.startswith("Premium")
    ):
        message = "NFS shares need a FileStorage account with a Premium SKU."
        raise errors.invalid_parameter(message, "enabledProtocols")
    quota = _quota(body, account, current)
    if state.provisioned_gib(account.name, besides=name) + quota > ACCOUNT_LIMIT_GIB:
        raise _over_account_limit()
    share = current or Share(
        account.name, name, quota, protocols, None, state.share_dir(account.name, name)
    )
    share.quota_gib, share.protocols, share.modified = quota, protocols, time.time()
    share.root_squash = properties.get("rootSquash") or share.root_squash
    share.metadata = properties.get("metadata") or share.metadata
    state.create_share(share)
    if current is None:
        demo_dataset(share)
    return Response(201 if current is None else 200, share_body(account, share))


def list_shares(cloud: Cloud, req: Request) -> Response:
    """FileShares_List: live shares; $expand=deleted adds the soft-deleted ones, snapshots
    each snapshot (as its own item with snapshotTime)."""
    _raise_fault(cloud, "storage.share.list", req)
    account, expand, state = _account(cloud, req), _expand(req), cloud.storage
    state.expire(time.time())
    items = []
    for (acct, _), share in sorted(state.shares.items()):
        if acct != account.name:
            continue
        items.append(share_body(account, share))
        if "snapshots" in expand:
            items += [share_body(account, share, stamp) for stamp in sorted(share.snapshots)]
    if "deleted" in expand:
        items += [
            share_body(account, s) for (a, _, _), s in state.deleted.items() if a == account.name
        ]
    return Response(200, {"value": items})


def delete_share(cloud: Cloud, req: Request) -> Response:
    """200, 204 when absent; x-ms-snapshot deletes one snapshot; a share with snapshots needs
    $include=snapshots (409 otherwise)."""
    _raise_fault(cloud, "storage.share.delete", req)
    account, state = _account(cloud, req), cloud.storage
    share = state.shares.get((account.name, req.params["share"].lower()))
    if share is None:
        return Response(204)
    stamp = req.headers.get("x-ms-snapshot")
    if stamp:
        return Response(200 if state.delete_snapshot(share, stamp) else 204)
    include = req.query.get("$include", "").lower()
    if share.snapshots and "snapshots" not in include:
        message = "The share has snapshots and the operation requires no snapshots."
        raise ArmError(409, "ShareHasSnapshots", message)
    state.soft_delete(share, time.time(), account.retention_days)
    return Response(200)


def restore_share(cloud: Cloud, req: Request) -> Response:
    """POST {"deletedShareName", "deletedShareVersion"}: 200; 404 when no such deleted share,
    409 ShareAlreadyExists when a live share has the name."""
    _raise_fault(cloud, "storage.share.restore", req)
    account, body, state = _account(cloud, req), req.json(), cloud.storage
    name = str(body.get("deletedShareName") or req.params["share"])
    version = str(body.get("deletedShareVersion") or "")
    state.expire(time.time())
    share = state.deleted.get((account.name, name.lower(), version))
    if share is None:
        raise ArmError(404, "ShareNotFound", "The specified share does not exist.")
    if (account.name, name.lower()) in state.shares:
        raise ArmError(409, "ShareAlreadyExists", "The specified share already exists.")
    state.restore(share)
    return Response(200)
