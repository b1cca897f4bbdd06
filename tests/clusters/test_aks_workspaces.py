"""MIG slice and AKS namespace workspaces through services and tasks, with the real
azure-mgmt-containerservice and kubernetes clients talking to the emulator. Celery runs
eagerly; Azure and Kubernetes are the only things faked."""

import json
import time
import uuid
from datetime import timedelta
from decimal import Decimal
from fractions import Fraction

import pytest
from django.conf import settings
from django.utils import timezone
from kubernetes import client
from kubernetes.client import ApiException

from billing.models import UsageInterval
from cloud import kube as cloud_kube
from clusters import aks_services
from clusters import services as cluster_services
from clusters.models import NodePool, PoolStatus
from teams.models import GpuQuota, Team
from tests.factories import OfferingFactory
from workspaces.actions import workspace_delete, workspace_start, workspace_stop
from workspaces.models import Workspace, WorkspaceAgent
from workspaces.operations import workspace_advance
from workspaces.requests import JustificationNeeded, WorkspaceActionError
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)

GROUP = uuid.UUID("6f1c2a7e-1111-4222-8333-944455556666")


@pytest.fixture
def cluster(cast, sim):
    sim.create_aks_cluster(
        settings.AZURE_SUBSCRIPTION_ID, settings.AZURE_RESOURCE_GROUP, "research-aks"
    )
    # Room for a few A100 pools (Azure's default family quota here is 96 vCPUs).
    sim.set_quota("eastus", "standardNCADSA100v4Family", 1000)
    cluster = cluster_services.cluster_register(
        actor=cast.platform_admin,
        subscription_id=settings.AZURE_SUBSCRIPTION_ID,
        resource_group=settings.AZURE_RESOURCE_GROUP,
        name="research-aks",
        now=timezone.now(),
    )
    cast.team.entra_group_id = GROUP
    cast.team.save(update_fields=["entra_group_id"])
    cluster_services.cluster_team_set(
        actor=cast.platform_admin, cluster=cluster, team=cast.team, now=timezone.now()
    )
    return cluster


def make_pool(cast, cluster, name="mig1g", profile="MIG1g", nodes=1, **offering):
    offering = OfferingFactory(**offering)
    ask = cluster_services.PoolRequest(
        name=name,
        vm_size=offering.vm_size,
        gpu_instance_profile=profile,
        node_count=nodes,
        taints=("sku=gpu:NoSchedule",),
    )
    pool = cluster_services.pool_create(
        actor=cast.platform_admin, cluster=cluster, ask=ask, now=timezone.now()
    )
    pool.refresh_from_db()
    return pool


def four_gpu_offering() -> dict:
    return {
        "vm_size": "Standard_NC96ads_A100_v4",
        "gpu_count": 4,
        "vcpus": 96,
        "memory_gib": Decimal("880"),
        "price_per_hour": Decimal("14.6920"),
    }


def request_mig(cast, user=None, profile="1g.10gb", **kwargs):
    """The workspace as the request left it, reloaded (eager tasks moved it on)."""
    ws = aks_services.workspace_request_mig(
        user=user or cast.researcher,
        team=cast.team,
        name=kwargs.pop("name", "notebook"),
        profile=profile,
        gpu_model="A100",
        request_key=uuid.uuid4(),
        now=timezone.now(),
        **kwargs,
    )
    return Workspace.objects.get(pk=ws.pk)


def request_namespace(cast, pool, gpus=2, **kwargs):
    ws = aks_services.workspace_request_namespace(
        user=kwargs.pop("user", cast.researcher),
        team=cast.team,
        name=kwargs.pop("name", "training"),
        pool=pool,
        gpus=gpus,
        request_key=uuid.uuid4(),
        now=timezone.now(),
        **kwargs,
    )
    return Workspace.objects.get(pk=ws.pk)


def statuses(ws):
    return [e.to_status for e in ws.events.order_by("at", "id")]


def kube(sim):
    return sim.state()["kubernetes"]


