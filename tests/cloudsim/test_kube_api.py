"""The simulated API server's shapes, through the real kubernetes client: Status bodies,
401/404/409, list resourceVersion and selectors, replace conflicts, patch, nodes."""

import json
import urllib.error
import urllib.request

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from .conftest import kube_error


def test_requests_without_a_bearer_token_get_401_status(kube):
    request = urllib.request.Request(kube.url + "/api/v1/namespaces")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    body = json.loads(caught.value.read())
    assert caught.value.code == 401
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


def test_version_and_an_unknown_cluster(kube, sim):
    assert client.VersionApi(kube.api).get_code().git_version.startswith("v1.")
    config = client.Configuration(host=sim.url + "/k8s/sub/rg/no-such-cluster")
    config.api_key, config.api_key_prefix = {"BearerToken": "t"}, {"BearerToken": "Bearer"}
    with pytest.raises(ApiException) as caught:
        client.CoreV1Api(client.ApiClient(config)).list_namespace()
    assert caught.value.status == 404


def test_get_of_a_missing_object_is_a_not_found_status(kube):
    with pytest.raises(ApiException) as caught:
        kube.apps.read_namespaced_deployment("web", "default")
    status, body = kube_error(caught.value)
    assert status == 404
    assert body["reason"] == "NotFound"
    assert body["message"] == 'deployments.apps "web" not found'
    assert body["details"] == {"name": "web", "group": "apps", "kind": "deployments"}


def test_create_twice_is_409_already_exists(kube):
    kube.namespace("team-a")
    with pytest.raises(ApiException) as caught:
        kube.namespace("team-a")
    status, body = kube_error(caught.value)
    assert (status, body["reason"], body["code"]) == (409, "AlreadyExists", 409)
    assert body["message"] == 'namespaces "team-a" already exists'
    assert body["details"] == {"name": "team-a", "kind": "namespaces"}


def test_create_in_a_missing_namespace_is_404(kube):
    with pytest.raises(ApiException) as caught:
        kube.core.create_namespaced_pod("nowhere", kube.pod("p"))
    assert kube_error(caught.value)[1]["message"] == 'namespaces "nowhere" not found'


def test_bad_names_are_422_invalid(kube):
    with pytest.raises(ApiException) as caught:
        kube.namespace("Team_A")
    status, body = kube_error(caught.value)
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"].startswith(
        'Namespace "Team_A" is invalid: metadata.name: Invalid value: "Team_A": '
        "a lowercase RFC 1123 label"
    )


def test_objects_carry_metadata_and_every_write_bumps_the_resource_version(kube):
    before = int(kube.core.list_namespace().metadata.resource_version)
    kube.namespace("team-a")
    created = kube.core.read_namespace("team-a")
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert created.metadata.labels["kubernetes.io/metadata.name"] == "team-a"
    assert created.status.phase == "Active"
    after = int(kube.core.list_namespace().metadata.resource_version)
    assert after > before
    assert int(created.metadata.resource_version) <= after
    assert int(kube.core.list_namespace().metadata.resource_version) == after  # Reads: no write.


def test_replace_with_a_stale_resource_version_is_409_conflict(kube):
    kube.namespace("team-a")
    secret = client.V1Secret(metadata=client.V1ObjectMeta(name="s"), string_data={"k": "v"})
    stale = kube.core.create_namespaced_secret("team-a", secret)
    assert stale.data == {"k": "dg=="}  # stringData folded into data, base64.
    fresh = kube.core.read_namespaced_secret("s", "team-a")
    fresh.data = {"k": "dzI="}
    kube.core.replace_namespaced_secret("s", "team-a", fresh)
    stale.data = {"k": "dzM="}
    with pytest.raises(ApiException) as caught:
        kube.core.replace_namespaced_secret("s", "team-a", stale)
    status, body = kube_error(caught.value)
    assert (status, body["reason"]) == (409, "Conflict")
    assert "the object has been modified" in body["message"]
    assert kube.core.read_namespaced_secret("s", "team-a").data == {"k": "dzI="}


def test_list_filters_by_label_and_field_selectors(kube):
    kube.namespace("team-a")
    for name, labels in (("a", {"app": "x", "tier": "1"}), ("b", {"app": "y"}), ("c", {})):
        body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels=labels))
        kube.core.create_namespaced_config_map("team-a", body)

    def names(**selectors):
        found = kube.core.list_namespaced_config_map("team-a", **selectors).items
        return sorted(item.metadata.name for item in found)

    assert names(label_selector="app=x") == ["a"]
    assert names(label_selector="app!=x") == ["b", "c"]
    assert names(label_selector="app in (x,y),!tier") == ["b"]
    assert names(label_selector="app") == ["a", "b"]
    assert names(field_selector="metadata.name=c") == ["c"]
    with pytest.raises(ApiException) as caught:
        names(field_selector="data.k=v")
    assert kube_error(caught.value)[1]["message"] == "field label not supported: data.k"


