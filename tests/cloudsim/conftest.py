"""Fixtures for the cloudsim tests: one emulator per session, reset before every test.

These tests speak plain HTTP (urllib + json), not the Azure SDK, and need no database.
"""

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

import pytest

from cloudsim import SimControl, start_server

SUB = "00000000-0000-0000-0000-0000000000aa"
RG = "rg-test"
API = "2024-07-01"
A100 = "Standard_NC24ads_A100_v4"  # 24 vCPUs, standardNCADSA100v4Family, in eastus.
VNET = f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Network/virtualNetworks/vnet"
SUBNET = f"{VNET}/subnets/default"


@dataclass
class Reply:
    status: int
    headers: dict  # Lower-case names.
    body: object  # Parsed JSON, or None for an empty body.

    @property
    def code(self) -> str | None:
        """The ARM error code, if this is an error body."""
        return (
            (self.body or {}).get("error", {}).get("code") if isinstance(self.body, dict) else None
        )


def resource_path(provider_type: str, name: str) -> str:
    return f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/{provider_type}/{name}"


def nic_id(name: str) -> str:
    return resource_path("Microsoft.Network/networkInterfaces", name)


def vm_body(
    nic: str, size: str = A100, location: str = "eastus", disk: str = "", **properties
) -> dict:
    """A VM PUT body like the portal's adapter sends (REST shape)."""
    props = {
        "hardwareProfile": {"vmSize": size},
        "storageProfile": {
            "imageReference": {
                "publisher": "Canonical",
                "offer": "ubuntu-24_04-lts",
                "sku": "server",
                "version": "latest",
            },
            "osDisk": {
                "name": disk or f"{nic}-osdisk",
                "createOption": "FromImage",
                "managedDisk": {"storageAccountType": "Premium_LRS"},
            },
        },
        "osProfile": {
            "computerName": "ws",
            "adminUsername": "azureuser",
            "customData": "I2Nsb3VkLWNvbmZpZw==",
            "linuxConfiguration": {
                "disablePasswordAuthentication": True,
                "ssh": {
                    "publicKeys": [{"path": "/home/azureuser/.ssh/k", "keyData": "ssh-ed25519 A"}]
                },
            },
        },
        "networkProfile": {
            "networkInterfaces": [{"id": nic_id(nic), "properties": {"primary": True}}]
        },
    }
    props.update(properties)
    return {"location": location, "tags": {"workspace": "w1"}, "properties": props}


class Arm:
    """Raw ARM calls against the emulator, plus the ids and bodies tests need."""

    SUB, RG, A100, SUBNET = SUB, RG, A100, SUBNET
    nic_id = staticmethod(nic_id)
    vm_body = staticmethod(vm_body)
    resource_path = staticmethod(resource_path)

    def __init__(self, url: str):
        self.url = url

    @staticmethod
    def vm_path(name: str) -> str:
        return resource_path("Microsoft.Compute/virtualMachines", name)

    @staticmethod
    def disk_path(name: str) -> str:
        return resource_path("Microsoft.Compute/disks", name)

    def call(
        self, method: str, path: str, body=None, api: str | None = API, raw: bytes | None = None
    ):
        """path is relative to the server, or absolute (e.g. an Azure-AsyncOperation URL)."""
        url = path if path.startswith("http") else self.url + path
        if api is not None:
            url += ("&" if "?" in url else "?") + f"api-version={api}"
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return _reply(response.status, response.headers, response.read())
        except urllib.error.HTTPError as err:
            return _reply(err.code, err.headers, err.read())

    def put_nic(self, name: str, **extra) -> Reply:
        body = {
            "location": "eastus",
            "tags": {"workspace": "w1"},
            "properties": {
                "ipConfigurations": [
                    {"name": "ipconfig1", "properties": {"subnet": {"id": SUBNET}}}
                ]
            },
        }
        body.update(extra)
        return self.call("PUT", nic_id(name), body)

    def put_vm(self, name: str, nic: str | None = None, **kwargs) -> Reply:
        """PUT a VM on NIC `nic` (created first when it does not exist yet)."""
        nic = nic or f"{name}-nic"
        kwargs.setdefault("disk", f"{name}-osdisk")
        if self.call("GET", nic_id(nic)).status == 404:
            assert self.put_nic(nic).status == 201
        return self.call("PUT", self.vm_path(name), vm_body(nic, **kwargs))

    def wait(self, reply: Reply, timeout: float = 5.0) -> dict:
        """Poll the reply's Azure-AsyncOperation URL until the operation leaves InProgress."""
        url = reply.headers["azure-asyncoperation"]
        deadline = time.time() + timeout
        while True:
            status = self.call("GET", url, api=None)
            assert status.status == 200, status
            if status.body["status"] != "InProgress" or time.time() > deadline:
                return status.body
            time.sleep(0.02)

    def vm(self, name: str) -> dict:
        reply = self.call("GET", self.vm_path(name))
        assert reply.status == 200, reply
        return reply.body

    def power(self, name: str) -> tuple[str, str]:
        """(ProvisioningState/..., PowerState/...) codes from the instance view."""
        reply = self.call("GET", self.vm_path(name) + "/instanceView")
        assert reply.status == 200, reply
        codes = [s["code"] for s in reply.body["statuses"]]
        return codes[0], codes[1]


