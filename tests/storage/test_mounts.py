"""What a workspace sees of the team's storage: VM workspaces made through the real flow
mount the team's shares and their owner's home by cloud-init, and the emulator plays the NFS
mounts on real directories (cloudsim/storage_mounts.py)."""

import uuid

import pytest
from django.utils import timezone

from cloudsim.control import SimControlError
from storage import services
from storage.models import Access, PersonalHome, ProvisionedSpan, TeamShare, VolumeState
from tests.factories import SSH_KEY, OfferingFactory
from workspaces.actions import workspace_delete
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)


def _storage(cast):
    now = timezone.now()
    for team in (cast.team, cast.other_team):
        services.storage_quota_set(user=cast.platform_admin, team=team, quota_gib=4096, now=now)
    for name, access in (("scratch", Access.READ_WRITE), ("datasets", Access.READ_ONLY)):
        services.share_create(
            user=cast.team_admin,
            team=cast.team,
            name=name,
            size_gib=1024,
            researcher_access=access,
            now=now,
        )
    # The other team has a share of the same name: still not ours.
    services.share_create(
        user=cast.other_team_admin,
        team=cast.other_team,
        name="scratch",
        size_gib=100,
        researcher_access=Access.READ_WRITE,
        now=now,
    )


def _workspace(user, team):
    ws = workspace_request(
        user=user,
        team=team,
        name=f"ws-{uuid.uuid4().hex[:6]}",
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
    )
    ws = Workspace.objects.get(pk=ws.pk)
    # Its VM runs either way; one made from an environment is still setting itself up.
    assert ws.status in (Status.RUNNING, Status.SETTING_UP), ws.error_message
    return f"ws-{ws.id.hex[:12]}", ws


@pytest.fixture
def team_storage(cast, sim):
    _storage(cast)
    return sim


def test_a_file_written_in_one_workspace_is_read_in_another_of_the_team_only(cast, team_storage):
    first, _ = _workspace(cast.researcher, cast.team)
    second, _ = _workspace(cast.teammate, cast.team)
    other, _ = _workspace(cast.outsider, cast.other_team)

    team_storage.storage_write(first, "/data/scratch/results/run1.json", '{"loss": 0.1}')

    assert team_storage.storage_read(second, "/data/scratch/results/run1.json") == '{"loss": 0.1}'
    with pytest.raises(SimControlError) as caught:
        team_storage.storage_read(other, "/data/scratch/results/run1.json")
    assert caught.value.status == 404


def test_a_share_read_only_for_researchers_refuses_their_writes_not_the_admins(cast, team_storage):
    researchers, _ = _workspace(cast.researcher, cast.team)
    admins, _ = _workspace(cast.team_admin, cast.team)

    with pytest.raises(SimControlError) as caught:
        team_storage.storage_write(researchers, "/data/datasets/labels.csv", "a,b")
    team_storage.storage_write(admins, "/data/datasets/labels.csv", "a,b")

    assert caught.value.status == 403
    assert team_storage.storage_read(researchers, "/data/datasets/labels.csv") == "a,b"
    mounts = {m["path"]: m["read_only"] for m in team_storage.storage_mounts(researchers)}
    assert mounts == {"/data/datasets": True, "/data/scratch": False, "/data/home": False}


def test_the_home_follows_its_owner_and_no_one_else(cast, team_storage):
    first, _ = _workspace(cast.researcher, cast.team)
    team_storage.storage_write(first, "/data/home/.bashrc", "alias ll='ls -l'")

    again, _ = _workspace(cast.researcher, cast.team)
    teammates, _ = _workspace(cast.teammate, cast.team)

    assert team_storage.storage_read(again, "/data/home/.bashrc") == "alias ll='ls -l'"
    with pytest.raises(SimControlError):
        team_storage.storage_read(teammates, "/data/home/.bashrc")


def test_deleting_a_workspace_leaves_the_share_and_the_home(cast, team_storage):
    name, ws = _workspace(cast.researcher, cast.team)
    team_storage.storage_write(name, "/data/scratch/keep.txt", "kept")
    team_storage.storage_write(name, "/data/home/notes.txt", "mine")

    workspace_delete(user=cast.researcher, workspace=ws, now=timezone.now())

    assert Workspace.objects.get(pk=ws.pk).status == Status.DELETED
    assert TeamShare.objects.get(team=cast.team, name="scratch").state == VolumeState.READY
    home = PersonalHome.objects.get(team=cast.team, owner=cast.researcher)
    assert home.state == VolumeState.READY
    # Both still billed at their provisioned size, with no workspace left to mount them.
    assert ProvisionedSpan.objects.filter(ended_at=None, team=cast.team).count() == 3  # + datasets
    assert ProvisionedSpan.objects.get(home=home).size_gib == home.size_gib
    later, _ = _workspace(cast.researcher, cast.team)
    assert team_storage.storage_read(later, "/data/scratch/keep.txt") == "kept"
    assert team_storage.storage_read(later, "/data/home/notes.txt") == "mine"


def test_a_team_without_storage_quota_mounts_nothing(cast, sim):
    name, _ = _workspace(cast.researcher, cast.team)

    assert sim.storage_mounts(name) == []


def test_the_workspace_page_lists_what_is_mounted_where(client, cast, team_storage):
    _, ws = _workspace(cast.researcher, cast.team)
    client.force_login(cast.researcher)

    page = client.get(f"/workspaces/{ws.pk}/").content.decode()

    assert "<code>/data/datasets</code>: datasets, read-only" in page
    assert "<code>/data/scratch</code>: scratch, read-write" in page
    assert "<code>/data/home</code>: home, read-write" in page