def test_patch_as_the_client_sends_it_merges_and_removes(kube):
    kube.namespace("team-a")
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="m", annotations={"keep": "1", "drop": "2"}),
        data={"a": "1"},
    )
    kube.core.create_namespaced_config_map("team-a", body)
    patch = {"metadata": {"annotations": {"drop": None, "new": "3"}}, "data": {"b": "2"}}
    patched = kube.core.patch_namespaced_config_map("m", "team-a", patch)
    assert patched.metadata.annotations == {"keep": "1", "new": "3"}
    assert patched.data == {"a": "1", "b": "2"}
    ops = [{"op": "replace", "path": "/data/a", "value": "9"}]
    assert kube.core.patch_namespaced_config_map("m", "team-a", ops).data["a"] == "9"


def test_delete_answers_status_or_the_object(kube):
    kube.namespace("team-a")
    kube.core.create_namespaced_config_map(
        "team-a", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="m"))
    )
    status = kube.core.delete_namespaced_config_map("m", "team-a")
    assert (status.status, status.details.name, status.details.kind) == (
        "Success",
        "m",
        "configmaps",
    )
    kube.core.create_namespaced_pod("team-a", kube.pod("p"))
    assert kube.core.delete_namespaced_pod("p", "team-a").metadata.name == "p"
    with pytest.raises(ApiException) as caught:
        kube.core.delete_namespaced_pod("p", "team-a")
    assert caught.value.status == 404


def test_nodes_come_from_the_pools(kube):
    nodes = {n.metadata.name: n for n in kube.core.list_node().items}
    mig = [n for n in nodes.values() if n.metadata.labels["agentpool"] == "mig1g"]
    assert len(nodes) == 3 and len(mig) == 1
    node = mig[0]
    assert node.metadata.name.startswith("aks-mig1g-") and node.metadata.name.endswith(
        "-vmss000000"
    )
    assert node.metadata.labels["kubernetes.azure.com/agentpool"] == "mig1g"
    assert node.metadata.labels["node.kubernetes.io/instance-type"] == "Standard_NC24ads_A100_v4"
    assert node.status.allocatable["nvidia.com/mig-1g.10gb"] == "7"
    assert "nvidia.com/gpu" not in node.status.allocatable
    assert [(t.key, t.value, t.effect) for t in node.spec.taints] == [("sku", "gpu", "NoSchedule")]
    with pytest.raises(ApiException) as caught:
        kube.core.delete_node(node.metadata.name)
    assert caught.value.status == 405


@pytest.mark.parametrize(
    ("model", "profile", "gpus", "expected"),
    [
        ("A100-80GB", "MIG3g", 2, {"nvidia.com/mig-3g.40gb": "4"}),
        ("A100", "MIG1g", 1, {"nvidia.com/mig-1g.5gb": "7"}),
        ("H100", "MIG7g", 8, {"nvidia.com/mig-7g.80gb": "8"}),
        ("A100", "MIG2g", 4, {"nvidia.com/mig-2g.10gb": "12"}),
        ("T4", "", 1, {"nvidia.com/gpu": "1"}),
    ],
)
def test_gpu_resources_follow_the_mig_table(kube, model, profile, gpus, expected):
    pool = {
        "name": "extra",
        "vm_size": "Standard_X",
        "count": 1,
        "vcpus": 8,
        "memory_gb": 64,
        "gpus": gpus,
        "gpu_model": model,
        "gpu_instance_profile": profile,
    }
    kube.control.k8s_cluster("00000000-0000-0000-0000-0000000000aa", "rg-aks", "aks-gpu", [pool])
    node = kube.core.list_node(label_selector="agentpool=extra").items[0]
    gpu = {k: v for k, v in node.status.allocatable.items() if k.startswith("nvidia.com/")}
    assert gpu == expected


def test_namespace_delete_is_terminating_then_gone_with_its_objects(kube, sim):
    sim.state.latency = 0.3
    kube.namespace("team-a")
    kube.core.create_namespaced_pod("team-a", kube.pod("p"))
    kube.core.delete_namespace("team-a")
    assert kube.core.read_namespace("team-a").status.phase == "Terminating"
    with pytest.raises(ApiException) as caught:
        kube.core.create_namespaced_pod("team-a", kube.pod("q"))
    status, body = kube_error(caught.value)
    assert (status, body["reason"]) == (403, "Forbidden")
    assert "because it is being terminated" in body["message"]
    with sim.state.lock:
        sim.state.kube.clusters[next(iter(sim.state.kube.clusters))].finalize_at["team-a"] = 0
    with pytest.raises(ApiException) as caught:
        kube.core.read_namespace("team-a")
    assert caught.value.status == 404
    assert kube.core.list_pod_for_all_namespaces().items == []


def test_sim_state_shows_the_clusters_objects_and_namespaces_can_be_made_outside(kube, sim):
    made = kube.control.kube_create_namespace("aks-gpu", "ops-tools", labels={"owner": "ops"})
    assert made == {"cluster": "aks-gpu", "name": "ops-tools"}
    kube.core.create_namespaced_pod("ops-tools", kube.pod("p"))
    state = kube.control.state()["kubernetes"]
    namespace = next(n for n in state["namespaces"] if n["name"] == "ops-tools")
    assert namespace["labels"]["owner"] == "ops" and namespace["phase"] == "Active"
    (pod,) = state["pods"]
    assert (pod["cluster"], pod["namespace"], pod["name"], pod["phase"]) == (
        "aks-gpu",
        "ops-tools",
        "p",
        "Running",
    )
    with pytest.raises(Exception, match="already exists"):
        kube.control.kube_create_namespace("aks-gpu", "ops-tools")
