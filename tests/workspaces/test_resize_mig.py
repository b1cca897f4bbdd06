"""Moving a MIG slice to another MIG profile in one click (workspaces.resizes,
clusters.backends.mig_resize), against the emulator's AKS and Kubernetes: its pod is made again
on a pool of the new profile in the same cluster, its PVC (/home) kept."""

import pytest
from django.utils import timezone

from billing.models import Meter, UsageInterval
from teams.models import GpuQuota
from tests.clusters.test_aks_workspaces import cluster, kube, make_pool, request_mig, statuses  # noqa: F401
from workspaces import resizes
from workspaces.models import Workspace
from workspaces.requests import WorkspaceActionError
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)


def _objects(sim, kind, ws):
    prefix = f"ws-{ws.short_id}"
    return [o for o in kube(sim)[kind] if o["name"].startswith(prefix)]


def test_a_running_slice_moves_to_another_profile_keeping_its_home(cast, cluster, sim):  # noqa: F811
    make_pool(cast, cluster)
    bigger = make_pool(cast, cluster, name="mig3g", profile="MIG3g")
    ws = request_mig(cast)
    assert ws.status == Status.RUNNING, ws.waiting_reason or ws.error_message
    pvc_before = _objects(sim, "persistentvolumeclaims", ws)
    assert len(pvc_before) == 1

    choices = resizes.resize_choices(workspace=ws, now=timezone.now())
    assert [(c.key, c.gpu_memory_gib) for c in choices] == [("mig3g", 40)]
    resizes.workspace_resize(user=cast.researcher, workspace=ws, target="mig3g", now=timezone.now())

    ws = Workspace.objects.get(pk=ws.pk)
    assert ws.status == Status.RUNNING, ws.waiting_reason or ws.error_message
    assert (ws.mig_profile, ws.gpu_slices, ws.node_pool_id) == ("3g.40gb", 3, bigger.pk)
    assert statuses(ws)[-4:] == [Status.STOPPING, Status.RESIZING, Status.STARTING, Status.RUNNING]
    (pod,) = _objects(sim, "pods", ws)
    assert pod["phase"] == "Running" and pod["node"].startswith("aks-mig3g-")
    assert _objects(sim, "persistentvolumeclaims", ws) == pvc_before  # the same /home
    moved = ws.events.get(to_status=Status.STARTING, from_status=Status.RESIZING)
    assert "Moved from 1g.10gb to 3g.40gb on node pool mig3g; /home kept" in moved.reason
    # Billed at the new share (3/7 of the node) from the start.
    open_compute = UsageInterval.objects.get(workspace_id=ws.pk, meter=Meter.COMPUTE, ended_at=None)
    assert (open_compute.share_num, open_compute.share_den) == (3, 7)


def test_a_move_above_the_quota_is_refused(cast, cluster, sim):  # noqa: F811
    make_pool(cast, cluster)
    make_pool(cast, cluster, name="mig3g", profile="MIG3g")
    ws = request_mig(cast)
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=0)
    with pytest.raises(WorkspaceActionError, match="cannot be resized"):
        resizes.workspace_resize(
            user=cast.researcher, workspace=ws, target="mig3g", now=timezone.now()
        )
    assert Workspace.objects.get(pk=ws.pk).status == Status.RUNNING


def test_a_stopped_slice_moves_and_stays_stopped_then_starts_there(cast, cluster, sim):  # noqa: F811
    from workspaces.actions import workspace_start, workspace_stop

    make_pool(cast, cluster)
    bigger = make_pool(cast, cluster, name="mig3g", profile="MIG3g")
    ws = request_mig(cast)
    workspace_stop(user=cast.researcher, workspace=ws, now=timezone.now())
    ws = Workspace.objects.get(pk=ws.pk)
    pvc_before = _objects(sim, "persistentvolumeclaims", ws)
    resizes.workspace_resize(user=cast.researcher, workspace=ws, target="mig3g", now=timezone.now())
    ws = Workspace.objects.get(pk=ws.pk)
    assert (ws.status, ws.mig_profile, ws.node_pool_id) == (Status.STOPPED, "3g.40gb", bigger.pk)
    assert _objects(sim, "pods", ws) == []
    assert _objects(sim, "persistentvolumeclaims", ws) == pvc_before
    workspace_start(user=cast.researcher, workspace=ws, now=timezone.now())
    (pod,) = _objects(sim, "pods", Workspace.objects.get(pk=ws.pk))
    assert pod["phase"] == "Running" and pod["node"].startswith("aks-mig3g-")
