"""ResourceQuota admission (403 with the API server's message), quota status and LimitRange
defaults."""

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from .conftest import kube_error


def quota(kube, hard: dict, name: str = "portal-quota") -> None:
    body = client.V1ResourceQuota(
        metadata=client.V1ObjectMeta(name=name), spec=client.V1ResourceQuotaSpec(hard=hard)
    )
    kube.core.create_namespaced_resource_quota("team-a", body)


@pytest.fixture
def team(kube):
    kube.namespace("team-a")
    return kube


def test_a_pod_over_the_gpu_quota_is_forbidden_with_the_exact_message(team):
    quota(team, {"requests.nvidia.com/gpu": "0"})
    gpu_pod = team.pod("train", resources={"nvidia.com/gpu": "1"}, pool=None)
    with pytest.raises(ApiException) as caught:
        team.core.create_namespaced_pod("team-a", gpu_pod)
    status, body = kube_error(caught.value)
    assert (status, body["reason"], body["status"]) == (403, "Forbidden", "Failure")
    assert body["message"] == (
        'pods "train" is forbidden: exceeded quota: portal-quota, requested: '
        "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=0, "
        "limited: requests.nvidia.com/gpu=0"
    )
    assert body["details"] == {"name": "train", "kind": "pods"}
    assert team.core.list_namespaced_pod("team-a").items == []


def test_mig_quota_counts_slices_and_status_used_follows(team):
    quota(team, {"requests.nvidia.com/mig-1g.10gb": "2", "pods": "10"})
    team.core.create_namespaced_pod("team-a", team.pod("a"))
    team.core.create_namespaced_pod("team-a", team.pod("b"))
    with pytest.raises(ApiException) as caught:
        team.core.create_namespaced_pod("team-a", team.pod("c"))
    assert kube_error(caught.value)[1]["message"].endswith(
        "requested: requests.nvidia.com/mig-1g.10gb=1, used: requests.nvidia.com/mig-1g.10gb=2, "
        "limited: requests.nvidia.com/mig-1g.10gb=2"
    )
    status = team.core.read_namespaced_resource_quota("portal-quota", "team-a").status
    assert status.hard == {"requests.nvidia.com/mig-1g.10gb": "2", "pods": "10"}
    assert status.used == {"requests.nvidia.com/mig-1g.10gb": "2", "pods": "2"}
    team.core.delete_namespaced_pod("a", "team-a")
    status = team.core.read_namespaced_resource_quota("portal-quota", "team-a").status
    assert status.used["requests.nvidia.com/mig-1g.10gb"] == "1"
    team.core.create_namespaced_pod("team-a", team.pod("c"))


def test_several_exceeded_resources_are_listed_sorted(team):
    quota(team, {"requests.cpu": "1", "requests.memory": "1Gi", "limits.cpu": "8"})
    pod = team.pod("p", resources={"cpu": "2", "memory": "2Gi"}, pool="system")
    with pytest.raises(ApiException) as caught:
        team.core.create_namespaced_pod("team-a", pod)
    assert kube_error(caught.value)[1]["message"] == (
        'pods "p" is forbidden: exceeded quota: portal-quota, '
        "requested: requests.cpu=2,requests.memory=2Gi, used: requests.cpu=0,requests.memory=0, "
        "limited: requests.cpu=1,requests.memory=1Gi"
    )


def test_limit_range_defaults_fill_containers_without_requests(team):
    item = client.V1LimitRangeItem(
        type="Container", default={"cpu": "2", "memory": "4Gi"}, default_request={"cpu": "500m"}
    )
    team.core.create_namespaced_limit_range(
        "team-a",
        client.V1LimitRange(
            metadata=client.V1ObjectMeta(name="defaults"),
            spec=client.V1LimitRangeSpec(limits=[item]),
        ),
    )
    pod = team.core.create_namespaced_pod("team-a", team.pod("p", resources={}, pool="system"))
    resources = pod.spec.containers[0].resources
    assert resources.limits == {"cpu": "2", "memory": "4Gi"}
    assert resources.requests == {"cpu": "500m", "memory": "4Gi"}
    quota(team, {"requests.cpu": "1"}, name="cpu")
    status = team.core.read_namespaced_resource_quota("cpu", "team-a").status
    assert status.used == {"requests.cpu": "500m"}


def test_a_bad_quantity_is_refused_not_a_server_error(team):
    with pytest.raises(ApiException) as caught:
        quota(team, {"requests.cpu": "lots"})
    status, body = kube_error(caught.value)
    assert (status, body["reason"]) == (422, "Invalid")
    assert "quantities must match the regular expression" in body["message"]
