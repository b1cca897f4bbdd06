"""cloud.kube end to end: the real kubernetes client against the emulator's API server."""

import base64
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from kubernetes import client

from agent import cloud_init
from cloud import kube
from cloud.clients import AzureSettings
from cloud.errors import CloudError

from .support import RESOURCE_GROUP, SUBNET_ID, SUBSCRIPTION, WORKSPACE_ID

CLUSTER = "aks-gpu"
MIG_POOL = {
    "name": "mig1g",
    "vm_size": "Standard_NC24ads_A100_v4",
    "count": 1,
    "vcpus": 24,
    "memory_gb": 220,
    "gpus": 1,
    "gpu_model": "A100-80GB",
    "gpu_instance_profile": "MIG1g",
    "taints": ["sku=gpu:NoSchedule"],
}
GPU_POOL = {
    "name": "a100",
    "vm_size": "Standard_NC48ads_A100_v4",
    "count": 1,
    "vcpus": 48,
    "memory_gb": 440,
    "gpus": 2,
    "gpu_model": "A100-80GB",
}
OTHER_WORKSPACE = "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a"


@pytest.fixture
def api(emulator, control):
    settings = AzureSettings(
        subscription_id=SUBSCRIPTION,
        resource_group=RESOURCE_GROUP,
        subnet_id=SUBNET_ID,
        endpoint=emulator.url,
        credential="emulator",
        retry_total=1,
        retry_backoff=0.01,
    )
    server = control.k8s_cluster(SUBSCRIPTION, RESOURCE_GROUP, CLUSTER, [MIG_POOL, GPU_POOL])
    return kube.kube_api(settings, emulator.url + server["server"], None)


def mig_spec(
    name: str = "ws-0123456789ab", workspace: str = WORKSPACE_ID, **changes
) -> kube.MigSpec:
    values = dict(
        workspace_id=workspace,
        namespace="team-vision",
        name=name,
        image="quay.io/jupyter/base-notebook:latest",
        mig_profile="1g.10gb",
        pool_name="mig1g",
        tolerations=("sku=gpu:NoSchedule",),
        home_gib=20,
        env=(("PORTAL_URL", "http://portal"),),
        agent_token="s3cret-token",
        labels=(("team", "vision"), ("owner", "alice")),
    )
    return kube.MigSpec(**{**values, **changes})


def ns_spec(**changes) -> kube.NamespaceSpec:
    values = dict(
        workspace_id=WORKSPACE_ID,
        name="vision-ns",
        group_object_id="11111111-2222-3333-4444-555555555555",
        gpus=2,
        mig=(("1g.10gb", 7),),
        cpu="16",
        memory="64Gi",
        labels=(("team", "vision"),),
    )
    return kube.NamespaceSpec(**{**values, **changes})