def test_node_pool_is_created_in_azure_with_mig_profile_taints_and_price(cast, cluster, sim):
    pool = make_pool(cast, cluster)
    assert pool.status == PoolStatus.READY and not pool.operation_token
    assert pool.price_per_hour == Decimal("3.6730") and pool.gpus_per_node == 1
    assert pool.mig.name == "1g.10gb" and pool.capacity.total == 7
    (azure_cluster,) = sim.state()["managedClusters"]
    azure = {p["name"]: p for p in azure_cluster["agentPools"]}["mig1g"]
    assert azure["gpuInstanceProfile"] == "MIG1g" and azure["vmSize"] == pool.vm_size
    assert azure["nodeTaints"] == ["sku=gpu:NoSchedule"]


def test_pool_with_a_profile_on_a_gpu_without_mig_is_refused_with_the_reason(cast, cluster):
    OfferingFactory(vm_size="Standard_NC4as_T4_v3", gpu_model="T4", gpu_memory_gib=16)
    ask = cluster_services.PoolRequest(
        name="t4mig", vm_size="Standard_NC4as_T4_v3", gpu_instance_profile="MIG1g"
    )
    with pytest.raises(cluster_services.ClusterError, match="has no MIG mode"):
        cluster_services.pool_create(
            actor=cast.platform_admin, cluster=cluster, ask=ask, now=timezone.now()
        )
    assert not NodePool.objects.exists()


def test_registering_a_cluster_azure_does_not_have_says_so(cast, sim):
    with pytest.raises(cluster_services.ClusterError, match="Azure has no AKS cluster nope"):
        cluster_services.cluster_register(
            actor=cast.platform_admin,
            subscription_id=settings.AZURE_SUBSCRIPTION_ID,
            resource_group=settings.AZURE_RESOURCE_GROUP,
            name="nope",
            now=timezone.now(),
        )


def test_mig_slice_runs_as_a_pinned_pod_with_home_and_service(cast, cluster, sim):
    pool = make_pool(cast, cluster)
    ws = Workspace.objects.get(pk=request_mig(cast).pk)
    assert ws.status == Status.RUNNING, ws.waiting_reason or ws.error_message
    assert statuses(ws) == [Status.REQUESTED, Status.PROVISIONING, Status.RUNNING]
    assert ws.kind == "mig" and ws.gpu_slices == 1 and ws.node_pool == pool
    # 1/7 of the node's price.
    assert ws.price_per_hour == (Decimal("3.6730") / 7).quantize(Decimal("0.0001"))
    pods = [p for p in kube(sim)["pods"] if p["namespace"] == "team-vision"]
    assert [(p["name"], p["phase"]) for p in pods] == [(f"ws-{ws.short_id}-0", "Running")]
    assert pods[0]["node"].startswith("aks-mig1g-")
    # Only its owner may port-forward to it (alice gave no Entra ID identity: nobody yet); the
    # team's group has no binding in the namespace that holds every member's tokens.
    (binding,) = [b for b in kube(sim)["rolebindings"] if b["namespace"] == "team-vision"]
    assert binding["name"] == f"ws-{ws.short_id}-owner" and not binding["subjects"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": f"ws-{ws.short_id}-owner",
    }


def test_the_emulator_plays_the_agent_in_a_mig_pod_and_the_portal_stores_its_heartbeats(
    cast, cluster, sim, settings, live_server
):
    settings.PORTAL_URL = live_server.url
    settings.AGENT_INTERVAL_SECONDS = 0.2
    make_pool(cast, cluster)
    ws = request_mig(cast)
    assert ws.status == Status.RUNNING, ws.waiting_reason or ws.error_message
    sim.set_agent_profile(f"ws-{ws.short_id}", "idle")  # Addressed by its StatefulSet's name.
    deadline = time.monotonic() + 15
    # The first sample may predate the profile (busy: a busy kernel); wait for an idle one.
    while (agent := WorkspaceAgent.objects.get(pk=ws.pk)).last_at is None or agent.interactive:
        assert time.monotonic() < deadline, sim.agents()
        time.sleep(0.1)
    assert agent.nvml == "ok"
    assert agent.gpus == [{"name": "1g.10gb", "util": None, "mem_used": agent.gpus[0]["mem_used"],
                           "mem_total": 9728}]  # fmt: skip
    row = next(a for a in sim.agents() if a["workspace"] == str(ws.pk))
    assert (row["vm"], row["profile"], row["last_status"]) == (
        f"ws-{ws.short_id}", "idle", 202)  # fmt: skip
    workspace_stop(user=cast.researcher, workspace=ws, now=timezone.now())
    posts = next(a for a in sim.agents() if a["workspace"] == str(ws.pk))["posts"]
    time.sleep(1)  # 5 intervals: a post under way at the stop may still land, no more.
    row = next(a for a in sim.agents() if a["workspace"] == str(ws.pk))
    assert not row["active"] and row["posts"] <= posts + 1


