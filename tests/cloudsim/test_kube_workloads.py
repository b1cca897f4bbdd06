"""Deployment and StatefulSet controllers: replicas, /scale, quota-refused pods retried,
garbage collection and PVC protection."""

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from .conftest import kube_error


def template(kube, name: str, resources: dict | None = None) -> client.V1PodTemplateSpec:
    pod = kube.pod(name, resources)
    return client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels={"app": name}), spec=pod.spec
    )


def statefulset(kube, name: str, replicas: int = 1, **spec) -> None:
    body = client.V1StatefulSet(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1StatefulSetSpec(
            replicas=replicas,
            service_name=name,
            selector=client.V1LabelSelector(match_labels={"app": name}),
            template=template(kube, name),
            **spec,
        ),
    )
    kube.apps.create_namespaced_stateful_set("team-a", body)


def deployment(kube, name: str, replicas: int = 1, resources: dict | None = None) -> None:
    body = client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DeploymentSpec(
            replicas=replicas,
            selector=client.V1LabelSelector(match_labels={"app": name}),
            template=template(kube, name, resources),
        ),
    )
    kube.apps.create_namespaced_deployment("team-a", body)


def pods(kube) -> dict[str, str]:
    found = kube.core.list_namespaced_pod("team-a").items
    return {p.metadata.name: p.status.phase for p in found}


@pytest.fixture
def team(kube):
    kube.namespace("team-a")
    return kube


def test_statefulset_pods_are_named_by_ordinal_and_scale_through_the_subresource(team):
    statefulset(team, "ws", replicas=2)
    assert pods(team) == {"ws-0": "Running"}  # OrderedReady: ws-1 waits for ws-0.
    assert pods(team) == {"ws-0": "Running", "ws-1": "Running"}
    status = team.apps.read_namespaced_stateful_set("ws", "team-a").status
    assert (status.replicas, status.ready_replicas) == (2, 2)
    team.apps.patch_namespaced_stateful_set_scale("ws", "team-a", {"spec": {"replicas": 0}})
    assert team.apps.read_namespaced_stateful_set_scale("ws", "team-a").spec.replicas == 0
    assert pods(team) == {}
    status = team.apps.read_namespaced_stateful_set("ws", "team-a").status
    assert (status.replicas, status.ready_replicas) == (0, None)
    scale = team.apps.read_namespaced_stateful_set_scale("ws", "team-a")
    scale.spec.replicas = 1
    team.apps.replace_namespaced_stateful_set_scale("ws", "team-a", scale)
    assert pods(team) == {"ws-0": "Running"}


def test_scale_put_with_a_stale_resource_version_conflicts(team):
    statefulset(team, "ws")
    stale = team.apps.read_namespaced_stateful_set_scale("ws", "team-a")
    team.apps.patch_namespaced_stateful_set_scale("ws", "team-a", {"spec": {"replicas": 2}})
    stale.spec.replicas = 0
    with pytest.raises(ApiException) as caught:
        team.apps.replace_namespaced_stateful_set_scale("ws", "team-a", stale)
    assert kube_error(caught.value)[1]["reason"] == "Conflict"
    with pytest.raises(ApiException) as caught:
        team.apps.patch_namespaced_stateful_set_scale("ws", "team-a", {"spec": {"replicas": -1}})
    assert caught.value.status == 422


def test_deployment_keeps_replicas_and_scale_down_drops_pending_pods_first(team):
    deployment(team, "web", replicas=9)
    phases = pods(team)
    assert sorted(phases.values()).count("Running") == 7 and len(phases) == 9
    assert all(name.startswith("web-") and len(name.split("-")) == 3 for name in phases)
    team.apps.patch_namespaced_deployment_scale("web", "team-a", {"spec": {"replicas": 7}})
    assert sorted(pods(team).values()) == ["Running"] * 7
    status = team.apps.read_namespaced_deployment("web", "team-a").status
    assert (status.replicas, status.ready_replicas, status.available_replicas) == (7, 7, 7)


def test_a_quota_refused_pod_is_a_failed_create_event_and_appears_once_allowed(team):
    team.core.create_namespaced_resource_quota(
        "team-a",
        client.V1ResourceQuota(
            metadata=client.V1ObjectMeta(name="q"),
            spec=client.V1ResourceQuotaSpec(hard={"requests.nvidia.com/mig-1g.10gb": "0"}),
        ),
    )
    statefulset(team, "ws")
    assert pods(team) == {}
    events = team.core.list_namespaced_event("team-a", field_selector="reason=FailedCreate").items
    assert [(e.involved_object.kind, e.involved_object.name) for e in events] == [
        ("StatefulSet", "ws")
    ]
    assert events[0].message == (
        'create Pod ws-0 in StatefulSet ws failed error: pods "ws-0" is forbidden: exceeded '
        "quota: q, requested: requests.nvidia.com/mig-1g.10gb=1, "
        "used: requests.nvidia.com/mig-1g.10gb=0, limited: requests.nvidia.com/mig-1g.10gb=0"
    )
    patch = {"spec": {"hard": {"requests.nvidia.com/mig-1g.10gb": "1"}}}
    team.core.patch_namespaced_resource_quota("q", "team-a", patch)
    assert pods(team) == {"ws-0": "Running"}


def test_deleting_the_owner_collects_its_pods_and_the_pvc_waits_for_them(team):
    claim = client.V1PersistentVolumeClaim(
        metadata=client.V1ObjectMeta(name="home"),
        spec=client.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"],
            resources=client.V1VolumeResourceRequirements(requests={"storage": "50Gi"}),
        ),
    )
    created = team.core.create_namespaced_persistent_volume_claim("team-a", claim)
    assert created.status.phase == "Bound"
    body = template(team, "ws")
    body.spec.volumes = [
        client.V1Volume(
            name="home",
            persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(claim_name="home"),
        )
    ]
    team.apps.create_namespaced_stateful_set(
        "team-a",
        client.V1StatefulSet(
            metadata=client.V1ObjectMeta(name="ws"),
            spec=client.V1StatefulSetSpec(
                service_name="ws",
                selector=client.V1LabelSelector(match_labels={"app": "ws"}),
                template=body,
            ),
        ),
    )
    assert pods(team) == {"ws-0": "Running"}
    team.core.delete_namespaced_persistent_volume_claim("home", "team-a")
    protected = team.core.read_namespaced_persistent_volume_claim("home", "team-a")
    assert protected.metadata.deletion_timestamp is not None
    assert protected.metadata.finalizers == ["kubernetes.io/pvc-protection"]
    team.apps.delete_namespaced_stateful_set("ws", "team-a")
    assert pods(team) == {}
    with pytest.raises(ApiException) as caught:
        team.core.read_namespaced_persistent_volume_claim("home", "team-a")
    assert caught.value.status == 404


def test_a_selector_that_does_not_match_the_template_is_invalid(team):
    body = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            selector=client.V1LabelSelector(match_labels={"app": "other"}),
            template=template(team, "web"),
        ),
    )
    with pytest.raises(ApiException) as caught:
        team.apps.create_namespaced_deployment("team-a", body)
    status, body = kube_error(caught.value)
    assert (status, body["reason"]) == (422, "Invalid")
    assert "`selector` does not match template `labels`" in body["message"]
