"""cloud.aks end to end: the real ContainerServiceClient against the emulator."""

import base64
import time

import pytest
import yaml

from cloud import aks
from cloud.aks import ClusterRef, PoolSpec, PoolState
from cloud.clients import container_client
from cloud.errors import CloudError
from cloudsim.kube import server_path

from .support import arm_requests

OTHER_SUB = "11111111-1111-1111-1111-111111111111"  # The cluster's, not the portal's.
CLUSTER = ClusterRef(OTHER_SUB, "rg-aks", "gpu-cluster")
A100 = "Standard_NC24ads_A100_v4"
MIG = PoolSpec(
    name="mig1g",
    vm_size=A100,
    gpu_instance_profile="MIG1g",
    count=2,
    taints=("nvidia.com/gpu=present:NoSchedule",),
    labels=(("portal", "mig"), ("gpu", "a100")),
)


@pytest.fixture
def cluster(control) -> ClusterRef:
    control.create_aks_cluster(CLUSTER.subscription_id, CLUSTER.resource_group, CLUSTER.name)
    return CLUSTER


def finish(azure, operation, name, token) -> PoolState | None:
    """Poll until done, as the portal's task does across re-queued runs."""
    while not (progress := aks.pool_poll(azure, CLUSTER, operation, name=name, token=token)).done:
        time.sleep(azure.polling_interval)
    return progress.pool


def create(azure, spec: PoolSpec) -> PoolState:
    token = aks.pool_begin(azure, CLUSTER, "create", name=spec.name, spec=spec)
    return finish(azure, "create", spec.name, token)


def test_cluster_get_reads_a_cluster_in_another_subscription(azure, cluster):
    state = aks.cluster_get(azure, cluster)

    assert (state.name, state.location, state.provisioning_state, state.power_state) == (
        "gpu-cluster",
        "eastus",
        "Succeeded",
        "Running",
    )
    assert state.fqdn.endswith(".azmk8s.io") and state.kubernetes_version
    assert aks.cluster_get(azure, ClusterRef(OTHER_SUB, "rg-aks", "missing")) is None


def test_create_a_mig_pool_then_read_it_back(azure, cluster):
    pool = create(azure, MIG)

    assert pool == PoolState(
        name="mig1g",
        vm_size=A100,
        gpu_instance_profile="MIG1g",
        count=2,
        min_count=None,
        max_count=None,
        taints=("nvidia.com/gpu=present:NoSchedule",),
        labels=(("gpu", "a100"), ("portal", "mig")),
        mode="User",
        provisioning_state="Succeeded",
        power_state="Running",
    )
    assert aks.pool_get(azure, cluster, "mig1g") == pool
    assert [p.name for p in aks.pools_list(azure, cluster)] == ["nodepool1", "mig1g"]
    assert {type(v) for v in (pool.vm_size, pool.gpu_instance_profile, pool.mode)} == {str}


def test_autoscaling_pool(azure, cluster):
    spec = PoolSpec(name="auto", vm_size=A100, count=0, min_count=1, max_count=3)

    pool = create(azure, spec)

    assert (pool.count, pool.min_count, pool.max_count, pool.gpu_instance_profile) == (1, 1, 3, "")


def test_a_pool_in_a_capacity_reservation_group_says_so_and_keeps_it(azure, cluster):
    group = (
        f"/subscriptions/{azure.subscription_id}/resourceGroups/{azure.resource_group}"
        "/providers/Microsoft.Compute/capacityReservationGroups/booking-0123456789ab"
    )
    spec = PoolSpec(name="booked", vm_size=A100, count=2, capacity_reservation_group_id=group)

    pool = create(azure, spec)

    assert pool.capacity_reservation_group_id == group
    assert aks.pool_get(azure, cluster, "booked").capacity_reservation_group_id == group
    assert create(azure, MIG).capacity_reservation_group_id == ""  # none asked: none
    other = PoolSpec(name="booked", vm_size=A100, count=2, capacity_reservation_group_id="x/y")
    with pytest.raises(CloudError) as refused:  # AKS fixes the group at creation
        aks.pool_begin(azure, cluster, "create", name="booked", spec=other)
    assert refused.value.code == "InvalidParameter"
    moved = PoolSpec(name="booked", vm_size=A100, count=2, capacity_reservation_group_id="")
    with pytest.raises(CloudError) as refused:
        aks.pool_begin(azure, cluster, "create", name="booked", spec=moved)
    assert refused.value.code == "PropertyChangeNotAllowed"