def test_stop_scales_to_zero_keeping_home_then_start_and_delete(cast, cluster, sim):
    make_pool(cast, cluster)
    ws = request_mig(cast)
    workspace_stop(user=cast.researcher, workspace=ws, now=timezone.now())
    ws.refresh_from_db()
    assert ws.status == Status.STOPPED
    state = kube(sim)
    assert not [p for p in state["pods"] if p["namespace"] == "team-vision"]
    assert f"ws-{ws.short_id}-home" in {c["name"] for c in state["persistentvolumeclaims"]}
    workspace_start(user=cast.researcher, workspace=ws, now=timezone.now())
    ws.refresh_from_db()
    assert ws.status == Status.RUNNING
    workspace_delete(user=cast.researcher, workspace=ws, now=timezone.now())
    ws.refresh_from_db()
    assert ws.status == Status.DELETED
    state = kube(sim)
    names = {
        o["name"] for kind in ("pods", "services", "persistentvolumeclaims") for o in state[kind]
    }
    assert not {n for n in names if n.startswith(f"ws-{ws.short_id}")}


def test_without_a_free_slice_it_waits_and_starts_when_one_frees_up(cast, cluster, sim):
    make_pool(cast, cluster, name="mig7g", profile="MIG7g")  # one instance per node
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=4)
    first = request_mig(cast, profile="7g.80gb", name="first")
    second = Workspace.objects.get(pk=request_mig(cast, profile="7g.80gb", name="second").pk)
    assert second.status == Status.PROVISIONING
    assert second.waiting_reason.startswith(
        "Waiting for a free 7g.80gb slice (0 of 1 free on pool mig7g)"
    )
    workspace_delete(user=cast.researcher, workspace=first, now=timezone.now())
    # What the waiting task does every KUBE_PENDING_RETRY_SECONDS (the pod starts once bound).
    for _ in range(40):
        workspace_advance(workspace_id=second.pk, clock=timezone.now)
        second.refresh_from_db()
        if second.status == Status.RUNNING:
            break
        time.sleep(0.05)
    assert second.status == Status.RUNNING and not second.waiting_reason


def test_a_profile_no_pool_offers_is_refused(cast, cluster):
    make_pool(cast, cluster)
    with pytest.raises(WorkspaceActionError, match="No node pool offers A100 3g.40gb"):
        request_mig(cast, profile="3g.40gb")
    assert not Workspace.objects.exists()


def test_slices_count_as_sevenths_against_the_team_quota(cast, cluster):
    make_pool(cast, cluster, nodes=2)
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=1)
    cast.team.max_workspaces_per_user = 10
    cast.team.save()
    for n in range(7):
        assert request_mig(cast, name=f"s{n}").status == Status.RUNNING
    with pytest.raises(JustificationNeeded):
        request_mig(cast, name="eighth")
    from workspaces.selectors import team_gpu_usage

    assert team_gpu_usage(team_ids=[cast.team.pk])[cast.team.pk]["A100"] == Fraction(1)


