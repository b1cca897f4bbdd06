"""Managed disk snapshots through azure-mgmt-compute against the emulator: a VM's OS disk is
kept as a snapshot, which outlives the VM, and a new disk copied from it has its files."""

import uuid
from dataclasses import replace

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


def test_a_vm_boots_from_a_disk_copied_from_a_snapshot(azure, control, spec):
    vm = _create(azure, spec)
    control.storage_write(vm, "/home/alice/notes.txt", "kept")
    disk = compute_client(azure).disks.get(RESOURCE_GROUP, vm_names(spec.workspace_id).os_disk)
    snap = azure_snapshots.snapshot_disk(
        azure, name="keep-3", disk_id=disk.id, location="eastus", tags={}
    )
    again = replace(spec, workspace_id=str(uuid.uuid4()))
    made = azure_snapshots.ensure_disk_from_snapshot(
        azure,
        name=vm_names(again.workspace_id).os_disk,
        snapshot_id=snap.id,
        location="eastus",
        sku="Standard_LRS",
    )
    # Asked again (a create tried again), the disk made first is the answer.
    assert (
        azure_snapshots.ensure_disk_from_snapshot(
            azure, name=made.name, snapshot_id=snap.id, location="eastus", sku="Standard_LRS"
        )
        == made
    )

    second = _create(azure, replace(again, os_disk_id=made.id))

    assert control.storage_read(second, "/home/alice/notes.txt") == "kept"
    body = compute_client(azure).virtual_machines.get(RESOURCE_GROUP, second)
    assert body.storage_profile.os_disk.create_option == "Attach"
    assert body.os_profile is None  # Azure takes none with an attached OS disk


def test_an_attached_os_disk_that_is_not_there_is_refused(azure, spec):
    disk = azure_snapshots.get_disk(azure, name="none")
    assert disk is None
    bad = replace(spec, os_disk_id="/subscriptions/x/resourceGroups/rg/providers/"
                  "Microsoft.Compute/disks/missing")  # fmt: skip

    with pytest.raises(CloudError) as caught:
        _create(azure, bad)

    assert caught.value.code in ("NotFound", "ResourceNotFound")
