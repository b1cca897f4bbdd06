"""Microsoft.Storage in the emulator: accounts and NFS shares in the REST examples' shapes,
each share a real directory, and what a VM sees through the mounts of its cloud-config."""

import base64
import json

import pytest

from cloudsim import SimControl
from cloudsim.control import SimControlError

from .conftest import A100, RG, SUB, nic_id, vm_body

STORAGE_API = "2024-01-01"
ACCOUNT = "teamvision01"
ACCOUNT_PATH = (
    f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Storage/storageAccounts/"
    f"{ACCOUNT}"
)
SHARES = f"{ACCOUNT_PATH}/fileServices/default/shares"


def _account(arm, kind="FileStorage", sku="Premium_LRS"):
    body = {
        "location": "eastus",
        "kind": kind,
        "sku": {"name": sku},
        "properties": {"publicNetworkAccess": "Disabled"},
    }
    return arm.call("PUT", ACCOUNT_PATH, body, api=STORAGE_API)


def _share(arm, name, quota=100, **query):
    body = {"properties": {"enabledProtocols": "NFS", "shareQuota": quota}}
    path = f"{SHARES}/{name}" + (
        "?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else ""
    )
    return arm.call("PUT", path, body, api=STORAGE_API)


def _vm(arm, name, mounts):
    config = "#cloud-config\n" + json.dumps({"mounts": mounts})
    body = vm_body(f"{name}-nic", size=A100, disk=f"{name}-osdisk")
    body["properties"]["osProfile"]["customData"] = base64.b64encode(config.encode()).decode()
    if arm.call("GET", nic_id(f"{name}-nic")).status == 404:
        assert arm.put_nic(f"{name}-nic").status == 201
    reply = arm.call("PUT", arm.vm_path(name), body)
    assert reply.status == 201, reply
    assert arm.wait(reply)["status"] == "Succeeded"


def _mount(share, path, read_only=False):
    source = f"{ACCOUNT}.file.core.windows.net:/{ACCOUNT}/{share}"
    options = "vers=4,minorversion=1,sec=sys,nconnect=4" + (",ro" if read_only else "")
    return [source, path, "nfs", options, "0", "0"]


def test_an_nfs_share_answers_in_the_examples_shape(arm):
    assert _account(arm).status == 200

    made = _share(arm, "datasets", 1024)

    assert made.status == 201
    assert made.body["type"] == "Microsoft.Storage/storageAccounts/fileServices/shares"
    assert made.body["id"] == f"{SHARES}/datasets"
    assert made.body["properties"]["enabledProtocols"] == "NFS"
    assert made.body["properties"]["shareQuota"] == 1024
    assert _share(arm, "datasets", 2048).status == 200
    account = arm.call("GET", ACCOUNT_PATH, api=STORAGE_API).body
    assert account["properties"]["publicNetworkAccess"] == "Disabled"
    assert account["sku"] == {"name": "Premium_LRS", "tier": "Premium"}


def test_nfs_needs_a_premium_file_storage_account(arm):
    _account(arm, kind="StorageV2", sku="Standard_LRS")

    reply = _share(arm, "datasets", 100)

    assert reply.status == 400 and reply.code == "InvalidParameter"


def test_a_deleted_share_is_listed_with_its_version_and_restored_with_its_files(arm, sim):
    _account(arm)
    _share(arm, "checkpoints")
    share_dir = sim.state.storage.share_dir(ACCOUNT, "checkpoints")
    (share_dir / "epoch1.pt").write_text("weights")

    assert arm.call("DELETE", f"{SHARES}/checkpoints", api=STORAGE_API).status == 200

    assert arm.call("GET", f"{SHARES}/checkpoints", api=STORAGE_API).status == 404
    listed = arm.call("GET", f"{SHARES}?$expand=deleted", api=STORAGE_API).body["value"]
    (gone,) = listed
    assert gone["properties"]["deleted"] is True
    assert gone["id"].endswith(f"checkpoints_{gone['properties']['version']}")
    restore = {
        "deletedShareName": "checkpoints",
        "deletedShareVersion": gone["properties"]["version"],
    }
    reply = arm.call("POST", f"{SHARES}/checkpoints/restore", restore, api=STORAGE_API)
    assert reply.status == 200
    assert (share_dir / "epoch1.pt").read_text() == "weights"


def test_a_share_with_snapshots_is_deleted_only_with_them(arm):
    _account(arm)
    _share(arm, "datasets")
    snap = _share(arm, "datasets", **{"$expand": "snapshots"})
    assert snap.status == 200 and snap.body["properties"]["snapshotTime"]

    refused = arm.call("DELETE", f"{SHARES}/datasets", api=STORAGE_API)
    deleted = arm.call("DELETE", f"{SHARES}/datasets?$include=snapshots", api=STORAGE_API)

    assert refused.status == 409 and refused.code == "ShareHasSnapshots"
    assert deleted.status == 200


@pytest.fixture
def team_vms(arm, ctl: SimControl):
    _account(arm)
    _share(arm, "datasets")
    _share(arm, "scratch")
    mounts = [
        _mount("datasets", "/data/datasets", read_only=True),
        _mount("scratch", "/data/scratch"),
    ]
    _vm(arm, "ws-one", mounts)
    _vm(arm, "ws-two", mounts)
    _vm(arm, "ws-other-team", [])
    return ctl


def test_a_file_written_in_one_vm_is_read_in_another_and_not_by_an_unmounted_one(team_vms):
    team_vms.storage_write("ws-one", "/data/scratch/notes/run1.txt", "loss 0.1")

    assert team_vms.storage_read("ws-two", "/data/scratch/notes/run1.txt") == "loss 0.1"
    with pytest.raises(SimControlError) as caught:
        team_vms.storage_read("ws-other-team", "/data/scratch/notes/run1.txt")
    assert caught.value.status == 404


def test_a_read_only_mount_refuses_writes(team_vms):
    with pytest.raises(SimControlError) as caught:
        team_vms.storage_write("ws-one", "/data/datasets/x.csv", "a,b")

    assert caught.value.status == 403 and caught.value.body["error"]["code"] == "EROFS"


def test_a_path_cannot_climb_out_of_its_mount(team_vms, sim):
    team_vms.storage_write("ws-one", "/data/scratch/../../etc/motd", "x")

    # It lands on the VM's own disk, as in the guest: not in the share, not on this machine.
    assert team_vms.storage_read("ws-one", "/etc/motd") == "x"
    assert not (sim.state.storage.share_dir(ACCOUNT, "scratch") / "etc").exists()
    assert not (sim.state.storage.root / "etc").exists()
    with pytest.raises(SimControlError):
        team_vms.storage_read("ws-two", "/etc/motd")


def test_a_full_share_refuses_a_write(team_vms):
    team_vms.inject("storage.file.write", "share_quota")

    with pytest.raises(SimControlError) as caught:
        team_vms.storage_write("ws-one", "/data/scratch/big.bin", "x")

    assert caught.value.status == 507


def test_the_mounts_name_the_real_directories(team_vms, sim):
    mounts = {m["path"]: m for m in team_vms.storage_mounts("ws-two")}

    assert mounts["/data/datasets"]["read_only"] is True
    assert mounts["/data/scratch"]["host_path"] == str(
        sim.state.storage.share_dir(ACCOUNT, "scratch")
    )