def test_namespace_gets_quota_rolebinding_and_network_policy(cast, cluster, sim):
    pool = make_pool(cast, cluster, name="a100", profile="", **four_gpu_offering())
    ws = Workspace.objects.get(pk=request_namespace(cast, pool).pk)
    assert ws.status == Status.RUNNING, ws.error_message
    assert ws.namespace == "vision-training"
    assert ws.price_per_hour == Decimal("7.3460")  # 2 of the node's 4 GPUs
    state = kube(sim)
    quota = next(q for q in state["resourcequotas"] if q["namespace"] == "vision-training")
    assert quota["hard"]["requests.nvidia.com/gpu"] == "2"
    binding = next(b for b in state["rolebindings"] if b["namespace"] == "vision-training")
    assert binding["roleRef"]["name"] == "edit"
    assert binding["subjects"] == [
        {"kind": "Group", "name": str(GROUP), "apiGroup": "rbac.authorization.k8s.io"}
    ]
    assert any(p["namespace"] == "vision-training" for p in state["networkpolicies"])
    # Its owner's JupyterLab: a Deployment behind a Service, its token in a Secret, its pod's
    # CPU and memory counted in the namespace's quota, and no GPU of it taken.
    mine = [o for o in state["deployments"] if o["namespace"] == "vision-training"]
    assert [o["name"] for o in mine] == ["portal-jupyterlab"]
    service = next(o for o in state["services"] if o["namespace"] == "vision-training")
    assert service["name"] == "portal-jupyterlab" and service["ports"][0]["port"] == 8888
    secrets = {o["name"]: o["keys"] for o in state["secrets"] if o["namespace"] == ws.namespace}
    assert secrets["portal-jupyterlab-token"] == ["jupyter-token", "vscode-password-hash"]
    # JupyterLab's 1 CPU / 4 GiB and its VS Code sidecar's 0.5 / 1 GiB (cloud.kube_vscode).
    pods = [p for p in state["pods"] if p["namespace"] == "vision-training"]
    assert [p["requests"] for p in pods] == [{"pods": "1", "cpu": "1500m", "memory": "5Gi"}]
    assert quota["used"]["requests.cpu"] == "1500m" and quota["used"]["requests.memory"] == "5Gi"
    assert quota["used"]["requests.nvidia.com/gpu"] == "0"
    assert ws.image == "quay.io/jupyter/pytorch-notebook:cuda12-2024-09-30"


def test_a_namespace_for_a_team_with_no_linked_group_is_refused_at_request(cast, cluster, sim):
    pool = make_pool(cast, cluster, name="a100", profile="", **four_gpu_offering())
    Team.objects.filter(pk=cast.team.pk).update(entra_group_id=None)
    cast.team.refresh_from_db()

    with pytest.raises(WorkspaceActionError, match="has no Entra ID group linked"):
        request_namespace(cast, pool)

    assert not Workspace.objects.filter(kind="namespace").exists()
    assert not kube(sim)["rolebindings"]


def test_a_group_unlinked_after_the_request_fails_the_namespace_not_the_worker(cast, cluster, sim):
    pool = make_pool(cast, cluster, name="a100", profile="", **four_gpu_offering())
    ws = request_namespace(cast, pool)
    workspace_stop(user=cast.researcher, workspace=ws, now=timezone.now())
    Team.objects.filter(pk=cast.team.pk).update(entra_group_id=None)
    ws.refresh_from_db()

    workspace_start(user=cast.researcher, workspace=ws, now=timezone.now())

    ws.refresh_from_db()
    assert "has no Entra ID group linked" in ws.error_message


def test_namespace_stop_sets_gpu_quota_to_zero_and_start_restores_it(cast, cluster, sim):
    pool = make_pool(cast, cluster, name="a100", profile="", **four_gpu_offering())
    ws = request_namespace(cast, pool)
    workspace_stop(user=cast.researcher, workspace=ws, now=timezone.now())
    ws.refresh_from_db()
    assert ws.status == Status.STOPPED

    def gpu_quota():
        quotas = kube(sim)["resourcequotas"]
        return next(q for q in quotas if q["namespace"] == ws.namespace)["hard"][
            "requests.nvidia.com/gpu"
        ]

    assert gpu_quota() == "0"
    workspace_start(user=cast.researcher, workspace=ws, now=timezone.now())
    ws.refresh_from_db()
    assert ws.status == Status.RUNNING and gpu_quota() == "2"
    workspace_delete(user=cast.researcher, workspace=ws, now=timezone.now())
    workspace_advance(workspace_id=ws.pk, clock=timezone.now)
    ws.refresh_from_db()
    assert ws.status == Status.DELETED
    assert ws.namespace not in {n["name"] for n in kube(sim)["namespaces"]}


