"""Fixtures for the Azure adapter tests: the real SDK against one emulator per session.

No Django here: the adapter takes plain settings. Every test starts from an empty emulator.
"""

import pytest

from cloud.azure_vm import VmSpec
from cloud.clients import AzureSettings

from .support import RESOURCE_GROUP, SUBNET_ID, SUBSCRIPTION, T4, WORKSPACE_ID


@pytest.fixture(scope="session")
def emulator():
    from cloudsim import start_server

    server = start_server(host="127.0.0.1", port=0, latency=0.05, retry_after=0)
    yield server
    server.shutdown()


@pytest.fixture
def control(emulator):
    """SimControl of the emulator, reset: no resources, faults or logged requests."""
    from cloudsim.control import SimControl

    sim = SimControl(emulator.url)
    sim.reset()
    return sim


@pytest.fixture
def azure(emulator, control) -> AzureSettings:
    return AzureSettings(
        subscription_id=SUBSCRIPTION,
        resource_group=RESOURCE_GROUP,
        subnet_id=SUBNET_ID,
        endpoint=emulator.url,
        credential="emulator",
        retry_total=2,
        retry_backoff=0.01,
        polling_interval=0.01,
    )


@pytest.fixture
def spec() -> VmSpec:
    return VmSpec(
        workspace_id=WORKSPACE_ID,
        location="eastus",
        vm_size=T4,
        admin_username="alice",
        ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTests alice@portal",
        custom_data="#cloud-config\nruncmd:\n  - [nvidia-smi]\n",
        tags={
            "portal": "gpu-portal",
            "team": "vision",
            "workspace": WORKSPACE_ID,
            "owner": "alice",
        },
    )
