"""AKS managed clusters and agent pools on the emulator's ARM side: wire shapes, LROs,
validation, quota, capacity, conflicts and what the Kubernetes side is told."""

import base64

import pytest
import yaml

from cloudsim.kube import KubeClusters, server_path
from cloudsim.models import key_of

from .conftest import RG, SUB

API = "2026-08-01"  # What azure-mgmt-containerservice 41.8.0 sends.
A100 = "Standard_NC24ads_A100_v4"  # 24 vCPUs, standardNCADSA100v4Family, 1 x A100-80GB.
T4 = "Standard_NC4as_T4_v3"
CLUSTER = "aks1"
CLUSTER_PATH = (
    f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.ContainerService/"
    f"managedClusters/{CLUSTER}"
)


def pool_path(name: str) -> str:
    return f"{CLUSTER_PATH}/agentPools/{name}"


def pool_props(size: str = A100, count: int = 1, **extra) -> dict:
    return {"properties": {"vmSize": size, "count": count, "osType": "Linux", **extra}}


class SpyKube(KubeClusters):
    """The real seam, recording every call the ARM side makes."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def ensure_cluster(self, key, *, name):
        self.calls.append(("ensure_cluster", key, name))
        super().ensure_cluster(key, name=name)

    def sync_pool(self, key, shape):
        self.calls.append(("sync_pool", key, shape))
        super().sync_pool(key, shape)

    def drop_pool(self, key, pool_name):
        self.calls.append(("drop_pool", key, pool_name))
        super().drop_pool(key, pool_name)

    def drop_cluster(self, key):
        self.calls.append(("drop_cluster", key))
        super().drop_cluster(key)


@pytest.fixture
def kube(sim):
    spy = SpyKube()
    sim.state.kube = spy
    return spy


@pytest.fixture
def cluster(ctl, kube):
    body = ctl.create_aks_cluster(SUB, RG, CLUSTER)
    kube.calls.clear()
    return body


def aks(arm, method, path, body=None, api=API):
    return arm.call(method, path, body, api=api)


def create_pool(arm, name="gpu1", **kwargs):
    reply = aks(arm, "PUT", pool_path(name), pool_props(**kwargs))
    assert reply.status == 201, reply
    return reply


def test_control_cluster_has_a_running_system_pool(arm, cluster, ctl):
    reply = aks(arm, "GET", CLUSTER_PATH)

    assert reply.status == 200
    props = reply.body["properties"]
    assert (reply.body["name"], reply.body["location"]) == (CLUSTER, "eastus")
    assert reply.body["type"] == "Microsoft.ContainerService/managedClusters"
    assert props["provisioningState"] == "Succeeded"
    assert props["powerState"] == {"code": "Running"}
    assert props["fqdn"].endswith(".hcp.eastus.azmk8s.io")
    assert [(p["name"], p["mode"]) for p in props["agentPoolProfiles"]] == [("nodepool1", "System")]
    [state] = ctl.state()["managedClusters"]
    assert [p["name"] for p in state["agentPools"]] == ["nodepool1"]


def test_pool_create_is_an_lro_then_get_echoes_the_spec(arm, cluster, kube):
    props = {
        "gpuInstanceProfile": "MIG2g",
        "nodeTaints": ["nvidia.com/gpu=present:NoSchedule"],
        "nodeLabels": {"portal": "mig"},
        "mode": "User",
    }
    reply = create_pool(arm, count=2, **props)

    assert reply.body["properties"]["provisioningState"] == "Creating"
    operation = reply.headers["azure-asyncoperation"]
    assert "/providers/Microsoft.ContainerService/locations/eastus/operations/" in operation
    assert arm.wait(reply)["status"] == "Succeeded"
    got = aks(arm, "GET", pool_path("gpu1")).body
    assert got["type"] == "Microsoft.ContainerService/managedClusters/agentPools"
    assert {k: got["properties"][k] for k in ("count", "vmSize", *props)} == {
        "count": 2,
        "vmSize": A100,
        **props,
    }
    assert got["properties"]["provisioningState"] == "Succeeded"
    assert got["properties"]["powerState"] == {"code": "Running"}
    [(verb, key, shape)] = [c for c in kube.calls if c[0] == "sync_pool"]
    assert key == key_of(CLUSTER_PATH)
    assert (shape.count, shape.gpus, shape.gpu_model, shape.gpu_instance_profile) == (
        2,
        1,
        "A100-80GB",
        "MIG2g",
    )
    assert shape.taints == ("nvidia.com/gpu=present:NoSchedule",)


def test_same_put_again_is_an_update_that_succeeds(arm, cluster):
    arm.wait(create_pool(arm))

    again = aks(arm, "PUT", pool_path("gpu1"), pool_props())

    assert again.status == 200
    assert again.body["properties"]["provisioningState"] == "Updating"
    assert arm.wait(again)["status"] == "Succeeded"


def test_autoscaling_pool_starts_at_min_count(arm, cluster):
    reply = create_pool(arm, count=None, enableAutoScaling=True, minCount=1, maxCount=3)
    arm.wait(reply)

    props = aks(arm, "GET", pool_path("gpu1")).body["properties"]
    assert (props["enableAutoScaling"], props["minCount"], props["maxCount"], props["count"]) == (
        True,
        1,
        3,
        1,
    )


def test_missing_pool_and_cluster_are_404_with_arm_error_bodies(arm, cluster):
    for path in (pool_path("nope"), CLUSTER_PATH.replace(CLUSTER, "other")):
        reply = aks(arm, "GET", path)
        assert reply.status == 404
        assert reply.code == "ResourceNotFound"
        assert reply.body["error"]["message"]


@pytest.mark.parametrize(
    "name, props, code, target",
    [
        ("GPU1", pool_props(), "InvalidParameter", "agentPoolProfile.name"),
        ("gpupoolnumber1", pool_props(), "InvalidParameter", "agentPoolProfile.name"),
        ("1gpu", pool_props(), "InvalidParameter", "agentPoolProfile.name"),
        ("gpu1", pool_props(T4, gpuInstanceProfile="MIG1g"), "InvalidParameter", None),
        ("gpu1", pool_props(gpuInstanceProfile="MIG5g"), "InvalidParameter", None),
        ("gpu1", pool_props(enableAutoScaling=True, minCount=3, maxCount=2), None, None),
        ("gpu1", pool_props(count=5, enableAutoScaling=True, minCount=1, maxCount=2), None, None),
        ("gpu1", pool_props(minCount=1, maxCount=2), "InvalidParameter", None),
        ("gpu1", pool_props(nodeTaints=["no-effect"]), "InvalidParameter", None),
        ("gpu1", pool_props("Standard_Bogus_v9"), "BadRequest", None),
    ],
)
def test_invalid_pools_are_refused_with_400(arm, cluster, ctl, name, props, code, target):
    reply = aks(arm, "PUT", pool_path(name), props)

    assert reply.status == 400, reply
    assert reply.code == (code or "InvalidParameter")
    if target:
        assert reply.body["error"]["target"] == target
    assert [p["name"] for p in ctl.state()["managedClusters"][0]["agentPools"]] == ["nodepool1"]


def test_mig_message_names_the_size(arm, cluster):
    reply = aks(arm, "PUT", pool_path("gpu1"), pool_props(T4, gpuInstanceProfile="MIG1g"))

    assert T4 in reply.body["error"]["message"]
    assert "A100 or H100" in reply.body["error"]["message"]


def test_restricted_size_is_not_allowed_in_the_subscription(arm, cluster, ctl):
    ctl.restrict_sku("eastus", A100)

    reply = aks(arm, "PUT", pool_path("gpu1"), pool_props())

    assert (reply.status, reply.code) == (400, "BadRequest")
    assert "AgentPoolProfile:gpu1 is not allowed" in reply.body["error"]["message"]


def test_pool_nodes_count_against_the_vcpu_family_quota(arm, cluster, ctl):
    ctl.set_quota("eastus", "standardNCADSA100v4Family", 48)
    arm.wait(create_pool(arm, "gpu1", count=1))

    reply = aks(arm, "PUT", pool_path("gpu2"), pool_props(count=2))

    assert (reply.status, reply.code) == (400, "ErrCode_InsufficientVCPUQuota")
    assert reply.body["error"]["message"] == (
        "Insufficient vcpu quota requested 48, remaining 24 for family "
        "standardNCADSA100v4Family for region eastus."
    )
    # The compute usages API counts the pool's node too, as Azure's does.
    usages = arm.call(
        "GET", f"/subscriptions/{SUB}/providers/Microsoft.Compute/locations/eastus/usages"
    ).body["value"]
    family = next(u for u in usages if u["name"]["value"] == "standardNCADSA100v4Family")
    assert family["currentValue"] == 24


def test_too_few_free_slots_end_the_create_failed(arm, cluster, ctl):
    ctl.set_capacity("eastus", A100, 1)

    reply = create_pool(arm, count=2)

    final = arm.wait(reply)
    assert (final["status"], final["error"]["code"]) == ("Failed", "AllocationFailed")
    props = aks(arm, "GET", pool_path("gpu1")).body["properties"]
    assert props["provisioningState"] == "Failed"


def test_put_while_an_operation_runs_is_409_operation_not_allowed(arm, cluster, ctl):
    ctl.set_latency(5)
    create_pool(arm)

    reply = aks(arm, "PUT", pool_path("gpu1"), pool_props(count=2))
    deleting = aks(arm, "DELETE", pool_path("gpu1"))

    assert (reply.status, reply.code) == (409, "OperationNotAllowed")
    assert (
        "Another agentpool operation (gpu1 - Creating) is in progress"
        in (reply.body["error"]["message"])
    )
    assert deleting.status == 409


def test_vm_size_of_a_pool_cannot_change(arm, cluster):
    arm.wait(create_pool(arm))

    reply = aks(arm, "PUT", pool_path("gpu1"), pool_props("Standard_NC48ads_A100_v4"))

    assert (reply.status, reply.code) == (400, "PropertyChangeNotAllowed")


def test_list_then_delete_a_pool(arm, cluster, kube):
    arm.wait(create_pool(arm))
    listed = aks(arm, "GET", f"{CLUSTER_PATH}/agentPools").body["value"]

    deleting = aks(arm, "DELETE", pool_path("gpu1"))

    assert [p["name"] for p in listed] == ["nodepool1", "gpu1"]
    assert deleting.status == 202
    assert "/operationresults/" in deleting.headers["location"].lower()
    assert arm.wait(deleting)["status"] == "Succeeded"
    assert aks(arm, "GET", pool_path("gpu1")).status == 404
    assert ("drop_pool", key_of(CLUSTER_PATH), "gpu1") in kube.calls
    assert aks(arm, "DELETE", pool_path("gpu1")).status == 204


def test_cluster_put_creates_its_pools_and_delete_removes_everything(arm, sim, kube):
    body = {
        "location": "eastus",
        "properties": {
            "dnsPrefix": "demo",
            "agentPoolProfiles": [
                {"name": "system", "mode": "System", "vmSize": "Standard_D4ds_v5", "count": 1}
            ],
        },
    }
    created = aks(arm, "PUT", CLUSTER_PATH, body)

    assert created.status == 201
    assert created.body["properties"]["provisioningState"] == "Creating"
    assert arm.wait(created)["status"] == "Succeeded"
    group = f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.ContainerService/"
    listed = aks(arm, "GET", group + "managedClusters").body["value"]
    assert [c["name"] for c in listed] == [CLUSTER]
    assert ("ensure_cluster", key_of(CLUSTER_PATH), CLUSTER) in kube.calls

    deleting = aks(arm, "DELETE", CLUSTER_PATH)
    assert deleting.status == 202
    arm.wait(deleting)
    assert aks(arm, "GET", CLUSTER_PATH).status == 404
    assert ("drop_cluster", key_of(CLUSTER_PATH)) in kube.calls


def test_cluster_needs_a_system_pool(arm, sim):
    profiles = [{"name": "gpu", "mode": "User", "vmSize": A100, "count": 1}]
    body = {"location": "eastus", "properties": {"agentPoolProfiles": profiles}}

    reply = aks(arm, "PUT", CLUSTER_PATH, body)

    assert (reply.status, reply.code) == (400, "InvalidParameter")


def credentials(arm, query=""):
    return aks(arm, "POST", f"{CLUSTER_PATH}/listClusterUserCredential{query}")


def test_user_credentials_are_an_exec_kubeconfig_naming_the_server_path(arm, cluster):
    reply = credentials(arm)

    assert reply.status == 200
    [entry] = reply.body["kubeconfigs"]
    assert entry["name"] == "clusterUser"
    config = yaml.safe_load(base64.b64decode(entry["value"]))
    assert config["clusters"][0]["cluster"]["server"] == arm.url + server_path(SUB, RG, CLUSTER)
    assert "certificate-authority-data" not in config["clusters"][0]["cluster"]
    exec_ = config["users"][0]["user"]["exec"]
    assert exec_["command"] == "kubelogin"
    server_id = exec_["args"][exec_["args"].index("--server-id") + 1]
    assert server_id == "6dae42f8-4368-4678-94ff-3960e28e3630"
    assert config["current-context"] == CLUSTER


def test_user_credentials_in_azure_format_and_bad_format(arm, cluster):
    azure = credentials(arm, "?format=azure").body["kubeconfigs"][0]["value"]
    user = yaml.safe_load(base64.b64decode(azure))["users"][0]["user"]

    assert user["auth-provider"]["name"] == "azure"
    assert credentials(arm, "?format=yaml").status == 400
    assert credentials(arm).status == 200


def test_user_credentials_of_a_missing_cluster_are_404(arm, sim):
    assert credentials(arm).status == 404


@pytest.mark.parametrize(
    "op, method, path_of, status",
    [
        ("aks.cluster.get", "GET", lambda: CLUSTER_PATH, 429),
        ("aks.pool.get", "GET", lambda: pool_path("nodepool1"), 429),
        ("aks.pool.list", "GET", lambda: f"{CLUSTER_PATH}/agentPools", 429),
        ("aks.pool.delete", "DELETE", lambda: pool_path("nodepool1"), 429),
        ("aks.credentials", "POST", lambda: f"{CLUSTER_PATH}/listClusterUserCredential", 429),
    ],
)
def test_throttle_faults_hit_each_op_once(arm, cluster, ctl, op, method, path_of, status):
    ctl.inject(op, "throttle", retry_after=3)

    first = aks(arm, method, path_of())
    second = aks(arm, method, path_of())

    assert (first.status, first.code, first.headers["retry-after"]) == (
        status,
        "TooManyRequests",
        "3",
    )
    assert second.status < 300


def test_pool_create_faults(arm, cluster, ctl):
    ctl.inject("aks.pool.create", "quota")
    ctl.inject("aks.pool.create", "server_error")
    ctl.inject("aks.pool.create", "allocation_failed")

    quota = aks(arm, "PUT", pool_path("gpu1"), pool_props())
    server = aks(arm, "PUT", pool_path("gpu1"), pool_props())
    failed = create_pool(arm)

    assert (quota.status, quota.code) == (400, "ErrCode_InsufficientVCPUQuota")
    assert (server.status, server.code) == (500, "InternalExecutionError")
    assert arm.wait(failed)["error"]["code"] == "AllocationFailed"
    # A retried PUT allocates again and succeeds.
    again = aks(arm, "PUT", pool_path("gpu1"), pool_props())
    assert again.status == 200 and arm.wait(again)["status"] == "Succeeded"


def test_unsized_ops_refuse_allocation_faults(ctl, sim):
    from cloudsim import SimControlError

    with pytest.raises(SimControlError):
        ctl.inject("aks.pool.get", "allocation_failed")
