"""Managed disk snapshots through azure-mgmt-compute against the emulator: a VM's OS disk is
kept as a snapshot, which outlives the VM, and a new disk copied from it has its files."""

import pytest

from cloud import azure_snapshots
from cloud.azure_vm import begin, vm_names
from cloud.clients import compute_client
from cloud.errors import CloudError

from .support import RESOURCE_GROUP, resume


def _create(azure, spec):
    name = vm_names(spec.workspace_id).vm
    resume(azure, "create", name=name, token=begin(azure, "create", name=name, spec=spec))
    return name


def test_a_disk_snapshot_keeps_the_files_for_a_new_disk(azure, control, spec, emulator):
    vm = _create(azure, spec)
    control.storage_write(vm, "/home/alice/model.pt", "weights")
    disk = compute_client(azure).disks.get(RESOURCE_GROUP, vm_names(spec.workspace_id).os_disk)

    snap = azure_snapshots.snapshot_disk(
        azure, name="keep-1", disk_id=disk.id, location="eastus", tags={"team": "vision"}
    )
    control.storage_write(vm, "/home/alice/model.pt", "changed")
    made = azure_snapshots.disk_from_snapshot(
        azure, name="from-keep-1", snapshot_id=snap.id, location="eastus", sku="Premium_LRS"
    )

    assert (snap.source_disk_id.lower(), snap.size_gb) == (disk.id.lower(), disk.disk_size_gb)
    assert made.size_gb == disk.disk_size_gb
    assert azure_snapshots.get_snapshot(azure, name="keep-1") == snap
    (copy,) = [d for d in control.state()["disks"] if d["name"] == "from-keep-1"]
    assert copy["diskState"] == "Unattached"
    # The new disk holds the files as they were when the snapshot was taken.
    (new,) = [d for d in emulator.state.disks.values() if d.name == "from-keep-1"]
    files = emulator.state.storage.root / "disks" / new.unique_id
    assert (files / "home/alice/model.pt").read_text() == "weights"
    azure_snapshots.delete_snapshot(azure, name="keep-1")
    assert azure_snapshots.get_snapshot(azure, name="keep-1") is None


def test_a_snapshot_of_a_disk_that_is_not_there_is_refused(azure):
    missing = (
        f"/subscriptions/x/resourceGroups/{RESOURCE_GROUP}/providers/Microsoft.Compute/disks/no"
    )

    with pytest.raises(CloudError) as caught:
        azure_snapshots.snapshot_disk(
            azure, name="keep-2", disk_id=missing, location="eastus", tags={}
        )

    assert caught.value.code == "ResourceNotFound"
