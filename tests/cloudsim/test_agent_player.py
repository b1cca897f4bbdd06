"""The emulator plays each running VM's and MIG pod's telemetry agent (docs/agent-protocol.md).

A tiny fake portal on 127.0.0.1 records the heartbeats; VMs carry the agent config in their
customData exactly as the portal writes it, pods their environment as cloud.kube gives it.
Plain HTTP, no database.
"""

import base64
import json
import random
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cloudsim import SimControlError
from cloudsim.agent_protocol import AgentConfig, agent_config, gpu_model
from cloudsim.agents import AgentBook, AgentState, Job, Outcome

TOKEN = "wsa_secret-token-never-shown"
INTERVAL = 0.1  # Seconds between heartbeats, as the VMs' configs say.


class FakePortal:
    """Records heartbeats; answers `status[workspace]` (default 202) with interval_seconds."""

    def __init__(self):
        self.beats: list[dict] = []
        self.status: dict[str, int] = {}
        self.interval: float | None = INTERVAL
        self.lock = threading.Lock()
        portal = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                portal.record(self.path, self.headers, raw)
                workspace = self.path.split("/")[3] if self.path.count("/") >= 4 else ""
                self.answer(portal.status.get(workspace, 202), len(json.loads(raw)["samples"]))

            def answer(self, status: int, count: int):
                body = {"accepted": count, "interval_seconds": portal.interval}
                payload = json.dumps(body if status == 202 else {"error": "nope"}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def record(self, path: str, headers, raw: bytes) -> None:
        beat = {"path": path, "auth": headers.get("Authorization"), "body": json.loads(raw)}
        with self.lock:
            self.beats.append(beat)

    def for_workspace(self, workspace: str) -> list[dict]:
        with self.lock:
            return [b for b in self.beats if f"/api/workspaces/{workspace}/" in b["path"]]

    def samples(self, workspace: str) -> list[dict]:
        return [s for b in self.for_workspace(workspace) for s in b["body"]["samples"]]

    def wait_for(self, workspace: str, count: int, timeout: float = 1.5) -> list[dict]:
        """The workspace's heartbeats once there are at least `count` (fails after timeout)."""
        deadline = time.time() + timeout
        while len(beats := self.for_workspace(workspace)) < count:
            assert time.time() < deadline, f"{len(beats)} of {count} heartbeats arrived"
            time.sleep(0.02)
        return beats


@pytest.fixture(scope="module")
def _portal():
    portal = FakePortal()
    thread = threading.Thread(target=portal.httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield portal
    portal.httpd.shutdown()
    portal.httpd.server_close()


@pytest.fixture
def portal(_portal, sim):
    """The fake portal, answering 202 with the configs' interval again."""
    _portal.status.clear()
    _portal.interval = INTERVAL
    return _portal


def custom_data(portal_url: str, workspace: str, interval: float = INTERVAL) -> str:
    """customData as the portal writes it: base64 of "#cloud-config\\n" + JSON."""
    config = {
        "portal_url": portal_url,
        "workspace": workspace,
        "token": TOKEN,
        "interval_seconds": interval,
    }
    document = {
        "write_files": [
            {"path": "/opt/gpu-portal-agent/gpu_portal_agent.py", "encoding": "gz+b64"},
            {
                "path": "/etc/gpu-portal-agent/config.json",
                "permissions": "0600",
                "content": json.dumps(config),
            },
        ],
        "runcmd": [["systemctl", "enable", "--now", "gpu-portal-agent"]],
    }
    return base64.b64encode(("#cloud-config\n" + json.dumps(document)).encode()).decode()


def create_vm(arm, name: str, data: str | None, size: str | None = None) -> None:
    """PUT a VM with this customData and wait until it runs."""
    arm.put_nic(f"{name}-nic")
    body = arm.vm_body(f"{name}-nic", size=size or arm.A100, disk=f"{name}-osdisk")
    body["properties"]["osProfile"]["customData"] = data
    reply = arm.call("PUT", arm.vm_path(name), body)
    assert reply.status == 201, reply
    assert arm.wait(reply)["status"] == "Succeeded"


@pytest.fixture
def workspace() -> str:
    return str(uuid.uuid4())


def agent_row(ctl, vm: str) -> dict:
    return next(row for row in ctl.agents() if row["vm"] == vm)


def wait_posts(ctl, vm: str, posts: int, timeout: float = 1.5) -> dict:
    """The VM's /_sim/agents row once it counts `posts` finished POSTs (answers recorded)."""
    deadline = time.time() + timeout
    while (row := agent_row(ctl, vm))["posts"] < posts:
        assert time.time() < deadline, row
        time.sleep(0.02)
    return row


def test_heartbeats_follow_the_protocol(arm, portal, workspace):
    create_vm(arm, "vm1", custom_data(portal.url, workspace))

    beats = portal.wait_for(workspace, 2)

    for beat in beats:
        assert beat["path"] == f"/api/workspaces/{workspace}/heartbeat/"
        assert beat["auth"] == f"Bearer {TOKEN}"
        assert beat["body"]["agent_version"] == "1.1"
        assert len(beat["body"]["samples"]) == 1
    sample = beats[0]["body"]["samples"][0]
    assert set(sample) == {
        "at",
        "nvml",
        "driver",
        "gpus",
        "ssh_sessions",
        "jupyter_busy_kernels",
        "cpu_percent",
    }
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", sample["at"])
    assert sample["at"] < beats[1]["body"]["samples"][0]["at"]  # Strictly newer each time.
    assert sample["nvml"] == "ok" and sample["driver"] == "loaded"
    assert isinstance(sample["ssh_sessions"], int) and isinstance(sample["cpu_percent"], float)
    assert sample["jupyter_busy_kernels"] == 0 and 0 <= sample["cpu_percent"] <= 100
    (gpu,) = sample["gpus"]  # Standard_NC24ads_A100_v4 has one GPU.
    assert gpu["index"] == 0 and gpu["name"] == "NVIDIA A100 80GB PCIe"
    assert gpu["mem_total_mib"] == 81920 and 0 <= gpu["mem_used_mib"] <= 81920
    assert 0 <= gpu["util_percent"] <= 100 and gpu["processes"] >= 0
    assert gpu["mig_profile"] is None


def test_busy_is_the_default_and_keeps_every_gpu_working(arm, portal, workspace):
    create_vm(arm, "vm1", custom_data(portal.url, workspace), size="Standard_NC48ads_A100_v4")

    portal.wait_for(workspace, 3)

    for sample in portal.samples(workspace):
        assert [g["index"] for g in sample["gpus"]] == [0, 1]
        assert all(80 <= g["util_percent"] <= 98 for g in sample["gpus"])
        assert all(g["mem_used_mib"] > 40000 and g["processes"] >= 1 for g in sample["gpus"])
        assert sample["ssh_sessions"] == 1 and 40 <= sample["cpu_percent"] <= 70


def test_idle_reports_nothing_going_on(arm, ctl, portal, workspace):
    ctl.set_agent_profile("vm1", "idle")  # Before the VM exists.
    create_vm(arm, "vm1", custom_data(portal.url, workspace))

    portal.wait_for(workspace, 3)

    for sample in portal.samples(workspace):
        assert [g["util_percent"] for g in sample["gpus"]] == [0]
        assert sample["gpus"][0]["mem_used_mib"] < 1024 and sample["gpus"][0]["processes"] == 0
        assert sample["ssh_sessions"] == 0 and sample["jupyter_busy_kernels"] == 0
        assert sample["cpu_percent"] <= 3


def test_tab_open_keeps_what_a_tab_polls_fresh_and_its_last_cell_where_it_was(
    arm, ctl, portal, workspace
):
    ctl.set_agent_profile("vm1", "tab_open")
    create_vm(arm, "vm1", custom_data(portal.url, workspace))

    portal.wait_for(workspace, 3)

    first, *_, last = portal.samples(workspace)
    assert [g["util_percent"] for g in last["gpus"]] == [0] and last["jupyter_busy_kernels"] == 0
    # The open tab's polling moves Jupyter's /api/status and code-server's heartbeat ...
    assert last["jupyter"]["last_activity"] == last["at"] == last["vscode"]["last_activity"]
    # ... but the kernel last ran a cell, and the notebook was last saved, when it began.
    assert last["jupyter"]["kernels_active_at"] == first["jupyter"]["kernels_active_at"]
    assert last["jupyter"]["saved_at"] <= first["at"] < last["at"]


def test_training_keeps_a_kernel_busy_with_nobody_logged_in(arm, ctl, portal, workspace):
    ctl.set_agent_profile("vm1", "training")
    create_vm(arm, "vm1", custom_data(portal.url, workspace))

    portal.wait_for(workspace, 2)

    for sample in portal.samples(workspace):
        assert sample["jupyter_busy_kernels"] == 1 and sample["jupyter"]["busy_kernels"] == 1
        assert sample["ssh_sessions"] == 0
        assert all(80 <= g["util_percent"] <= 98 for g in sample["gpus"])


def test_default_profile_applies_to_vms_without_their_own(arm, ctl, portal, workspace):
    ctl.set_default_agent_profile("idle")
    create_vm(arm, "vm1", custom_data(portal.url, workspace))

    portal.wait_for(workspace, 1)

    assert portal.samples(workspace)[0]["gpus"][0]["util_percent"] == 0
    assert agent_row(ctl, "vm1")["profile"] == "idle"


def test_spiky_is_idle_with_an_occasional_full_sample(arm, ctl, portal, workspace):
    portal.interval = 0.05
    ctl.set_agent_profile("vm1", "spiky", spike_every=3)
    create_vm(arm, "vm1", custom_data(portal.url, workspace))

    portal.wait_for(workspace, 9)

    utils = [s["gpus"][0]["util_percent"] for s in portal.samples(workspace)][:9]
    assert utils == [0, 0, 100] * 3


def test_spiky_spikes_every_tenth_sample_by_default(arm, ctl, portal, workspace):
    portal.interval = 0.05
    ctl.set_agent_profile("vm1", "spiky")
    create_vm(arm, "vm1", custom_data(portal.url, workspace))

    portal.wait_for(workspace, 10)

    utils = [s["gpus"][0]["util_percent"] for s in portal.samples(workspace)][:10]
    assert utils == [0] * 9 + [100]


def test_silent_posts_nothing(arm, ctl, portal, workspace):
    ctl.set_agent_profile("vm1", "silent")
    create_vm(arm, "vm1", custom_data(portal.url, workspace))

    time.sleep(4 * INTERVAL)

    assert portal.for_workspace(workspace) == []
    assert agent_row(ctl, "vm1")["posts"] == 0 and not agent_row(ctl, "vm1")["active"]


def test_samples_are_deterministic_per_vm_name(arm, sim, portal, workspace):
    create_vm(arm, "vm1", custom_data(portal.url, workspace))
    portal.wait_for(workspace, 3)
    first = [s["gpus"][0]["util_percent"] for s in portal.samples(workspace)][:3]

    sim.state.reset()
    again = str(uuid.uuid4())
    create_vm(arm, "vm1", custom_data(portal.url, again))
    portal.wait_for(again, 3)

    assert [s["gpus"][0]["util_percent"] for s in portal.samples(again)][:3] == first


def test_the_portals_interval_replaces_the_configured_one(arm, portal, workspace):
    create_vm(arm, "vm1", custom_data(portal.url, workspace, interval=30))

    portal.wait_for(workspace, 3)  # Within 1.5 s: the 202's 0.1 s interval is in use.


def test_deallocated_vm_stops_posting(arm, ctl, portal, workspace):
    create_vm(arm, "vm1", custom_data(portal.url, workspace))
    wait_posts(ctl, "vm1", 2)

    assert arm.wait(arm.call("POST", arm.vm_path("vm1") + "/deallocate"))["status"] == "Succeeded"
    time.sleep(2 * INTERVAL)  # A heartbeat already under way may still land.
    settled = len(portal.for_workspace(workspace))
    time.sleep(4 * INTERVAL)

    assert len(portal.for_workspace(workspace)) == settled
    assert agent_row(ctl, "vm1")["active"] is False


def test_restarted_vm_posts_again(arm, portal, workspace):
    create_vm(arm, "vm1", custom_data(portal.url, workspace))
    portal.wait_for(workspace, 1)
    arm.wait(arm.call("POST", arm.vm_path("vm1") + "/deallocate"))
    time.sleep(2 * INTERVAL)
    before = len(portal.for_workspace(workspace))

    assert arm.wait(arm.call("POST", arm.vm_path("vm1") + "/start"))["status"] == "Succeeded"

    portal.wait_for(workspace, before + 2)


def test_deleted_vm_stops_posting(arm, ctl, portal, workspace):
    create_vm(arm, "vm1", custom_data(portal.url, workspace))
    wait_posts(ctl, "vm1", 2)

    assert arm.wait(arm.call("DELETE", arm.vm_path("vm1")))["status"] == "Succeeded"
    time.sleep(2 * INTERVAL)
    settled = len(portal.for_workspace(workspace))
    time.sleep(4 * INTERVAL)

    assert len(portal.for_workspace(workspace)) == settled
    row = agent_row(ctl, "vm1")  # Its stats stay until reset.
    assert row["posts"] >= 2 and row["active"] is False


def test_410_stops_the_agent_for_good(arm, ctl, portal, workspace):
    portal.status[workspace] = 410
    create_vm(arm, "vm1", custom_data(portal.url, workspace))

    wait_posts(ctl, "vm1", 1)
    time.sleep(5 * INTERVAL)

    assert len(portal.for_workspace(workspace)) == 1
    row = agent_row(ctl, "vm1")
    assert row["last_status"] == 410 and row["active"] is False and row["failures"] == 1


def test_a_new_config_revives_an_agent_stopped_by_410(arm, portal, workspace):
    portal.status[workspace] = 410
    create_vm(arm, "vm1", custom_data(portal.url, workspace))
    portal.wait_for(workspace, 1)

    again = str(uuid.uuid4())
    body = arm.vm_body("vm1-nic", disk="vm1-osdisk")
    body["properties"]["osProfile"]["customData"] = custom_data(portal.url, again)
    assert arm.wait(arm.call("PUT", arm.vm_path("vm1"), body))["status"] == "Succeeded"

    portal.wait_for(again, 2)


def test_401_keeps_trying_at_the_interval(arm, ctl, portal, workspace):
    portal.status[workspace] = 401
    create_vm(arm, "vm1", custom_data(portal.url, workspace))

    row = wait_posts(ctl, "vm1", 3)

    assert row["last_status"] == 401 and row["last_error"] == "nope" and row["active"]


def test_server_errors_are_retried_and_recorded(arm, ctl, portal, workspace):
    portal.status[workspace] = 503
    create_vm(arm, "vm1", custom_data(portal.url, workspace))

    row = wait_posts(ctl, "vm1", 3)

    assert row["last_status"] == 503 and row["failures"] >= 3 and row["accepted"] == 0


def test_unreachable_portal_is_recorded_without_slowing_arm(arm, ctl, workspace):
    dead = "http://127.0.0.1:9"  # Discard port: nothing listens, so connections are refused.
    create_vm(arm, "vm1", custom_data(dead, workspace))

    row = wait_posts(ctl, "vm1", 2)

    assert row["last_status"] is None and "Connection" in row["last_error"]
    started = time.time()
    assert arm.call("GET", arm.vm_path("vm1")).status == 200
    assert time.time() - started < 0.5


def test_listing_shows_stats_and_never_the_token(arm, ctl, portal, workspace):
    create_vm(arm, "vm1", custom_data(portal.url, workspace))
    wait_posts(ctl, "vm1", 2)

    row = agent_row(ctl, "vm1")

    assert row["workspace"] == workspace and row["profile"] == "busy" and row["active"]
    assert row["posts"] >= 2 and row["accepted"] >= 2 and row["failures"] == 0
    assert row["last_status"] == 202 and row["last_error"] is None
    assert row["last_post_at"].startswith(time.strftime("%Y-", time.gmtime()))
    raw = json.dumps(ctl.agents())
    assert TOKEN not in raw and "secret" not in raw
    assert TOKEN not in repr(agent_config(custom_data(portal.url, workspace)))


def test_vm_without_agent_config_gets_no_agent(arm, ctl):
    create_vm(arm, "plain", base64.b64encode(b"#cloud-config\n{}").decode())
    create_vm(arm, "garbage", "not base64 at all!")
    create_vm(arm, "none", None)

    time.sleep(2 * INTERVAL)

    assert ctl.agents() == []


def test_reset_clears_profiles_stats_and_default(arm, ctl, sim, portal, workspace):
    ctl.set_default_agent_profile("silent")
    ctl.set_agent_profile("vm1", "idle")
    create_vm(arm, "vm1", custom_data(portal.url, workspace))
    portal.wait_for(workspace, 1)

    ctl.reset()

    assert ctl.agents() == []
    assert sim.state.agents.default_profile == "busy" and sim.state.agents.profiles == {}
    again = str(uuid.uuid4())
    create_vm(arm, "vm2", custom_data(portal.url, again))
    portal.wait_for(again, 1)
    assert portal.samples(again)[0]["gpus"][0]["util_percent"] >= 80


@pytest.mark.parametrize(
    "body",
    [
        {"vm": "vm1", "profile": "sleepy"},
        {"vm": "vm1"},
        {"profile": "idle"},
        {"vm": "", "profile": "idle"},
        {"vm": "vm1", "profile": "spiky", "spike_every": 0},
    ],
)
def test_profile_requests_are_validated(ctl, body):
    with pytest.raises(SimControlError) as err:
        ctl._call("POST", "/_sim/agents/profile", body)

    assert err.value.status == 400 and err.value.body["error"]["code"] == "InvalidControlRequest"


def test_unknown_default_profile_is_refused(ctl):
    with pytest.raises(SimControlError) as err:
        ctl.set_default_agent_profile("sleepy")

    assert err.value.status == 400


@pytest.mark.parametrize(
    ("size", "name", "memory"),
    [
        ("Standard_NC24ads_A100_v4", "NVIDIA A100 80GB PCIe", 81920),
        ("Standard_ND96asr_v4", "NVIDIA A100-SXM4-40GB", 40960),
        ("Standard_NC4as_T4_v3", "Tesla T4", 15360),
        ("Standard_NC6_Promo", "Tesla K80", 11441),
        ("Standard_NV8as_v4", None, 16384),
        ("Standard_Unknown", "NVIDIA GPU", 16384),
    ],
)
def test_gpu_names_follow_the_vm_size(size, name, memory):
    assert (gpu_model(size).name, gpu_model(size).memory_mib) == (name, memory)


def test_vm_without_nvidia_gpu_reports_nvml_unavailable(arm, portal, workspace):
    create_vm(arm, "vm1", custom_data(portal.url, workspace), size="Standard_NV8as_v4")

    sample = portal.wait_for(workspace, 1)[0]["body"]["samples"][0]

    assert sample["nvml"].startswith("unavailable: ") and sample["gpus"] == []


def test_retry_after_delays_the_next_heartbeat_up_to_five_minutes():
    book = AgentBook()
    config = AgentConfig("http://portal", "w", TOKEN, 30.0)
    state = book.states["vm1"] = AgentState("vm1", random.Random(0), config, next_due=30.0)

    book.record(Job("vm1", config, {}, book.generation), Outcome(429, "slow", retry_after=60), 0)
    assert state.next_due == 60.0
    book.record(Job("vm1", config, {}, book.generation), Outcome(503, "x", retry_after=1e4), 0)
    assert state.next_due == 300.0
    assert (state.posts, state.failures, state.last_status) == (2, 2, 503)


def test_answers_to_posts_from_before_a_reset_are_ignored():
    book = AgentBook("idle")
    config = AgentConfig("http://portal", "w", TOKEN, 30.0)
    job = Job("vm1", config, {}, book.generation)
    book.reset()
    state = book.states["vm1"] = AgentState("vm1", random.Random(0), config, in_flight=True)

    book.record(job, Outcome(202), 0)

    assert state.posts == 0 and state.in_flight


# --- agents in pods (a MIG workspace's StatefulSet) -----------------------------------------

POD_NAME = "ws-0123456789ab"


def agent_env(portal_url: str, workspace: str, secret: str = f"{POD_NAME}-agent") -> list[dict]:
    """The env cloud.kube gives a MIG pod: plain settings, the token from a secretKeyRef."""
    token = {"secretKeyRef": {"name": secret, "key": "token"}}
    return [
        {"name": "GPU_PORTAL_URL", "value": portal_url},
        {"name": "GPU_PORTAL_WORKSPACE", "value": workspace},
        {"name": "GPU_PORTAL_INTERVAL_SECONDS", "value": str(INTERVAL)},
        {"name": "PORTAL_AGENT_TOKEN", "valueFrom": token},
    ]


def mig_statefulset(kube, env: list[dict], name: str = POD_NAME, token: str | None = TOKEN):
    """A one-replica StatefulSet on a 1g.10gb slice in namespace team-a, with Secret
    "<name>-agent" holding `token` (None: no Secret); returns once its pod is Running."""
    if token is not None:
        secret = {"metadata": {"name": f"{name}-agent"}, "stringData": {"token": token}}
        kube.core.create_namespaced_secret("team-a", secret)
    pod = kube.api.sanitize_for_serialization(kube.pod(name))
    pod["spec"]["containers"][0]["env"] = env
    template = {"metadata": {"labels": {"app": name}}, "spec": pod["spec"]}
    body = {
        "metadata": {"name": name},
        "spec": {"replicas": 1, "serviceName": name, "template": template,
                 "selector": {"matchLabels": {"app": name}}},
    }  # fmt: skip
    kube.apps.create_namespaced_stateful_set("team-a", body)
    wait_running(kube, f"{name}-0")


def wait_running(kube, pod: str, timeout: float = 1.5) -> None:
    """Poll the pod (each request runs the cluster's controllers) until it is Running."""
    deadline = time.time() + timeout
    while kube.core.read_namespaced_pod(pod, "team-a").status.phase != "Running":
        assert time.time() < deadline, f"{pod} is not Running"
        time.sleep(0.02)


@pytest.fixture
def team_a(kube):
    kube.namespace("team-a")
    return kube


def test_a_mig_pods_agent_posts_its_slice_with_the_token_from_its_secret(team_a, portal, workspace):
    mig_statefulset(team_a, agent_env(portal.url, workspace))

    beats = portal.wait_for(workspace, 2)

    assert beats[0]["path"] == f"/api/workspaces/{workspace}/heartbeat/"
    assert beats[0]["auth"] == f"Bearer {TOKEN}"
    sample = beats[0]["body"]["samples"][0]
    assert sample["nvml"] == "ok"
    assert sample["gpus"] == [
        {"index": 0, "name": "NVIDIA A100 80GB PCIe MIG 1g.10gb", "util_percent": None,
         "mem_used_mib": sample["gpus"][0]["mem_used_mib"], "mem_total_mib": 9728,
         "processes": 1, "mig_profile": "1g.10gb"},
    ]  # fmt: skip
    assert sample["gpus"][0]["mem_used_mib"] > 5000  # Busy: most of the slice's memory.
    assert (sample["jupyter_busy_kernels"], sample["ssh_sessions"]) == (1, 0)


def test_a_pods_profile_is_set_by_its_statefulsets_name(team_a, ctl, portal, workspace):
    ctl.set_agent_profile(POD_NAME, "idle")
    mig_statefulset(team_a, agent_env(portal.url, workspace))

    portal.wait_for(workspace, 2)

    for sample in portal.samples(workspace):
        (gpu,) = sample["gpus"]
        assert gpu["mem_used_mib"] < 1024 and gpu["processes"] == 0
        assert sample["jupyter_busy_kernels"] == 0 and sample["cpu_percent"] <= 3
    row = wait_posts(ctl, POD_NAME, 2)
    assert row["workspace"] == workspace and row["profile"] == "idle" and row["active"]
    assert TOKEN not in json.dumps(ctl.agents())


def test_a_pod_scaled_to_zero_stops_posting_and_posts_again_once_back(
    team_a, ctl, portal, workspace
):
    mig_statefulset(team_a, agent_env(portal.url, workspace))
    wait_posts(ctl, POD_NAME, 2)

    team_a.apps.patch_namespaced_stateful_set_scale(POD_NAME, "team-a", {"spec": {"replicas": 0}})
    assert team_a.core.list_namespaced_pod("team-a").items == []  # The controller has run.
    time.sleep(2 * INTERVAL)
    settled = len(portal.for_workspace(workspace))
    time.sleep(4 * INTERVAL)

    assert len(portal.for_workspace(workspace)) == settled
    assert agent_row(ctl, POD_NAME)["active"] is False
    team_a.apps.patch_namespaced_stateful_set_scale(POD_NAME, "team-a", {"spec": {"replicas": 1}})
    wait_running(team_a, f"{POD_NAME}-0")
    portal.wait_for(workspace, settled + 2)


def test_a_pod_whose_agent_could_not_start_posts_nothing(team_a, ctl, portal, workspace):
    mig_statefulset(team_a, agent_env(portal.url, workspace, secret="absent"), name="ws-nosecret")
    mig_statefulset(team_a, agent_env(portal.url, workspace)[:3], name="ws-notoken", token=None)
    env = agent_env(portal.url, workspace, secret="ws-badinterval-agent")
    env[2]["value"] = "soon"
    mig_statefulset(team_a, env, name="ws-badinterval")
    mig_statefulset(team_a, [], name="ws-plain")

    time.sleep(3 * INTERVAL)

    assert portal.for_workspace(workspace) == [] and ctl.agents() == []


NVIDIA_EXTENSION = {
    "location": "eastus",
    "properties": {
        "publisher": "Microsoft.HpcCompute",
        "type": "NvidiaGpuDriverLinux",
        "typeHandlerVersion": "1.6",
        "autoUpgradeMinorVersion": True,
    },
}


def test_without_a_driver_the_agent_reports_no_gpu_and_driver_missing(arm, ctl, portal, workspace):
    ctl.extensions(drivers_required=True, seconds=0.3)
    create_vm(arm, "vm1", custom_data(portal.url, workspace))
    sample = portal.wait_for(workspace, 1)[0]["body"]["samples"][0]
    assert sample["driver"] == "missing" and sample["gpus"] == []
    assert sample["nvml"].startswith("unavailable")
    reply = arm.call("PUT", arm.vm_path("vm1") + "/extensions/nvidia", NVIDIA_EXTENSION)
    assert arm.wait(reply)["status"] == "Succeeded"
    seen = len(portal.for_workspace(workspace))
    later = portal.wait_for(workspace, seen + 1)[-1]["body"]["samples"][-1]
    assert later["driver"] == "loaded" and later["gpus"][0]["name"] == "NVIDIA A100 80GB PCIe"


def test_the_agent_falls_silent_while_the_extension_reboots_the_guest(
    arm, ctl, sim, portal, workspace
):
    create_vm(arm, "vm1", custom_data(portal.url, workspace))
    portal.wait_for(workspace, 1)
    ctl.extensions(seconds=2)  # the guest reboots from 0.8 s to 1.2 s into the install
    arm.call("PUT", arm.vm_path("vm1") + "/extensions/nvidia", NVIDIA_EXTENSION)
    with sim.state.lock:
        start, end = next(iter(sim.state.vms.values())).rebooting
    time.sleep(max(0.0, start - time.time()) + 0.15)
    quiet = len(portal.for_workspace(workspace))
    time.sleep(max(0.0, end - time.time()) - 0.05)
    assert len(portal.for_workspace(workspace)) <= quiet + 1  # at most one already in flight
    portal.wait_for(workspace, quiet + 2)  # and back after the reboot
