"""Team storage through azure-mgmt-storage against the emulator: a private premium account,
NFS shares, soft delete and restore, share snapshots, and the faults Azure answers with."""

import pytest

from cloud import azure_storage
from cloud.errors import CloudError

from .support import SUBNET_ID

ACCOUNT = "gpuportalvision01"


@pytest.fixture
def account(azure):
    return azure_storage.ensure_account(
        azure,
        name=ACCOUNT,
        location="eastus",
        tags={"portal": "gpu-portal", "team": "vision"},
        subnet_ids=[SUBNET_ID],
        retention_days=14,
    )


def test_a_team_account_is_premium_file_storage_with_no_public_access(azure, account):
    assert account.name == ACCOUNT
    assert account.public_network_access == "Disabled"
    assert account.file_endpoint == f"https://{ACCOUNT}.file.core.windows.net/"


def test_an_nfs_share_is_created_resized_and_read_back(azure, account):
    made = azure_storage.put_share(azure, account=ACCOUNT, name="datasets", quota_gib=1024)
    grown = azure_storage.put_share(azure, account=ACCOUNT, name="datasets", quota_gib=2048)

    assert (made.quota_gib, made.protocol) == (1024, "NFS")
    assert grown.quota_gib == 2048
    found = azure_storage.get_share(azure, account=ACCOUNT, name="datasets", with_usage=True)
    assert found is not None and found.quota_gib == 2048 and found.used_bytes == 0
    assert azure_storage.get_share(azure, account=ACCOUNT, name="nothere") is None
    assert azure_storage.nfs_source(ACCOUNT, "datasets") == (
        f"{ACCOUNT}.file.core.windows.net:/{ACCOUNT}/datasets"
    )


def test_a_deleted_share_is_listed_as_deleted_and_restored(azure, account):
    azure_storage.put_share(azure, account=ACCOUNT, name="checkpoints", quota_gib=100)

    azure_storage.delete_share(azure, account=ACCOUNT, name="checkpoints")

    assert azure_storage.get_share(azure, account=ACCOUNT, name="checkpoints") is None
    listed = azure_storage.list_shares(azure, account=ACCOUNT, deleted=True)
    (gone,) = [s for s in listed if s.deleted]
    assert (gone.name, gone.remaining_days) == ("checkpoints", 14)
    azure_storage.restore_share(azure, account=ACCOUNT, name="checkpoints", version=gone.version)
    assert azure_storage.get_share(azure, account=ACCOUNT, name="checkpoints") is not None


def test_share_snapshots_are_listed_and_deleted(azure, account):
    azure_storage.put_share(azure, account=ACCOUNT, name="datasets", quota_gib=100)

    first = azure_storage.snapshot_share(azure, account=ACCOUNT, name="datasets")
    second = azure_storage.snapshot_share(azure, account=ACCOUNT, name="datasets")

    listed = azure_storage.list_shares(azure, account=ACCOUNT, snapshots=True)
    stamps = [s.snapshot_time for s in listed if s.snapshot_time]
    assert len(stamps) == 2 and first != second
    azure_storage.delete_share_snapshot(
        azure, account=ACCOUNT, name="datasets", snapshot_time=first
    )
    listed = azure_storage.list_shares(azure, account=ACCOUNT, snapshots=True)
    assert len([s for s in listed if s.snapshot_time]) == 1


def test_a_premium_share_below_100_gib_is_refused(azure, account):
    with pytest.raises(CloudError) as caught:
        azure_storage.put_share(azure, account=ACCOUNT, name="tiny", quota_gib=50)

    assert caught.value.code == "InvalidHeaderValue"


def test_the_account_limit_refuses_a_share(azure, account, control):
    control.inject("storage.share.create", "share_quota")

    with pytest.raises(CloudError) as caught:
        azure_storage.put_share(azure, account=ACCOUNT, name="datasets", quota_gib=100)

    assert caught.value.code == "TotalSharesProvisionedCapacityExceedsAccountLimit"
    assert not caught.value.transient


def test_a_share_in_use_is_not_deleted(azure, account, control):
    azure_storage.put_share(azure, account=ACCOUNT, name="datasets", quota_gib=100)
    control.inject("storage.share.delete", "share_in_use")

    with pytest.raises(CloudError) as caught:
        azure_storage.delete_share(azure, account=ACCOUNT, name="datasets")

    assert caught.value.code == "LeaseIdMissing"
    assert azure_storage.get_share(azure, account=ACCOUNT, name="datasets") is not None


def test_throttling_is_retried_then_answered(azure, account, control):
    control.inject("storage.share.get", "throttle", count=1)
    azure_storage.put_share(azure, account=ACCOUNT, name="datasets", quota_gib=100)

    assert azure_storage.get_share(azure, account=ACCOUNT, name="datasets") is not None
    control.inject("storage.share.get", "throttle", count=5)
    with pytest.raises(CloudError) as caught:
        azure_storage.get_share(azure, account=ACCOUNT, name="datasets")
    assert caught.value.transient and caught.value.status == 429
