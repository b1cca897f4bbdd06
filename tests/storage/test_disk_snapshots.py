"""A VM's OS disk kept as a snapshot before its delete, and a new VM started from it
(docs/storage.md): through the real flow against the emulator, whose disks are real
directories, so a file written on workspace A's disk is read on workspace B's."""

import json
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from cloud import azure_snapshots
from cloud.clients import compute_client
from storage import disk_snapshots
from teams.models import AuditEntry
from tests.factories import SSH_KEY, OfferingFactory
from tests.storage.test_mounts import _workspace
from workspaces.actions import workspace_delete, workspace_retry
from workspaces.azure import azure_settings
from workspaces.backends.vm_request import workspace_request
from workspaces.models import DiskSnapshot, Workspace
from workspaces.requests import SnapshotRefused
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)


def _kept(cast, sim):
    """Workspace A with a file on its OS disk, deleted keeping a snapshot."""
    vm, ws = _workspace(cast.researcher, cast.team)
    sim.storage_write(vm, "/home/alice/model.pt", "weights after epoch 3")
    workspace_delete(user=cast.researcher, workspace=ws, now=timezone.now(), keep_snapshot=True)
    assert Workspace.objects.get(pk=ws.pk).status == Status.DELETED
    return DiskSnapshot.objects.get(workspace=ws)


def _from(cast, snapshot, user=None):
    made = workspace_request(
        user=user or cast.researcher,
        team=cast.team,
        name=f"b-{uuid.uuid4().hex[:6]}",
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
        from_snapshot=snapshot,
    )
    return Workspace.objects.get(pk=made.pk)


def test_a_snapshot_kept_at_the_delete_starts_a_new_workspace_with_the_data(client, cast, sim):
    snapshot = _kept(cast, sim)
    # The disk itself is gone with the VM; the snapshot stays in Azure.
    disks = [d["name"] for d in sim.state()["disks"]]
    assert all(not name.startswith(snapshot.name.removesuffix("-kept")) for name in disks)
    assert azure_snapshots.get_snapshot(azure_settings(), name=snapshot.name) is not None

    b = _from(cast, snapshot)

    assert b.status == Status.RUNNING, b.error_message
    vm_b = f"ws-{b.id.hex[:12]}"
    assert sim.storage_read(vm_b, "/home/alice/model.pt") == "weights after epoch 3"
    # Booted from the disk copied from the snapshot, not from an image.
    azure = azure_settings()
    made = compute_client(azure).virtual_machines.get(azure.resource_group, vm_b)
    os_disk = made.storage_profile.os_disk
    assert os_disk.create_option == "Attach" and os_disk.managed_disk.id.endswith("-osdisk")
    assert made.storage_profile.image_reference is None
    # Both workspaces' pages say so.
    client.force_login(cast.researcher)
    page_b = client.get(f"/workspaces/{b.pk}/").content.decode()
    assert f"<code>{snapshot.name}</code>" in page_b
    page_a = client.get(f"/workspaces/{snapshot.workspace_id}/").content.decode()
    assert "OS disk kept" in page_a and f"<code>{snapshot.name}</code>" in page_a


def test_the_page_keeps_a_snapshot_only_when_ticked(client, cast, sim):
    _, plain = _workspace(cast.researcher, cast.team)
    _, ticked = _workspace(cast.researcher, cast.team)
    client.force_login(cast.researcher)
    assert 'name="keep_snapshot"' in client.get(f"/workspaces/{plain.pk}/").content.decode()

    client.post(f"/workspaces/{plain.pk}/delete/")
    client.post(f"/workspaces/{ticked.pk}/delete/", {"keep_snapshot": "on"})

    assert Workspace.objects.get(pk=plain.pk).status == Status.DELETED
    assert [s.workspace_id for s in DiskSnapshot.objects.all()] == [ticked.pk]


def test_only_its_owner_starts_from_it(cast, sim):
    snapshot = _kept(cast, sim)

    with pytest.raises(SnapshotRefused):
        _from(cast, snapshot, user=cast.teammate)
    assert not Workspace.objects.filter(owner=cast.teammate).exists()


