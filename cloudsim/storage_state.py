"""Microsoft.Storage state: storage accounts and their Azure Files shares, each share a REAL
directory on this machine (under the emulator's storage root), so that what one emulated
workspace writes through its mount another one reads (cloudsim.storage_mounts).

Layout under the root (``CLOUDSIM_STORAGE_DIR``, else a fresh temporary directory):

    live/<account>/<share>/                   the share's files
    snapshots/<account>/<share>/<time>/       a share snapshot: a copy taken at <time>
    deleted/<account>/<share>_<version>/      a soft-deleted share, until restored or purged

Plain data and file moves; the ARM rules live in cloudsim.storage. Standard library only.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

STORAGE = "Microsoft.Storage"
ACCOUNT_TYPE = "Microsoft.Storage/storageAccounts"
SHARE_TYPE = "Microsoft.Storage/storageAccounts/fileServices/shares"
FILE_SERVICE_TYPE = "Microsoft.Storage/storageAccounts/fileServices"
# A premium (FileStorage) account provisions at most 100 TiB over all its shares; a premium
# share is 100 GiB at least (learn.microsoft.com/azure/storage/files/storage-files-scale-targets).
ACCOUNT_LIMIT_GIB = 102400
PREMIUM_MIN_GIB = 100
DEFAULT_RETENTION_DAYS = 7  # Soft delete is on by default for new accounts, 7 days.
FAULT_OPS = frozenset(
    {
        "storage.account.create",
        "storage.account.delete",
        "storage.share.create",
        "storage.share.get",
        "storage.share.list",
        "storage.share.delete",
        "storage.share.restore",
        "storage.file.write",  # A write through a workspace's mount (cloudsim.storage_mounts).
        "disk.snapshot",  # A managed disk's snapshot (cloudsim.disk_snapshots).
    }
)
# throttle, server_error, unavailable as elsewhere; share_in_use: a delete refused because the
# share holds a lease (Azure's LeaseIdMissing); share_quota: the account's provisioned limit
# (TotalSharesProvisionedCapacityExceedsAccountLimit), whatever the sizes.
FAULT_KINDS = frozenset({"throttle", "server_error", "unavailable", "share_in_use", "share_quota"})


# `make run` (CLOUDSIM_DEMO_DATASET=1): a new share named "datasets" arrives with this small
# sample, so the demo's workspaces have data to read at /data/datasets.
DEMO_SHARE = "datasets"
DEMO_FILES = {
    "README.txt": "A sample dataset of the demo: the iris measurements' first rows (Fisher, "
    "1936; UCI Machine Learning Repository).\n",
    "iris/iris-head.csv": "sepal_length,sepal_width,petal_length,petal_width,species\n"
    "5.1,3.5,1.4,0.2,setosa\n4.9,3.0,1.4,0.2,setosa\n7.0,3.2,4.7,1.4,versicolor\n"
    "6.4,3.2,4.5,1.5,versicolor\n6.3,3.3,6.0,2.5,virginica\n5.8,2.7,5.1,1.9,virginica\n",
}


def demo_dataset(share: Share) -> None:
    """Fill a new demo share with DEMO_FILES when CLOUDSIM_DEMO_DATASET=1."""
    if os.environ.get("CLOUDSIM_DEMO_DATASET") != "1" or not share.name.startswith(DEMO_SHARE):
        return
    for name, text in DEMO_FILES.items():
        target = share.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def storage_root() -> Path:
    """CLOUDSIM_STORAGE_DIR when set (created if missing), else a new temporary directory."""
    configured = os.environ.get("CLOUDSIM_STORAGE_DIR", "").strip()
    if configured:
        path = Path(configured)
        path.mkdir(parents=True, exist_ok=True)
        return path
    path = Path(tempfile.mkdtemp(prefix="cloudsim-storage-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)  # Ours alone: gone with us.
    return path


@dataclass
class StorageAccount:
    id: str
    name: str
    subscription: str
    resource_group: str
    location: str
    kind: str
    sku: str
    properties: dict  # The request's properties, echoed with Azure's computed ones on top.
    tags: dict
    created: float = field(default_factory=time.time)
    retention_days: int | None = DEFAULT_RETENTION_DAYS  # None: share soft delete off.


@dataclass
class Share:
    account: str  # The account's name (lower-case: account names are).
    name: str
    quota_gib: int
    protocols: str
    root_squash: str | None
    path: Path
    metadata: dict = field(default_factory=dict)
    modified: float = field(default_factory=time.time)
    etag: str = field(default_factory=lambda: f'"0x{uuid.uuid4().hex[:15].upper()}"')
    version: str | None = None  # Set once soft-deleted.
    deleted_at: float | None = None
    retention_days: int = 0
    snapshots: dict[str, Path] = field(default_factory=dict)  # snapshotTime -> its copy.

    def used_bytes(self) -> int:
        """Bytes of the files in the share (what a df on the mount would call used)."""
        return sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file())


class StorageState:
    """Every account and share of the emulator; callers hold the Cloud's lock."""

    def __init__(self, root: Path):
        self.root = root
        self.accounts: dict[str, StorageAccount] = {}  # By lower-case account name (global).
        self.shares: dict[tuple[str, str], Share] = {}  # (account, share lower) -> live share.
        self.deleted: dict[tuple[str, str, str], Share] = {}  # (account, share, version).
        # Microsoft.Compute/snapshots by id key (cloudsim.disk_snapshots); managed disks' files
        # live in disks/<uniqueId>/, disk snapshots' in disk-snapshots/.
        self.disk_snapshots: dict = {}
        for sub in ("live", "snapshots", "deleted", "disks", "disk-snapshots"):
            shutil.rmtree(root / sub, ignore_errors=True)

    def share_dir(self, account: str, share: str) -> Path:
        return self.root / "live" / account / share

    def create_share(self, share: Share) -> None:
        share.path.mkdir(parents=True, exist_ok=True)
        self.shares[(share.account, share.name.lower())] = share

    def snapshot_share(self, share: Share, now: float) -> str:
        """Copy the share as it is now; returns its snapshotTime (ISO 8601 with 7 decimals,
        as the examples write it), unique per share."""
        stamp = _snapshot_time(now)
        while stamp in share.snapshots:
            now += 1e-6
            stamp = _snapshot_time(now)
        target = self.root / "snapshots" / share.account / share.name / stamp.replace(":", "-")
        shutil.copytree(share.path, target)
        share.snapshots[stamp] = target
        return stamp

    def delete_snapshot(self, share: Share, stamp: str) -> bool:
        path = share.snapshots.pop(normalize_stamp(stamp), None)
        if path is None:
            return False
        shutil.rmtree(path, ignore_errors=True)
        return True

    def soft_delete(self, share: Share, now: float, retention_days: int | None) -> None:
        """Remove a live share: kept restorable for retention_days, or gone for good (None)."""
        del self.shares[(share.account, share.name.lower())]
        if not retention_days:
            self.purge(share)
            return
        share.version = str(int(now * 1_000_000))
        share.deleted_at, share.retention_days = now, retention_days
        target = self.root / "deleted" / share.account / f"{share.name}_{share.version}"
        target.parent.mkdir(parents=True, exist_ok=True)
        share.path.rename(target)
        share.path = target
        self.deleted[(share.account, share.name.lower(), share.version)] = share

    def restore(self, share: Share) -> None:
        del self.deleted[(share.account, share.name.lower(), share.version or "")]
        live = self.share_dir(share.account, share.name)
        live.parent.mkdir(parents=True, exist_ok=True)
        share.path.rename(live)
        share.path, share.version, share.deleted_at = live, None, None
        self.shares[(share.account, share.name.lower())] = share

    def purge(self, share: Share) -> None:
        shutil.rmtree(share.path, ignore_errors=True)
        for stamp in list(share.snapshots):
            self.delete_snapshot(share, stamp)

    def expire(self, now: float) -> None:
        """Purge soft-deleted shares whose retention is over."""
        for key, share in list(self.deleted.items()):
            if now >= (share.deleted_at or 0) + share.retention_days * 86400:
                del self.deleted[key]
                self.purge(share)

    def provisioned_gib(self, account: str, besides: str = "") -> int:
        """GiB provisioned over the account's live shares, but `besides` (a share name)."""
        return sum(
            s.quota_gib
            for (acct, name), s in self.shares.items()
            if acct == account and name != besides.lower()
        )


def normalize_stamp(stamp: str) -> str:
    """A snapshot time as the emulator keys it (7 fraction digits, Z), however many digits a
    client wrote: x-ms-snapshot names an instant, not a string."""
    whole, _, rest = stamp.strip().rstrip("Z").partition(".")
    fraction = rest.split("+")[0]
    return f"{whole}.{(fraction + '0000000')[:7]}Z"


def _snapshot_time(now: float) -> str:
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
    # Microseconds, padded to the 7 digits Azure writes: clients parse them into datetimes.
    return f"{whole}.{int((now % 1) * 1_000_000):06d}0Z"