def test_namespace_above_the_team_quota_goes_to_approval(cast, cluster):
    pool = make_pool(cast, cluster, name="a100", profile="", **four_gpu_offering())
    with pytest.raises(JustificationNeeded, match="A100"):
        request_namespace(cast, pool, gpus=5)
    ws = request_namespace(cast, pool, gpus=5, justification="Big sweep")
    assert ws.status == Status.PENDING_APPROVAL


def test_mig_and_namespace_are_billed_their_share_of_the_node(cast, cluster):
    mig_pool = make_pool(cast, cluster)
    ws = request_mig(cast)
    interval = UsageInterval.objects.get(workspace=ws)
    assert (interval.share_num, interval.share_den) == (1, 7)
    assert interval.sku == mig_pool.vm_size and interval.price_per_hour == Decimal("3.6730")
    pool = make_pool(cast, cluster, name="a100", profile="", **four_gpu_offering())
    ns = request_namespace(cast, pool, gpus=3)
    interval = UsageInterval.objects.get(workspace=ns)
    assert (interval.share_num, interval.share_den) == (3, 4)
    workspace_stop(user=cast.researcher, workspace=ns, now=timezone.now())
    assert UsageInterval.objects.get(workspace=ns).ended_at is not None


def test_name_that_is_not_a_dns_label_is_normalised(cast, cluster):
    pool = make_pool(cast, cluster, name="a100", profile="", **four_gpu_offering())
    assert aks_services.namespace_name(team=cast.team, name="Big_Run.2") == "vision-big-run-2"
    ws = request_namespace(cast, pool, name="x" * 40, gpus=1)
    assert len(ws.namespace) <= 63 and ws.namespace.startswith("vision-x")


def test_a_namespace_someone_else_made_is_a_failure_naming_the_owner(cast, cluster, sim):
    pool = make_pool(cast, cluster, name="a100", profile="", **four_gpu_offering())
    sim.kube_create_namespace("research-aks", "vision-training", labels={"owner": "ops"})
    ws = Workspace.objects.get(pk=request_namespace(cast, pool).pk)
    assert ws.status == Status.FAILED
    assert ws.error_code == "AlreadyExists" and "vision-training" in ws.error_message
    assert "someone outside the portal" in ws.error_message
    # Neither the failed create's clean-up nor deleting the workspace touches their namespace.
    workspace_delete(user=cast.researcher, workspace=ws, now=timezone.now())
    ws.refresh_from_db()
    assert ws.status == Status.DELETED
    assert "vision-training" in {n["name"] for n in kube(sim)["namespaces"]}


def test_pool_create_resumes_from_its_token_after_a_crash(cast, cluster, sim, settings):
    offering = OfferingFactory()
    ask = cluster_services.PoolRequest(
        name="mig1g", vm_size=offering.vm_size, gpu_instance_profile="MIG1g"
    )
    from clusters import tasks

    # The worker dies right after saving the token: the task that takes over only polls.
    real = tasks.advance_pool.delay
    tasks.advance_pool.delay = lambda pool_id: None
    try:
        pool = cluster_services.pool_create(
            actor=cast.platform_admin, cluster=cluster, ask=ask, now=timezone.now()
        )
        token = cluster_services._pool_operation(pool, "create")
    finally:
        tasks.advance_pool.delay = real
    del token
    pool.refresh_from_db()
    assert pool.operation_token and pool.status == PoolStatus.CREATING
    before = len([r for r in sim.requests() if r["method"] == "PUT"])
    later = timezone.now() + timedelta(seconds=1)
    cluster_services.pool_reconcile(now=later, stale_before=later)
    pool.refresh_from_db()
    assert pool.status == PoolStatus.READY
    puts = [r for r in sim.requests() if r["method"] == "PUT"]
    assert len(puts) == before == 1


