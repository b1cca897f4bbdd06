"""Scheduling against the nodes' allocatable MIG slices, taints and nodeSelector."""

import pytest
from kubernetes import client

from .conftest import KUBE_CLUSTER, KUBE_RG, KUBE_SUB, MIG_POOL


def phases(kube, namespace="team-a") -> dict[str, str]:
    return {p.metadata.name: p.status.phase for p in kube.core.list_namespaced_pod(namespace).items}


def scheduled(pod) -> client.V1PodCondition:
    return next(c for c in pod.status.conditions if c.type == "PodScheduled")


@pytest.fixture
def team(kube):
    kube.namespace("team-a")
    return kube


def test_a_pod_runs_on_a_free_slice(team):
    team.core.create_namespaced_pod("team-a", team.pod("p"))
    pod = team.core.read_namespaced_pod("p", "team-a")
    assert pod.status.phase == "Running"
    assert pod.spec.node_name.startswith("aks-mig1g-")
    ready = next(c for c in pod.status.conditions if c.type == "Ready")
    assert ready.status == "True" and pod.status.container_statuses[0].ready


def test_no_free_slice_is_pending_unschedulable_with_the_schedulers_words(team):
    for i in range(8):
        team.core.create_namespaced_pod("team-a", team.pod(f"p{i}"))
    assert list(phases(team).values()).count("Running") == 7
    pod = team.core.read_namespaced_pod("p7", "team-a")
    assert pod.status.phase == "Pending" and pod.spec.node_name is None
    condition = scheduled(pod)
    assert (condition.status, condition.reason) == ("False", "Unschedulable")
    assert condition.message == (
        "0/3 nodes are available: 1 Insufficient nvidia.com/mig-1g.10gb, "
        "2 node(s) didn't match Pod's node affinity/selector."
    )
    events = team.core.list_namespaced_event(
        "team-a", field_selector="involvedObject.name=p7,reason=FailedScheduling"
    ).items
    assert [e.message for e in events] == [condition.message]


def test_the_pending_pod_starts_once_a_slice_frees_up(team):
    for i in range(8):
        team.core.create_namespaced_pod("team-a", team.pod(f"p{i}"))
    assert phases(team)["p7"] == "Pending"
    team.core.delete_namespaced_pod("p3", "team-a")
    assert phases(team)["p7"] == "Running"


def test_a_pod_without_the_toleration_meets_the_taint(team):
    pod = team.pod("p")
    pod.spec.tolerations = None
    team.core.create_namespaced_pod("team-a", pod)
    message = scheduled(team.core.read_namespaced_pod("p", "team-a")).message
    assert message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint {sku: gpu}, "
        "2 node(s) didn't match Pod's node affinity/selector."
    )


def test_node_selector_keeps_cpu_pods_off_gpu_pools_and_resources_count(team):
    cpu_pod = team.pod("cpu", resources={"cpu": "2", "memory": "4Gi"}, pool="system")
    team.core.create_namespaced_pod("team-a", cpu_pod)
    assert team.core.read_namespaced_pod("cpu", "team-a").spec.node_name.startswith("aks-system-")
    big = team.pod("big", resources={"cpu": "6"}, pool="system")
    team.core.create_namespaced_pod("team-a", big)
    message = scheduled(team.core.read_namespaced_pod("big", "team-a")).message
    assert message == (
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "2 Insufficient cpu."
    )


def test_dropping_a_pool_sends_its_pods_back_to_pending(team):
    team.core.create_namespaced_pod("team-a", team.pod("p"))
    assert phases(team) == {"p": "Running"}
    team.control.k8s_drop_pool(KUBE_SUB, KUBE_RG, KUBE_CLUSTER, "mig1g")
    pod = team.core.read_namespaced_pod("p", "team-a")
    assert pod.status.phase == "Pending"
    assert scheduled(pod).message == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
    )
    team.control.k8s_cluster(KUBE_SUB, KUBE_RG, KUBE_CLUSTER, [MIG_POOL])
    assert phases(team) == {"p": "Running"}


def test_growing_a_pool_adds_nodes_and_slices(team):
    for i in range(8):
        team.core.create_namespaced_pod("team-a", team.pod(f"p{i}"))
    team.control.k8s_cluster(KUBE_SUB, KUBE_RG, KUBE_CLUSTER, [{**MIG_POOL, "count": 2}])
    assert set(phases(team).values()) == {"Running"}
    names = [n.metadata.name for n in team.core.list_node(label_selector="agentpool=mig1g").items]
    assert [n[-10:] for n in sorted(names)] == ["vmss000000", "vmss000001"]


def test_pods_start_after_the_clouds_latency(team, sim):
    sim.state.latency = 0.5
    team.core.create_namespaced_pod("team-a", team.pod("p"))
    pod = team.core.read_namespaced_pod("p", "team-a")
    assert pod.status.phase == "Pending" and pod.spec.node_name
    assert pod.status.container_statuses[0].state.waiting.reason == "ContainerCreating"
    with sim.state.lock:
        cluster = next(iter(sim.state.kube.clusters.values()))
        cluster.ready_at = dict.fromkeys(cluster.ready_at, 0)
    assert team.core.read_namespaced_pod("p", "team-a").status.phase == "Running"


def test_control_state_lists_nodes_and_pods(team):
    team.core.create_namespaced_pod("team-a", team.pod("p"))
    (cluster,) = team.control.k8s_state()
    assert cluster["server"] == f"/k8s/{KUBE_SUB}/{KUBE_RG}/{KUBE_CLUSTER}"
    assert sorted(cluster["pools"]) == ["mig1g", "system"]
    assert len(cluster["nodes"]) == 3
    (pod,) = cluster["pods"]
    assert (pod["name"], pod["phase"], pod["ready"]) == ("p", "Running", True)
    assert pod["node"].startswith("aks-mig1g-")
    assert pod["requests"]["nvidia.com/mig-1g.10gb"] == "1"