def test_creating_the_same_pool_again_is_an_idempotent_update(azure, control, cluster):
    first = create(azure, MIG)

    again = create(azure, MIG)

    assert again == first
    assert len(arm_requests(control, "PUT", "/agentPools/mig1g")) == 2
    assert len(aks.pools_list(azure, cluster)) == 2


def test_begin_returns_a_token_without_polling(azure, control, cluster):
    control.set_latency(0.5)

    token = aks.pool_begin(azure, cluster, "create", name=MIG.name, spec=MIG)
    time.sleep(0.2)

    assert isinstance(token, str) and token
    assert arm_requests(control, contains="/operations/") == []
    assert aks.pool_get(azure, cluster, MIG.name).provisioning_state == "Creating"


def test_crash_during_pool_creation_is_resumed_from_the_token(azure, control, cluster):
    control.set_latency(0.3)
    token = aks.pool_begin(azure, cluster, "create", name=MIG.name, spec=MIG)
    sent_by_begin = len(control.requests())
    # The worker dies: a fresh process has no poller and no cached client.
    container_client.cache_clear()

    early = aks.pool_poll(azure, cluster, "create", name=MIG.name, token=token)
    pool = finish(azure, "create", MIG.name, token)

    later = control.requests()[sent_by_begin:]
    assert early.done is False
    assert later and {r["method"] for r in later} == {"GET"}
    assert len(arm_requests(control, "PUT", "/agentPools/")) == 1
    assert (pool.name, pool.provisioning_state, pool.count) == ("mig1g", "Succeeded", 2)


def test_delete_a_pool(azure, control, cluster):
    create(azure, MIG)

    token = aks.pool_begin(azure, cluster, "delete", name=MIG.name)

    assert finish(azure, "delete", MIG.name, token) is None
    assert aks.pool_get(azure, cluster, MIG.name) is None
    # Deleting what is gone succeeds too (a retried task).
    assert (
        finish(azure, "delete", MIG.name, aks.pool_begin(azure, cluster, "delete", name="mig1g"))
        is None
    )


def test_a_failed_create_reports_azures_code(azure, control, cluster):
    control.inject("aks.pool.create", "allocation_failed")
    token = aks.pool_begin(azure, cluster, "create", name=MIG.name, spec=MIG)

    with pytest.raises(CloudError) as caught:
        finish(azure, "create", MIG.name, token)

    assert (caught.value.code, caught.value.status, caught.value.transient) == (
        "AllocationFailed",
        None,
        False,
    )
    assert aks.pool_get(azure, cluster, MIG.name).provisioning_state == "Failed"


def test_refusals_are_cloud_errors(azure, control, cluster):
    control.set_quota("eastus", "standardNCADSA100v4Family", 24)
    with pytest.raises(CloudError) as quota:
        aks.pool_begin(azure, cluster, "create", name=MIG.name, spec=MIG)
    t4_mig = PoolSpec(name="t4", vm_size="Standard_NC4as_T4_v3", gpu_instance_profile="MIG1g")
    with pytest.raises(CloudError) as mig:
        aks.pool_begin(azure, cluster, "create", name="t4", spec=t4_mig)

    assert (quota.value.code, quota.value.status, quota.value.transient) == (
        "ErrCode_InsufficientVCPUQuota",
        400,
        False,
    )
    assert (mig.value.code, mig.value.status) == ("InvalidParameter", 400)