# --- who may reach a slice's tokens (issue 14, finding 4) -----------------------------------


def as_member(ws, user: str, *groups: str):
    """CoreV1Api on the slice's cluster acting as `user` in `groups`: Kubernetes impersonation
    on the portal's admin token, what `kubectl --as <user> --as-group <group>` sends."""
    api = client.ApiClient(aks_services.kube_api(ws.node_pool).configuration)
    api.set_default_header("Impersonate-User", user)
    if groups:
        api.set_default_header("Impersonate-Group", ", ".join(groups))
    return client.CoreV1Api(api)


def kube_status(call) -> tuple[int, str]:
    """(HTTP status, Status message) of a call the API server refuses, (200, "") if it answers."""
    try:
        call()
    except ApiException as exc:
        return exc.status, json.loads(exc.body)["message"]
    return 200, ""


def test_a_teammate_can_neither_read_a_slices_tokens_nor_exec_into_its_pod(cast, cluster, sim):
    make_pool(cast, cluster)
    ws = request_mig(cast)  # alice's
    assert ws.status == Status.RUNNING, ws.waiting_reason or ws.error_message
    ns, name = ws.namespace, aks_services.kube_name(ws)
    carol = as_member(ws, "carol@contoso.com", str(GROUP))  # In the team's Entra ID group.
    assert kube_status(lambda: carol.read_namespaced_secret(f"{name}-agent", ns)) == (
        403,
        f'secrets "{name}-agent" is forbidden: User "carol@contoso.com" cannot get resource '
        f'"secrets" in API group "" in the namespace "{ns}"',
    )
    assert kube_status(lambda: carol.list_namespaced_secret(ns))[0] == 403
    for connect in (  # POST is SPDY's verb; GET the WebSocket upgrade's.
        carol.connect_post_namespaced_pod_exec,
        carol.connect_get_namespaced_pod_exec,
        carol.connect_post_namespaced_pod_attach,
    ):
        assert kube_status(lambda c=connect: c(f"{name}-0", ns))[0] == 403, connect.__name__
    # Nor through a pod of her own mounting the Secret, nor by rewriting the StatefulSet.
    pod = {"metadata": {"name": "peek"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    assert kube_status(lambda: carol.create_namespaced_pod(ns, pod))[0] == 403
    apps, scale = client.AppsV1Api(carol.api_client), {"spec": {"replicas": 0}}
    assert kube_status(lambda: apps.patch_namespaced_stateful_set(name, ns, scale))[0] == 403
    # Nor into alice's JupyterLab: port-forward is alice's alone.
    forward = carol.connect_post_namespaced_pod_portforward
    assert kube_status(lambda: forward(f"{name}-0", ns))[0] == 403


ALICE_OID = "a11ce000-0000-4000-8000-00000000a11c"


def set_identity(user, upn: str = "", oid: str | None = None) -> None:
    from teams.accounts import entra_identity_set

    entra_identity_set(
        user=user, object_id=uuid.UUID(oid) if oid else None, upn=upn, now=timezone.now()
    )


def test_the_owner_port_forwards_to_their_own_pod_only(cast, cluster, sim):
    make_pool(cast, cluster)
    set_identity(cast.researcher, upn="alice@contoso.com", oid=ALICE_OID)
    ws = request_mig(cast)
    other = request_mig(cast, user=cast.teammate, name="carols")
    assert ws.status == other.status == Status.RUNNING
    ns, pod = ws.namespace, f"{aks_services.kube_name(ws)}-0"
    for user in ("alice@contoso.com", ALICE_OID):  # A member's UPN, a guest's object id.
        alice = as_member(ws, user, str(GROUP))
        assert alice.read_namespaced_pod(pod, ns).status.phase == "Running"
        forward = alice.connect_post_namespaced_pod_portforward
        assert kube_status(lambda f=forward: f(pod, ns, ports=8888)) == (
            400,
            "Upgrade request required",  # Allowed: kubectl would upgrade to a stream here.
        )
        log = alice.read_namespaced_pod_log(pod, ns, _preload_content=False)
        assert log.status == 200
    alice = as_member(ws, "alice@contoso.com", str(GROUP))
    carols = f"{aks_services.kube_name(other)}-0"
    assert kube_status(lambda: alice.connect_post_namespaced_pod_portforward(carols, ns))[0] == 403
    # Her own tokens she reads on the page, not from Kubernetes; nor does she exec.
    secret = f"{aks_services.kube_name(ws)}-agent"
    assert kube_status(lambda: alice.read_namespaced_secret(secret, ns))[0] == 403
    assert kube_status(lambda: alice.connect_post_namespaced_pod_exec(pod, ns))[0] == 403


def test_a_new_entra_identity_reaches_running_and_stopped_slices(cast, cluster, sim):
    make_pool(cast, cluster)
    running_ws = request_mig(cast)
    stopped_ws = request_mig(cast, name="second")
    workspace_stop(user=cast.researcher, workspace=stopped_ws, now=timezone.now())
    set_identity(cast.researcher, upn="alice@contoso.com")

    def subjects(ws):
        bindings = kube(sim)["rolebindings"]
        binding = next(b for b in bindings if b["name"] == f"ws-{ws.short_id}-owner")
        return [s["name"] for s in binding["subjects"]]

    assert subjects(running_ws) == subjects(stopped_ws) == ["alice@contoso.com"]
    set_identity(cast.researcher, oid=ALICE_OID)  # The UPN cleared, an object id given.
    assert subjects(running_ws) == [ALICE_OID]


def grant_team_edit_as_before(ws) -> None:
    """What the portal made in a slice's namespace before issue 14: edit for the team."""
    rbac = client.RbacAuthorizationV1Api(aks_services.kube_api(ws.node_pool))
    old = {
        "metadata": {
            "name": "team-edit",
            "labels": {cloud_kube.MANAGED_BY_LABEL: "gpu-workspace-portal"},
        },
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "Group", "name": str(GROUP)}],
    }
    rbac.create_namespaced_role_binding(ws.namespace, old)