def _reply(status: int, headers, raw: bytes) -> Reply:
    body = json.loads(raw) if raw else None
    return Reply(status, {k.lower(): v for k, v in headers.items()}, body)


@pytest.fixture(scope="session")
def _server():
    server = start_server(port=0, latency=0.05, retry_after=0)
    yield server
    server.shutdown()


@pytest.fixture
def sim(_server):
    """The running emulator, emptied and back to its startup settings."""
    _server.state.reset()
    return _server


@pytest.fixture
def arm(sim) -> Arm:
    return Arm(sim.url)


@pytest.fixture
def finish(sim):
    """Call to complete every running operation now, as if its latency had passed."""

    def complete_all() -> None:
        with sim.state.lock:
            sim.state.advance(time.time() + 3600)

    return complete_all


@pytest.fixture
def ctl(sim) -> SimControl:
    return SimControl(sim.url)


# --- the Kubernetes API of a simulated AKS cluster ------------------------------------------

KUBE_SUB, KUBE_RG, KUBE_CLUSTER = "00000000-0000-0000-0000-0000000000aa", "rg-aks", "aks-gpu"
SYSTEM_POOL = {
    "name": "system",
    "vm_size": "Standard_D4s_v5",
    "count": 2,
    "vcpus": 4,
    "memory_gb": 16,
    "gpus": 0,
    "gpu_model": "",
}
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


@dataclass
class Kube:
    """The real kubernetes client on the emulator's cluster "aks-gpu" (pools: system x2 and
    mig1g x1, an A100 80GB split in 7 1g.10gb slices, tainted sku=gpu:NoSchedule)."""

    url: str  # The API server's URL (emulator URL + server_path).
    api: object
    core: object
    apps: object
    control: SimControl

    def pod(self, name: str, resources: dict | None = None, pool: str | None = "mig1g", **spec):
        """A V1Pod asking for `resources` (limits; default one 1g.10gb slice) on `pool`."""
        from kubernetes import client

        limits = {"nvidia.com/mig-1g.10gb": "1"} if resources is None else resources
        tolerations = [client.V1Toleration(key="sku", operator="Equal", value="gpu")]
        container = client.V1Container(
            name="main", image="busybox", resources=client.V1ResourceRequirements(limits=limits)
        )
        return client.V1Pod(
            metadata=client.V1ObjectMeta(name=name, labels={"app": name}),
            spec=client.V1PodSpec(
                containers=[container],
                node_selector={"agentpool": pool} if pool else None,
                tolerations=tolerations,
                **spec,
            ),
        )

    def namespace(self, name: str) -> None:
        from kubernetes import client

        self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))


@pytest.fixture
def kube(sim) -> Kube:
    from kubernetes import client

    sim.state.latency = 0.0  # Pods start and namespaces go on the next request.
    control = SimControl(sim.url)
    server = control.k8s_cluster(KUBE_SUB, KUBE_RG, KUBE_CLUSTER, [SYSTEM_POOL, MIG_POOL])
    config = client.Configuration(host=sim.url + server["server"])
    config.api_key, config.api_key_prefix = {"BearerToken": "t"}, {"BearerToken": "Bearer"}
    api = client.ApiClient(config)
    return Kube(config.host, api, client.CoreV1Api(api), client.AppsV1Api(api), control)


def kube_error(exc) -> tuple[int, dict]:
    """(HTTP status, Status body) of a kubernetes ApiException."""
    return exc.status, json.loads(exc.body)