def test_a_pool_busy_with_another_operation_is_a_transient_refusal(azure, control, cluster):
    control.set_latency(0.5)
    aks.pool_begin(azure, cluster, "create", name=MIG.name, spec=MIG)

    with pytest.raises(CloudError) as caught:
        aks.pool_begin(azure, cluster, "create", name=MIG.name, spec=MIG)

    assert (caught.value.code, caught.value.status, caught.value.transient) == (
        "OperationNotAllowed",
        409,
        True,
    )


def test_user_kubeconfig_runs_kubelogin_and_names_the_api_server(azure, emulator, cluster):
    config = yaml.safe_load(aks.user_kubeconfig(azure, cluster))
    endpoint = aks.kube_endpoint(azure, cluster)

    exec_ = config["users"][0]["user"]["exec"]
    assert exec_["command"] == "kubelogin"
    assert "6dae42f8-4368-4678-94ff-3960e28e3630" in exec_["args"]
    path = server_path(OTHER_SUB, "rg-aks", "gpu-cluster")
    assert endpoint == aks.KubeEndpoint(server=emulator.url + path, ca_data=None)


def test_parse_endpoint_reads_the_current_contexts_cluster_and_ca():
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n...").decode()
    config = {
        "apiVersion": "v1",
        "clusters": [
            {"name": "old", "cluster": {"server": "https://old:443"}},
            {
                "name": "prod",
                "cluster": {"server": "https://prod.hcp.eastus.azmk8s.io:443",
                            "certificate-authority-data": ca},
            },
        ],
        "contexts": [{"name": "prod", "context": {"cluster": "prod", "user": "u"}}],
        "current-context": "prod",
    }  # fmt: skip

    endpoint = aks.parse_endpoint(yaml.safe_dump(config).encode())

    assert endpoint == aks.KubeEndpoint("https://prod.hcp.eastus.azmk8s.io:443", ca)


@pytest.mark.parametrize("text", [b"not: [valid", b"kind: Config\n", b"clusters: []\n"])
def test_parse_endpoint_refuses_unreadable_kubeconfigs(text):
    with pytest.raises(CloudError) as caught:
        aks.parse_endpoint(text)

    assert caught.value.code == "InvalidKubeconfig"


@pytest.mark.parametrize("name", ["GPU1", "1gpu", "gpu-1", "abcdefghijklm", ""])
def test_invalid_pool_names_are_value_errors(azure, name):
    with pytest.raises(ValueError, match="lowercase"):
        PoolSpec(name=name, vm_size=A100)
    with pytest.raises(ValueError):
        aks.pool_get(azure, CLUSTER, name)
    with pytest.raises(ValueError):
        aks.pool_begin(azure, CLUSTER, "delete", name=name)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"gpu_instance_profile": "MIG5g"},
        {"count": -1},
        {"min_count": 1},
        {"min_count": 3, "max_count": 2},
        {"taints": ("gpu=true",)},
        {"labels": (("", "x"),)},
        {"vm_size": " "},
    ],
)
def test_malformed_specs_are_value_errors(kwargs):
    with pytest.raises(ValueError):
        PoolSpec(**{"name": "gpu", "vm_size": A100, **kwargs})


def test_begin_checks_its_arguments(azure, control):
    with pytest.raises(ValueError):
        aks.pool_begin(azure, CLUSTER, "scale", name="gpu")
    with pytest.raises(ValueError):
        aks.pool_begin(azure, CLUSTER, "create", name="other", spec=MIG)
    with pytest.raises(ValueError):
        aks.pool_begin(azure, CLUSTER, "delete", name="mig1g", spec=MIG)
    with pytest.raises(ValueError):
        aks.pool_poll(azure, CLUSTER, "create", name="mig1g", token="")
    assert control.requests() == []
