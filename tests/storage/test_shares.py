"""Team shares through the services and tasks, with azure-mgmt-storage talking to the
emulator: create within the team's quota, confirmed and audited delete, restore from Azure
Files soft delete, snapshots on demand and on schedule with retention."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from cloudsim.storage_state import normalize_stamp
from common.permissions import ActionNotAllowed
from storage import provisioning, services
from storage.models import (
    Access,
    ProvisionedSpan,
    Snapshot,
    SnapshotReason,
    TeamShare,
    VolumeState,
)
from storage.selectors import team_storage_get
from teams.models import AuditEntry

pytestmark = pytest.mark.django_db(transaction=True)


def _quota(cast, gib):
    services.storage_quota_set(
        user=cast.platform_admin, team=cast.team, quota_gib=gib, now=timezone.now()
    )


def _share(cast, name="datasets", size=1024, access=Access.READ_WRITE, user=None):
    return services.share_create(
        user=user or cast.team_admin,
        team=cast.team,
        name=name,
        size_gib=size,
        researcher_access=access,
        now=timezone.now(),
    )


def _azure_share(sim_server, share):
    account = team_storage_get(team=share.team).account_name
    return sim_server.state.storage.shares.get((account, share.azure_name))


def test_a_team_admin_creates_a_share_that_becomes_a_private_nfs_share(cast, sim, sim_server):
    _quota(cast, 2048)

    share = _share(cast)

    share.refresh_from_db()
    assert share.state == VolumeState.READY
    azure = _azure_share(sim_server, share)
    assert (azure.quota_gib, azure.protocols, azure.root_squash) == (1024, "NFS", "RootSquash")
    account = sim_server.state.storage.accounts[team_storage_get(team=cast.team).account_name]
    assert (account.kind, account.sku) == ("FileStorage", "Premium_LRS")
    assert account.properties["publicNetworkAccess"] == "Disabled"
    assert account.properties["networkAcls"]["defaultAction"] == "Deny"
    assert AuditEntry.objects.filter(action="storage.share.create", team=cast.team).exists()


def test_the_team_quota_refuses_a_share_that_does_not_fit(cast, sim):
    _quota(cast, 1500)
    _share(cast, "datasets", 1024)

    with pytest.raises(ValidationError) as caught:
        _share(cast, "checkpoints", 500)

    assert "1500 GiB" in str(caught.value)
    assert not TeamShare.objects.filter(name="checkpoints").exists()


def test_a_researcher_may_not_create_a_share(cast, sim):
    _quota(cast, 2048)

    with pytest.raises(ActionNotAllowed):
        _share(cast, user=cast.researcher)


def test_a_team_admin_may_not_raise_the_storage_quota(cast):
    with pytest.raises(ActionNotAllowed):
        services.storage_quota_set(
            user=cast.team_admin, team=cast.team, quota_gib=10**6, now=timezone.now()
        )


@pytest.mark.parametrize("name", ["home", "Data", "a", "x--y", "-lead", "../etc"])
def test_bad_share_names_are_refused(cast, name):
    _quota(cast, 2048)

    with pytest.raises(ValidationError):
        _share(cast, name=name)


def test_delete_needs_the_name_typed_and_is_audited_and_restorable(cast, sim, sim_server):
    _quota(cast, 2048)
    share = _share(cast, "checkpoints", 100)
    _azure_share(sim_server, share).path.joinpath("epoch3.pt").write_text("weights")

    with pytest.raises(ValidationError):
        services.share_delete(user=cast.team_admin, share=share, confirm="x", now=timezone.now())
    services.share_delete(
        user=cast.team_admin, share=share, confirm="checkpoints", now=timezone.now()
    )

    share.refresh_from_db()
    assert share.state == VolumeState.DELETED and share.deleted_version
    assert _azure_share(sim_server, share) is None
    assert AuditEntry.objects.filter(action="storage.share.delete").count() == 1
    services.share_restore(user=cast.team_admin, share=share, now=timezone.now())
    share.refresh_from_db()
    assert share.state == VolumeState.READY
    assert _azure_share(sim_server, share).path.joinpath("epoch3.pt").read_text() == "weights"
    # Billed (provisioned GiB) while Azure had it, not while it was soft-deleted, again after.
    spans = list(ProvisionedSpan.objects.filter(share=share).values_list("size_gib", "ended_at"))
    assert [gib for gib, _ in spans] == [100, 100]
    assert spans[0][1] is not None and spans[1][1] is None


def test_a_share_past_its_retention_cannot_be_restored(cast, sim):
    _quota(cast, 2048)
    share = _share(cast, "checkpoints", 100)
    services.share_delete(
        user=cast.team_admin, share=share, confirm="checkpoints", now=timezone.now()
    )
    later = timezone.now() + timedelta(days=team_storage_get(team=cast.team).retention_days + 1)

    assert provisioning.volumes_purge(now=later) == 1
    share.refresh_from_db()
    with pytest.raises(ValidationError):
        services.share_restore(user=cast.team_admin, share=share, now=later)


def test_a_failed_create_says_why(cast, sim):
    _quota(cast, 2048)
    sim.inject("storage.share.create", "share_quota")

    share = _share(cast)

    share.refresh_from_db()
    assert share.state == VolumeState.FAILED
    assert "TotalSharesProvisionedCapacityExceedsAccountLimit" in share.error
    assert not ProvisionedSpan.objects.exists()  # Azure made nothing: nothing is billed


def test_scheduled_snapshots_keep_only_the_newest(cast, sim, sim_server):
    _quota(cast, 2048)
    share = _share(cast)
    storage = team_storage_get(team=cast.team)
    storage.snapshot_every_hours, storage.snapshot_keep = 6, 2
    storage.save()
    start = timezone.now()

    taken = [
        provisioning.snapshots_scheduled(now=start + timedelta(hours=h)) for h in (0, 1, 6, 12)
    ]

    assert taken == [1, 0, 1, 1]
    kept = Snapshot.objects.filter(share=share, reason=SnapshotReason.SCHEDULED)
    assert kept.count() == 2
    assert len(_azure_share(sim_server, share).snapshots) == 2
    # The portal keeps Azure's snapshotTime as the SDK gives it (microseconds).
    ours = {normalize_stamp(t) for t in kept.values_list("snapshot_time", flat=True)}
    assert ours == set(_azure_share(sim_server, share).snapshots)


def test_a_snapshot_on_demand_keeps_the_files_of_that_moment(cast, sim, sim_server):
    _quota(cast, 2048)
    share = _share(cast)
    live = _azure_share(sim_server, share)
    live.path.joinpath("train.csv").write_text("v1")

    services.snapshot_request(user=cast.team_admin, share=share)
    live.path.joinpath("train.csv").write_text("v2")

    snapshot = Snapshot.objects.get(share=share)
    assert snapshot.reason == SnapshotReason.ON_DEMAND and snapshot.taken_by == cast.team_admin
    assert (
        live.snapshots[normalize_stamp(snapshot.snapshot_time)].joinpath("train.csv").read_text()
        == "v1"
    )


def test_only_its_owner_snapshots_a_home(cast, sim, sim_server):
    _quota(cast, 2048)
    home = services.home_ensure(team=cast.team, owner=cast.researcher, now=timezone.now())
    home.refresh_from_db()
    assert home.state == VolumeState.READY

    with pytest.raises(ActionNotAllowed):
        services.home_snapshot_request(user=cast.team_admin, home=home)
    services.home_snapshot_request(user=cast.researcher, home=home)

    snapshot = Snapshot.objects.get(home=home)
    assert snapshot.taken_by == cast.researcher