def test_deleting_a_kept_snapshot_is_typed_audited_restorable_then_purged(client, cast, sim):
    snapshot = _kept(cast, sim)
    client.force_login(cast.researcher)
    page = client.get("/teams/vision/storage/").content.decode()
    assert snapshot.name in page and f"{snapshot.size_gb} GiB" in page
    url = f"/api/v1/teams/vision/storage/disk-snapshots/{snapshot.pk}"
    client.force_login(cast.teammate)
    assert client.delete(f"{url}?confirm={snapshot.name}").status_code == 403
    client.force_login(cast.researcher)
    assert client.delete(f"{url}?confirm=oops").status_code == 400

    deleted = client.delete(f"{url}?confirm={snapshot.name}")

    assert deleted.status_code == 202 and deleted.json()["restorable_until"]
    entry = AuditEntry.objects.get(action="storage.disk_snapshot.delete")
    assert entry.actor == cast.researcher
    listed = client.get("/api/v1/teams/vision/storage").json()
    assert listed["disk_snapshots"] == []
    assert [s["name"] for s in listed["deleted_disk_snapshots"]] == [snapshot.name]
    # Still there in Azure until its retention is over; then the hourly purge deletes it.
    now = timezone.now()
    assert disk_snapshots.disk_snapshots_purge(now=now) == 0
    assert disk_snapshots.disk_snapshots_purge(now=now + timedelta(days=15)) == 1
    assert azure_snapshots.get_snapshot(azure_settings(), name=snapshot.name) is None
    with pytest.raises(SnapshotRefused):
        _from(cast, DiskSnapshot.objects.get(pk=snapshot.pk))


def test_the_api_keeps_a_snapshot_and_starts_from_it_or_says_why_not(client, cast, sim):
    vm, ws = _workspace(cast.researcher, cast.team)
    client.force_login(cast.researcher)

    gone = client.delete(f"/api/v1/workspaces/{ws.pk}?keep_snapshot=true")

    assert gone.status_code == 202
    snapshot = DiskSnapshot.objects.get(workspace=ws)
    body = {
        "kind": "vm",  # kind-ok: the API's body names the kind
        "team": "vision",
        "name": "from-api",
        "vm_size": "Standard_NC24ads_A100_v4",
        "region": "eastus",
        "ssh_public_key": SSH_KEY,
        "from_snapshot": snapshot.name,
    }
    client.force_login(cast.teammate)
    refused = client.post(
        "/api/v1/workspaces",
        json.dumps(body),
        content_type="application/json",
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["loc"] == ["body", "from_snapshot"]
    client.force_login(cast.researcher)
    made = client.post(
        "/api/v1/workspaces",
        json.dumps(body),
        content_type="application/json",
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    assert made.status_code == 201, made.content
    assert Workspace.objects.get(name="from-api").from_snapshot == snapshot


def test_a_slice_has_no_disk_to_keep(cast, sim):
    from tests.factories import WorkspaceFactory

    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING)
    ws.kind = "mig"  # kind-ok: a workspace of a kind without an OS disk
    ws.save(update_fields=["kind"])

    with pytest.raises(Exception, match="no OS disk"):
        workspace_delete(user=cast.researcher, workspace=ws, now=timezone.now(), keep_snapshot=True)
    assert Workspace.objects.get(pk=ws.pk).status == Status.RUNNING


def test_a_vm_from_a_snapshot_is_never_placed_in_another_region(cast):
    from tests.factories import WorkspaceFactory
    from workspaces.backends.vm_placement import vm_options

    OfferingFactory(allow_region_fallback=True)
    OfferingFactory(region="westus2", price_per_hour="2.0000")
    gone = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.DELETED)
    kept = DiskSnapshot.objects.create(
        team=cast.team,
        owner=cast.researcher,
        workspace=gone,
        kind=gone.kind,
        name="ws-kept",
        azure_id="/subscriptions/x/snapshots/ws-kept",
        region="eastus",
        vm_size="Standard_NC24ads_A100_v4",
        size_gb=128,
        created_at=timezone.now(),
    )
    plain = WorkspaceFactory(team=cast.team, owner=cast.researcher, region="eastus")
    started = WorkspaceFactory(
        team=cast.team, owner=cast.researcher, region="eastus", from_snapshot=kept
    )

    now = timezone.now()
    assert {o.region for o in vm_options(plain, now)} == {"eastus", "westus2"}
    assert {o.region for o in vm_options(started, now)} == {"eastus"}


def test_a_snapshot_azure_refuses_deletes_nothing_and_the_retry_keeps_it(cast, sim, sim_server):
    vm, ws = _workspace(cast.researcher, cast.team)
    sim.storage_write(vm, "/home/alice/notes.txt", "mine")
    sim.inject("disk.snapshot", "server_error", count=1000)

    workspace_delete(user=cast.researcher, workspace=ws, now=timezone.now(), keep_snapshot=True)

    ws.refresh_from_db()
    assert (ws.status, ws.failed_operation) == (Status.FAILED, "delete")
    assert [v["name"] for v in sim.state()["virtualMachines"]] == [vm]
    assert sim.storage_read(vm, "/home/alice/notes.txt") == "mine"  # disk and files kept
    assert not DiskSnapshot.objects.exists()
    sim_server.state.faults.pop("disk.snapshot", None)  # Azure takes snapshots again

    workspace_retry(user=cast.researcher, workspace=ws, now=timezone.now())

    assert Workspace.objects.get(pk=ws.pk).status == Status.DELETED
    assert DiskSnapshot.objects.get(workspace=ws).name == f"{vm}-kept"