def test_starting_a_slice_made_before_issue_14_drops_the_teams_edit(cast, cluster, sim):
    make_pool(cast, cluster)
    ws = request_mig(cast)
    workspace_stop(user=cast.researcher, workspace=ws, now=timezone.now())
    grant_team_edit_as_before(ws)
    carol = as_member(ws, "carol@contoso.com", str(GROUP))
    assert kube_status(lambda: carol.list_namespaced_secret(ws.namespace))[0] == 200
    workspace_start(
        user=cast.researcher, workspace=Workspace.objects.get(pk=ws.pk), now=timezone.now()
    )
    assert Workspace.objects.get(pk=ws.pk).status == Status.RUNNING
    assert kube_status(lambda: carol.list_namespaced_secret(ws.namespace))[0] == 403


def test_the_upgrade_command_drops_the_teams_edit_beside_running_slices(cast, cluster, sim):
    from io import StringIO

    from django.core.management import call_command

    make_pool(cast, cluster)
    ws = request_mig(cast)
    grant_team_edit_as_before(ws)
    carol = as_member(ws, "carol@contoso.com", str(GROUP))
    assert (
        kube_status(lambda: carol.read_namespaced_secret(f"ws-{ws.short_id}-agent", ws.namespace))[
            0
        ]
        == 200
    )
    out = StringIO()
    call_command("refresh_slice_access", stdout=out)
    assert f"{ws.pk}: ok" in out.getvalue() and "1 brought up to date, 0 failed" in out.getvalue()
    assert (
        kube_status(lambda: carol.read_namespaced_secret(f"ws-{ws.short_id}-agent", ws.namespace))[
            0
        ]
        == 403
    )