def until(check, timeout: float = 3.0):
    """check()'s first truthy value, polling (the emulator starts pods after its latency)."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)
    return value


def running(api, name="ws-0123456789ab") -> kube.PodState:
    return until(lambda: (s := kube.mig_state(api, namespace="team-vision", name=name)).ready and s)


# --- MIG ------------------------------------------------------------------------------------


def test_mig_ensure_runs_a_pod_on_a_slice_with_its_objects(api):
    kube.mig_ensure(api, mig_spec())
    state = running(api)
    assert state == kube.PodState(
        "Running", "", "", True, "ws-0123456789ab.team-vision.svc.cluster.local", 8888
    )
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    pod = core.read_namespaced_pod("ws-0123456789ab-0", "team-vision")
    container = pod.spec.containers[0]
    assert container.resources.limits == {"nvidia.com/mig-1g.10gb": "1"}
    assert pod.spec.node_selector == {"agentpool": "mig1g"}
    assert pod.spec.node_name.startswith("aks-mig1g-")
    assert "s3cret-token" not in str(pod.to_dict())
    token_env = next(e for e in container.env if e.value_from)
    assert token_env.value_from.secret_key_ref.name == "ws-0123456789ab-agent"
    secret = core.read_namespaced_secret("ws-0123456789ab-agent", "team-vision")
    assert secret.data == {"token": "czNjcmV0LXRva2Vu"}
    pvc = core.read_namespaced_persistent_volume_claim("ws-0123456789ab-home", "team-vision")
    assert pvc.spec.resources.requests == {"storage": "20Gi"} and pvc.status.phase == "Bound"
    assert pod.spec.volumes[0].persistent_volume_claim.claim_name == pvc.metadata.name
    service = core.read_namespaced_service("ws-0123456789ab", "team-vision")
    assert service.spec.cluster_ip and service.spec.ports[0].port == 8888
    sts = apps.read_namespaced_stateful_set("ws-0123456789ab", "team-vision")
    assert sts.metadata.labels[kube.WORKSPACE_LABEL] == WORKSPACE_ID
    assert sts.metadata.labels["owner"] == "alice"
    ns = core.read_namespace("team-vision")
    assert ns.metadata.labels[kube.MANAGED_BY_LABEL] == kube.MANAGED_BY


def test_without_an_agent_script_the_image_runs_its_own_command(api):
    kube.mig_ensure(api, mig_spec())
    core = client.CoreV1Api(api)
    container = core.read_namespaced_pod("ws-0123456789ab-0", "team-vision").spec.containers[0]
    assert (container.command, container.args) == (None, None)
    assert core.list_namespaced_config_map("team-vision").items == []


def agent_spec(url: str = "http://portal", **changes) -> kube.MigSpec:
    env = (
        ("GPU_PORTAL_URL", url),
        ("GPU_PORTAL_WORKSPACE", WORKSPACE_ID),
        ("GPU_PORTAL_INTERVAL_SECONDS", "0.05"),
    )
    values = {"env": env, "agent_script": cloud_init.agent_source(), **changes}
    return kube.MigSpec(**{**mig_spec().__dict__, **values})


def test_the_agent_code_is_mounted_read_only_and_started_before_the_image(api):
    kube.mig_ensure(api, agent_spec())
    kube.mig_ensure(api, agent_spec())  # Idempotent: the ConfigMap is ours.
    core = client.CoreV1Api(api)
    code = core.read_namespaced_config_map("ws-0123456789ab-agent-code", "team-vision")
    assert code.data == {"gpu_portal_agent.py": cloud_init.agent_source()}
    assert code.metadata.labels[kube.WORKSPACE_LABEL] == WORKSPACE_ID
    running(api)
    pod = core.read_namespaced_pod("ws-0123456789ab-0", "team-vision")
    container = pod.spec.containers[0]
    assert container.command[:2] == ["/bin/sh", "-c"]
    assert "python3 /opt/gpu-portal-agent/gpu_portal_agent.py" in container.command[2]
    assert container.args == ["start-notebook.py"]
    mount = next(m for m in container.volume_mounts if m.mount_path == "/opt/gpu-portal-agent")
    volume = next(v for v in pod.spec.volumes if v.name == mount.name)
    assert mount.read_only and volume.config_map.name == "ws-0123456789ab-agent-code"
    assert container.resources.limits == {"nvidia.com/mig-1g.10gb": "1"}  # Its MIG device.


class GonePortal:
    """Answers every heartbeat 410 (so the agent exits), recording what came."""

    def __init__(self):
        self.beats: list[dict] = []
        portal = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                beat = {"path": self.path, "headers": dict(self.headers), "body": body}
                portal.beats.append(beat)
                self.send_response(410)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()


def test_the_pods_command_runs_the_agent_from_its_environment_then_the_image(
    api, control, tmp_path
):
    portal = GonePortal()
    control.set_agent_profile("ws-0123456789ab", "silent")  # Only the real agent posts here.
    kube.mig_ensure(api, agent_spec(portal.url, start_command=("echo", "notebook started")))
    core = client.CoreV1Api(api)
    pod = core.read_namespaced_pod("ws-0123456789ab-0", "team-vision")
    container = pod.spec.containers[0]
    # What the kubelet would do: the ConfigMap's files at the mount, env with the Secret's token.
    code = core.read_namespaced_config_map("ws-0123456789ab-agent-code", "team-vision")
    for name, text in code.data.items():
        (tmp_path / name).write_text(text)
    secret = core.read_namespaced_secret("ws-0123456789ab-agent", "team-vision")
    env = {e.name: e.value for e in container.env if e.value is not None}
    env[kube.AGENT_TOKEN_ENV] = base64.b64decode(secret.data["token"]).decode()
    command = [part.replace("/opt/gpu-portal-agent", str(tmp_path)) for part in container.command]
    done = subprocess.run(
        [*command, *container.args],
        env={**env, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout == "notebook started\n", done.stderr
    portal.httpd.shutdown()
    (beat,) = portal.beats  # 410: the agent stops and is not restarted.
    assert beat["path"] == f"/api/workspaces/{WORKSPACE_ID}/heartbeat/"
    assert beat["headers"]["Authorization"] == "Bearer s3cret-token"
    assert json.loads(beat["body"])["samples"][0]["nvml"].startswith("unavailable: ")


def test_an_agent_without_a_start_command_is_refused(api):
    with pytest.raises(ValueError, match="start_command"):
        kube.mig_ensure(api, agent_spec(start_command=()))


def test_scale_to_zero_keeps_the_pvc_and_scale_to_one_comes_back(api):
    kube.mig_ensure(api, mig_spec())
    running(api)
    kube.mig_scale(api, namespace="team-vision", name="ws-0123456789ab", replicas=0)
    state = kube.mig_state(api, namespace="team-vision", name="ws-0123456789ab")
    assert (state.phase, state.ready) == ("Absent", False)
    core = client.CoreV1Api(api)
    assert core.read_namespaced_persistent_volume_claim("ws-0123456789ab-home", "team-vision")
    kube.mig_scale(api, namespace="team-vision", name="ws-0123456789ab", replicas=1)
    assert running(api).phase == "Running"


def test_mig_delete_removes_everything_pvc_included(api):
    kube.mig_ensure(api, agent_spec())
    running(api)
    until(lambda: kube.mig_delete(api, namespace="team-vision", name="ws-0123456789ab"))
    core = client.CoreV1Api(api)
    assert core.list_namespaced_persistent_volume_claim("team-vision").items == []
    assert core.list_namespaced_pod("team-vision").items == []
    assert core.list_namespaced_service("team-vision").items == []
    assert core.list_namespaced_secret("team-vision").items == []
    assert core.list_namespaced_config_map("team-vision").items == []
    rbac = client.RbacAuthorizationV1Api(api)
    assert rbac.list_namespaced_role("team-vision").items == []
    assert rbac.list_namespaced_role_binding("team-vision").items == []
    assert kube.mig_delete(api, namespace="team-vision", name="ws-0123456789ab") is True


def test_a_second_ensure_completes_a_partial_create(api):
    spec = mig_spec()
    kube.mig_ensure(api, spec)
    apps = client.AppsV1Api(api)
    apps.delete_namespaced_stateful_set(spec.name, spec.namespace)
    client.CoreV1Api(api).delete_namespaced_service(spec.name, spec.namespace)
    kube.mig_ensure(api, spec)
    assert apps.read_namespaced_stateful_set(spec.name, spec.namespace).spec.replicas == 1
    assert running(api).phase == "Running"


def test_a_name_held_by_another_workspace_is_already_exists_naming_the_owner(api):
    kube.mig_ensure(api, mig_spec(workspace=OTHER_WORKSPACE))
    with pytest.raises(CloudError) as caught:
        kube.mig_ensure(api, mig_spec())
    assert (caught.value.code, caught.value.status) == ("AlreadyExists", 409)
    assert caught.value.message == (
        f"Role ws-0123456789ab-owner already exists and belongs to workspace {OTHER_WORKSPACE}"
    )


TEAM_GROUP = "11111111-2222-3333-4444-555555555555"


def acting_as(api, user: str, *groups: str):
    """CoreV1Api impersonating `user` in `groups` (kubectl --as/--as-group) on the admin."""
    impersonating = client.ApiClient(api.configuration)
    impersonating.set_default_header("Impersonate-User", user)
    if groups:
        impersonating.set_default_header("Impersonate-Group", ", ".join(groups))
    return client.CoreV1Api(impersonating)


def status_of(call) -> tuple[int, str]:
    """(HTTP status, Status message) the API server answers a call with (200, "" if fine)."""
    try:
        call()
    except client.ApiException as exc:
        return exc.status, json.loads(exc.body)["message"]
    return 200, ""


def test_the_owner_alone_may_port_forward_to_the_pod(api):
    kube.mig_ensure(api, mig_spec(owner_users=("alice@contoso.com", "a11ce-oid")))
    running(api)
    rbac = client.RbacAuthorizationV1Api(api)
    role = rbac.read_namespaced_role("ws-0123456789ab-owner", "team-vision")
    assert [(r.resources, r.verbs, r.resource_names) for r in role.rules] == [
        (["pods"], ["get"], ["ws-0123456789ab-0"]),
        (["pods/portforward"], ["get", "create"], ["ws-0123456789ab-0"]),
        (["pods/log"], ["get"], ["ws-0123456789ab-0"]),
    ]
    (binding,) = rbac.list_namespaced_role_binding("team-vision").items  # No team binding.
    assert (binding.role_ref.kind, binding.role_ref.name) == ("Role", "ws-0123456789ab-owner")
    assert [(s.kind, s.name) for s in binding.subjects] == [
        ("User", "alice@contoso.com"),
        ("User", "a11ce-oid"),
    ]
    pod, ns = "ws-0123456789ab-0", "team-vision"
    for user in ("alice@contoso.com", "a11ce-oid"):
        alice = acting_as(api, user, TEAM_GROUP)
        assert alice.read_namespaced_pod(pod, ns).metadata.name == pod
        forward = alice.connect_post_namespaced_pod_portforward
        assert status_of(lambda f=forward: f(pod, ns)) == (400, "Upgrade request required")
        secret = alice.read_namespaced_secret
        assert status_of(lambda r=secret: r("ws-0123456789ab-agent", ns))[0] == 403
        assert status_of(lambda a=alice: a.connect_post_namespaced_pod_exec(pod, ns))[0] == 403
    carol = acting_as(api, "carol@contoso.com", TEAM_GROUP)
    assert status_of(lambda: carol.connect_post_namespaced_pod_portforward(pod, ns)) == (
        403,
        f'pods "{pod}" is forbidden: User "carol@contoso.com" cannot create resource '
        f'"pods/portforward" in API group "" in the namespace "{ns}"',
    )


def test_mig_access_names_the_owner_as_now_and_drops_the_teams_old_edit(api):
    kube.mig_ensure(api, mig_spec(owner_users=("old-oid",)))
    rbac = client.RbacAuthorizationV1Api(api)
    # What a slice's namespace held before issue 14: edit for the team's group.
    old = {
        "metadata": {"name": "team-edit", "labels": {kube.MANAGED_BY_LABEL: kube.MANAGED_BY}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "Group", "name": TEAM_GROUP}],
    }
    rbac.create_namespaced_role_binding("team-vision", old)
    access = kube.SliceAccess(WORKSPACE_ID, "team-vision", "ws-0123456789ab", ("new-oid",))
    kube.mig_access(api, access)
    (binding,) = rbac.list_namespaced_role_binding("team-vision").items
    assert [s.name for s in binding.subjects] == ["new-oid"]
    version = binding.metadata.resource_version
    kube.mig_access(api, access)  # Nothing to change: nothing written.
    owner = rbac.read_namespaced_role_binding("ws-0123456789ab-owner", "team-vision")
    assert owner.metadata.resource_version == version
    kube.mig_access(api, kube.SliceAccess(WORKSPACE_ID, "team-vision", "ws-0123456789ab"))
    assert not rbac.read_namespaced_role_binding("ws-0123456789ab-owner", "team-vision").subjects


def test_a_namespace_workspaces_namespace_is_not_used_for_slices(api):
    # The team has edit there: a slice's tokens would be theirs to read.
    kube.namespace_ensure(api, ns_spec(name="team-vision", workspace_id=OTHER_WORKSPACE))
    with pytest.raises(CloudError) as caught:
        kube.mig_ensure(api, mig_spec())
    assert caught.value.message == (
        f"Namespace team-vision already exists and belongs to workspace {OTHER_WORKSPACE}"
    )


def test_a_namespace_made_outside_the_portal_is_not_taken_over(api):
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": "team-vision"}})
    with pytest.raises(CloudError) as caught:
        kube.mig_ensure(api, mig_spec())
    assert caught.value.message == (
        "Namespace team-vision already exists and belongs to someone outside the portal"
    )


def test_no_free_slice_is_pending_with_the_schedulers_message_then_runs(api):
    for index in range(7):
        kube.mig_ensure(api, mig_spec(name=f"ws-00000000000{index}"))
    kube.mig_ensure(api, mig_spec(name="ws-waiting"))
    state = until(
        lambda: (s := kube.mig_state(api, namespace="team-vision", name="ws-waiting")).reason and s
    )
    assert (state.phase, state.reason) == ("Pending", "Unschedulable")
    assert "Insufficient nvidia.com/mig-1g.10gb" in state.message
    assert state.message.startswith("0/2 nodes are available: ")
    kube.mig_scale(api, namespace="team-vision", name="ws-000000000003", replicas=0)
    assert running(api, "ws-waiting").phase == "Running"


def test_bad_specs_are_refused_before_anything_is_made(api):
    with pytest.raises(ValueError, match="MIG profile"):
        kube.mig_ensure(api, kube.MigSpec(**{**mig_spec().__dict__, "mig_profile": "huge"}))
    with pytest.raises(ValueError, match="key=value:Effect"):
        kube.mig_ensure(api, kube.MigSpec(**{**mig_spec().__dict__, "tolerations": ("sku",)}))
    assert client.CoreV1Api(api).list_namespace(label_selector="team").items == []


def test_scaling_a_missing_workspace_is_not_found(api):
    with pytest.raises(CloudError) as caught:
        kube.mig_scale(api, namespace="team-vision", name="ws-nothing", replicas=1)
    assert (caught.value.code, caught.value.status, caught.value.transient) == (
        "NotFound",
        404,
        False,
    )


# --- namespaces -----------------------------------------------------------------------------


def test_namespace_ensure_makes_the_quota_binding_and_policy(api):
    kube.namespace_ensure(api, ns_spec())
    kube.namespace_ensure(api, ns_spec())  # Idempotent.
    core = client.CoreV1Api(api)
    quota = core.read_namespaced_resource_quota("portal-quota", "vision-ns")
    assert quota.spec.hard == {
        "requests.nvidia.com/gpu": "2",
        "requests.nvidia.com/mig-1g.10gb": "7",
        "requests.cpu": "16",
        "requests.memory": "64Gi",
    }
    binding = client.RbacAuthorizationV1Api(api).read_namespaced_role_binding(
        "team-edit", "vision-ns"
    )
    assert (binding.role_ref.kind, binding.role_ref.name) == ("ClusterRole", "edit")
    assert [(s.kind, s.name) for s in binding.subjects] == [
        ("Group", "11111111-2222-3333-4444-555555555555")
    ]
    policy = client.NetworkingV1Api(api).read_namespaced_network_policy(
        "deny-other-namespaces", "vision-ns"
    )
    assert policy.spec.policy_types == ["Ingress"] and policy.spec.pod_selector.to_dict() == {
        "match_expressions": None,
        "match_labels": None,
    }
    (rule,) = policy.spec.ingress
    assert [peer.namespace_selector for peer in rule._from] == [None]
    limits = core.read_namespaced_limit_range("portal-defaults", "vision-ns").spec.limits[0]
    assert limits.default_request == {"cpu": "500m", "memory": "1Gi"}
    assert kube.namespace_phase(api, name="vision-ns") == "Active"


def gpu_deployment(api, name: str, replicas: int, gpus: int = 1) -> None:
    container = {
        "name": "train",
        "image": "pytorch",
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
    }
    body = {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [container]},
            },
        },
    }
    client.AppsV1Api(api).create_namespaced_deployment("vision-ns", body)


def test_stop_then_start_restores_quota_and_replicas(api):
    kube.namespace_ensure(api, ns_spec())
    gpu_deployment(api, "train", replicas=2)
    until(lambda: kube.namespace_gpu_pods(api, name="vision-ns") == 2)
    kube.namespace_stop(api, name="vision-ns")
    kube.namespace_stop(api, name="vision-ns")  # A second run keeps what the first remembered.
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    stopped = apps.read_namespaced_deployment("train", "vision-ns")
    assert stopped.spec.replicas == 0
    assert stopped.metadata.annotations[kube.REPLICAS_ANNOTATION] == "2"
    hard = core.read_namespaced_resource_quota("portal-quota", "vision-ns").spec.hard
    assert hard["requests.nvidia.com/gpu"] == "0" and hard["requests.nvidia.com/mig-1g.10gb"] == "0"
    assert hard["requests.cpu"] == "16"
    assert kube.namespace_gpu_pods(api, name="vision-ns") == 0
    kube.namespace_start(api, ns_spec())
    started = apps.read_namespaced_deployment("train", "vision-ns")
    assert started.spec.replicas == 2
    assert kube.REPLICAS_ANNOTATION not in (started.metadata.annotations or {})
    assert core.read_namespaced_resource_quota("portal-quota", "vision-ns").spec.hard == (
        kube._hard(ns_spec())
    )
    until(lambda: kube.namespace_gpu_pods(api, name="vision-ns") == 2)


def test_a_pod_over_the_namespace_quota_is_forbidden_with_the_servers_message(api):
    kube.namespace_ensure(api, ns_spec(gpus=0))
    pod = {
        "metadata": {"name": "greedy"},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ]
        },
    }
    with pytest.raises(CloudError) as caught, kube._errors():
        client.CoreV1Api(api).create_namespaced_pod("vision-ns", pod)
    assert (caught.value.code, caught.value.status) == ("Forbidden", 403)
    assert caught.value.message == (
        'pods "greedy" is forbidden: exceeded quota: portal-quota, requested: '
        "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=0, "
        "limited: requests.nvidia.com/gpu=0"
    )


def test_namespace_delete_never_touches_a_namespace_that_is_not_the_workspaces(api):
    kube.namespace_ensure(api, ns_spec())
    other = "00000000-0000-4000-8000-000000000000"
    assert kube.namespace_delete(api, name="vision-ns", workspace_id=other) is True
    assert kube.namespace_phase(api, name="vision-ns") == "Active"


def test_namespace_delete_is_false_while_terminating_then_true(api, emulator):
    kube.namespace_ensure(api, ns_spec())
    emulator.state.latency = 0.3
    try:
        assert kube.namespace_delete(api, name="vision-ns", workspace_id=WORKSPACE_ID) is False
        assert kube.namespace_phase(api, name="vision-ns") == "Terminating"
        until(lambda: kube.namespace_delete(api, name="vision-ns", workspace_id=WORKSPACE_ID))
    finally:
        emulator.state.latency = 0.05
    assert kube.namespace_phase(api, name="vision-ns") == "Absent"


def test_a_namespace_of_another_workspace_is_refused(api):
    kube.namespace_ensure(api, ns_spec(workspace_id=OTHER_WORKSPACE))
    with pytest.raises(CloudError, match=f"belongs to workspace {OTHER_WORKSPACE}"):
        kube.namespace_ensure(api, ns_spec())


# --- capacity and names ---------------------------------------------------------------------


def test_pool_capacity_counts_slices_and_gpus_in_two_calls(api, control):
    kube.mig_ensure(api, mig_spec())
    running(api)
    kube.namespace_ensure(api, ns_spec())
    gpu_deployment(api, "train", replicas=1, gpus=2)
    until(lambda: kube.namespace_gpu_pods(api, name="vision-ns") == 1)
    before = len(control.requests())
    assert kube.pool_capacity(api) == [
        kube.PoolCapacity("a100", "nvidia.com/gpu", 2, 2),
        kube.PoolCapacity("mig1g", "nvidia.com/mig-1g.10gb", 7, 1),
    ]
    assert [r["method"] for r in control.requests()[before:]] == ["GET", "GET"]


def test_emulator_credential_is_for_loopback_servers_only():
    settings = AzureSettings(SUBSCRIPTION, RESOURCE_GROUP, SUBNET_ID, credential="emulator")
    with pytest.raises(ValueError, match="loopback"):
        kube.kube_api(settings, "https://aks-gpu-dns.hcp.eastus.azmk8s.io:443", None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Vision Lab", "vision-lab"),
        ("  --Équipe_Été--  ", "equipe-ete"),
        ("team.nlp/2024", "team-nlp-2024"),
        ("a" * 70, "a" * 63),
    ],
)
def test_dns_label(text, expected):
    assert kube.dns_label(text) == expected


def test_dns_label_trims_to_max_len_without_a_trailing_dash():
    assert kube.dns_label("abc def", max_len=4) == "abc"


@pytest.mark.parametrize("text", ["", "---", "日本語"])
def test_dns_label_refuses_text_with_nothing_usable(text):
    with pytest.raises(ValueError, match="no letters or digits"):
        kube.dns_label(text)


def test_an_unreachable_server_is_a_transient_cloud_error():
    settings = AzureSettings(
        SUBSCRIPTION, RESOURCE_GROUP, SUBNET_ID, credential="emulator", retry_total=0
    )
    api = kube.kube_api(settings, "http://127.0.0.1:9/k8s/nowhere", None)
    with pytest.raises(CloudError) as caught:
        kube.namespace_phase(api, name="vision-ns")
    assert caught.value.transient and caught.value.status is None


def test_the_entra_token_is_fetched_again_before_it_expires():
    import time_machine
    from azure.core.credentials import AccessToken

    class Credential:  # Stands in for DefaultAzureCredential: counts the tokens it hands out.
        def __init__(self):
            self.scopes = []

        def get_token(self, *scopes, **kwargs):
            self.scopes.append(scopes)
            return AccessToken(f"token-{len(self.scopes)}", int(time.time()) + 3600)

    credential, config = Credential(), client.Configuration(host="https://aks.example")
    config.api_key, config.api_key_prefix = {"BearerToken": ""}, {"BearerToken": "Bearer"}
    config.refresh_api_key_hook = kube._TokenHook(credential)
    with time_machine.travel(1_800_000_000, tick=False) as clock:
        assert config.auth_settings()["BearerToken"]["value"] == "Bearer token-1"
        clock.shift(3000)
        assert config.auth_settings()["BearerToken"]["value"] == "Bearer token-1"
        clock.shift(400)  # Within TOKEN_MARGIN of expiry.
        assert config.auth_settings()["BearerToken"]["value"] == "Bearer token-2"
    assert credential.scopes == [(kube.AKS_SERVER_SCOPE,)] * 2


def test_a_pod_refused_by_the_team_quota_is_absent_with_failed_create(api):
    spec = mig_spec()
    kube.mig_ensure(api, spec)
    running(api)
    kube.mig_scale(api, namespace=spec.namespace, name=spec.name, replicas=0)
    core = client.CoreV1Api(api)
    hard = {"requests.nvidia.com/mig-1g.10gb": "0"}
    core.create_namespaced_resource_quota(
        spec.namespace, {"metadata": {"name": "team"}, "spec": {"hard": hard}}
    )
    kube.mig_scale(api, namespace=spec.namespace, name=spec.name, replicas=1)
    state = kube.mig_state(api, namespace=spec.namespace, name=spec.name)
    assert (state.phase, state.reason) == ("Absent", "FailedCreate")
    assert state.message == (
        f"create Pod {spec.name}-0 in StatefulSet {spec.name} failed error: pods "
        f'"{spec.name}-0" is forbidden: exceeded quota: team, requested: '
        "requests.nvidia.com/mig-1g.10gb=1, used: requests.nvidia.com/mig-1g.10gb=0, "
        "limited: requests.nvidia.com/mig-1g.10gb=0"
    )
    core.patch_namespaced_resource_quota(
        "team", spec.namespace, {"spec": {"hard": {"requests.nvidia.com/mig-1g.10gb": "1"}}}
    )
    assert running(api).phase == "Running"


def test_kubernetes_calls_are_counted_by_resource_and_outcome(api):
    from prometheus_client import REGISTRY

    def calls(operation):
        labels = {"api": "kubernetes", "operation": operation, "outcome": "ok"}
        return REGISTRY.get_sample_value("portal_cloud_calls_total", labels) or 0

    nodes, pods = calls("GET nodes"), calls("GET pods")
    kube.pool_capacity(api)  # one list of nodes, one of pods
    assert (calls("GET nodes"), calls("GET pods")) == (nodes + 1, pods + 1)
