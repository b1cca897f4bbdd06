"""A MIG slice mounts the team's shares and its owner's home through the Azure Files CSI
driver (static PersistentVolume + claim), at the paths a VM mounts them: the home follows its
owner from a VM to a slice."""

import pytest
from django.utils import timezone

from cloudsim.control import SimControlError
from storage import services
from storage.models import Access, TeamShare
from tests.clusters.test_aks_workspaces import (  # noqa: F401
    cluster,
    four_gpu_offering,
    make_pool,
    request_mig,
    request_namespace,
)
from tests.storage.test_mounts import _workspace
from workspaces.actions import workspace_delete
from workspaces.hooks import MountChoice
from workspaces.models import Workspace
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def team_storage(cast, sim):
    now = timezone.now()
    services.storage_quota_set(user=cast.platform_admin, team=cast.team, quota_gib=4096, now=now)
    services.share_create(
        user=cast.team_admin,
        team=cast.team,
        name="datasets",
        size_gib=1024,
        researcher_access=Access.READ_ONLY,
        now=now,
    )
    return sim


def test_the_home_follows_its_owner_from_a_vm_to_a_mig_slice(
    cast,
    cluster,  # noqa: F811
    team_storage,
):
    vm, _ = _workspace(cast.researcher, cast.team)
    team_storage.storage_write(vm, "/data/home/checkpoints/step100.pt", "weights")
    make_pool(cast, cluster)

    ws = request_mig(cast)

    assert ws.status == Status.RUNNING, ws.waiting_reason or ws.error_message
    pod = f"ws-{ws.short_id}"
    assert team_storage.storage_read(pod, "/data/home/checkpoints/step100.pt") == "weights"
    mounts = {m["path"]: m["read_only"] for m in team_storage.storage_mounts(pod)}
    assert mounts == {"/data/datasets": True, "/data/home": False}
    with pytest.raises(SimControlError) as caught:
        team_storage.storage_write(pod, "/data/datasets/x.csv", "a")
    assert caught.value.status == 403


def test_the_slice_claims_a_retained_csi_volume_of_the_share(
    cast,
    cluster,  # noqa: F811
    team_storage,
    sim_server,
):
    make_pool(cast, cluster)

    ws = request_mig(cast)

    assert ws.status == Status.RUNNING
    (kube,) = sim_server.state.kube.clusters.values()
    claims = {c["metadata"]["name"]: c for c in kube.items("persistentvolumeclaims", "team-vision")}
    claim = claims["nfs-" + TeamShare.objects.get(name="datasets").azure_name]
    assert claim["status"]["phase"] == "Bound" and claim["spec"]["storageClassName"] == ""
    volume = kube.get("persistentvolumes", "", claim["spec"]["volumeName"])
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert volume["spec"]["csi"]["driver"] == "file.csi.azure.com"
    assert volume["spec"]["csi"]["volumeAttributes"]["protocol"] == "nfs"
    assert volume["spec"]["claimRef"] == {
        "namespace": "team-vision",
        "name": claim["metadata"]["name"],
    }


def test_a_namespace_gets_claims_of_the_shares_read_only_on_the_volume(
    cast,
    cluster,  # noqa: F811
    team_storage,
    sim_server,
):
    pool = make_pool(cast, cluster, name="a100", profile="", **four_gpu_offering())

    ws = request_namespace(cast, pool)

    assert ws.status == Status.RUNNING, ws.error_message
    (kube,) = sim_server.state.kube.clusters.values()
    share = TeamShare.objects.get(name="datasets")
    claim = kube.get("persistentvolumeclaims", ws.namespace, f"nfs-{share.azure_name}")
    assert claim["status"]["phase"] == "Bound"
    volume = kube.get("persistentvolumes", "", claim["spec"]["volumeName"])
    # The team may write any pod spec here: a researcher's read-only share is read-only below it.
    assert volume["spec"]["csi"]["readOnly"] is True
    homes = [
        c
        for c in kube.items("persistentvolumeclaims", ws.namespace)
        if "home" in c["metadata"]["name"]
    ]
    assert [c["status"]["phase"] for c in homes] == ["Bound"]


def test_a_slice_mounts_only_what_its_request_chose(
    cast,
    cluster,  # noqa: F811
    team_storage,
    sim_server,
):
    make_pool(cast, cluster)

    ws = request_mig(cast, mounts=MountChoice(shares=(), home=True))

    assert ws.status == Status.RUNNING, ws.waiting_reason or ws.error_message
    assert [m["path"] for m in team_storage.storage_mounts(f"ws-{ws.short_id}")] == ["/data/home"]
    (kube,) = sim_server.state.kube.clusters.values()
    claims = [c["metadata"]["name"] for c in kube.items("persistentvolumeclaims", "team-vision")]
    share = TeamShare.objects.get(name="datasets")
    assert f"nfs-{share.azure_name}" not in claims


def test_deleting_a_namespace_deletes_its_volumes_never_the_share(
    cast,
    cluster,  # noqa: F811
    team_storage,
    sim_server,
):
    pool = make_pool(cast, cluster, name="a100", profile="", **four_gpu_offering())
    ws = request_namespace(cast, pool)
    assert ws.status == Status.RUNNING, ws.error_message
    (kube,) = sim_server.state.kube.clusters.values()
    share = TeamShare.objects.get(name="datasets")
    claim = kube.get("persistentvolumeclaims", ws.namespace, f"nfs-{share.azure_name}")
    volume = claim["spec"]["volumeName"]
    admins, _ = _workspace(cast.team_admin, cast.team)
    team_storage.storage_write(admins, "/data/datasets/kept.csv", "a,b")

    workspace_delete(user=cast.researcher, workspace=ws, now=timezone.now())

    assert Workspace.objects.get(pk=ws.pk).status == Status.DELETED
    assert kube.get("persistentvolumes", "", volume) is None
    # The share and its files stay; the team's other namespace (MIG slices) keeps its own.
    assert TeamShare.objects.get(pk=share.pk).state == "ready"
    assert team_storage.storage_read(admins, "/data/datasets/kept.csv") == "a,b"
    # The same name again: its claims bind (a Released volume left behind would not).
    again = request_namespace(cast, pool)
    assert again.status == Status.RUNNING, again.error_message
    claim = kube.get("persistentvolumeclaims", again.namespace, f"nfs-{share.azure_name}")
    assert claim["status"]["phase"] == "Bound"
