"""Client construction: credential modes, the loopback guard, caching."""

import dataclasses

import pytest
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.network import NetworkManagementClient

from cloud.clients import AzureSettings, compute_client, network_client

from .support import RESOURCE_GROUP, SUBNET_ID, SUBSCRIPTION


def settings(**overrides) -> AzureSettings:
    return AzureSettings(SUBSCRIPTION, RESOURCE_GROUP, SUBNET_ID, **overrides)


@pytest.mark.parametrize(
    "endpoint",
    [
        "https://management.azure.com",
        "http://10.0.0.5:8100",
        "http://127.0.0.1.example.com:8100",
        "http://localhost.example.com",
    ],
)
@pytest.mark.parametrize("factory", [compute_client, network_client])
def test_emulator_credential_is_refused_off_loopback(factory, endpoint):
    with pytest.raises(ValueError, match="loopback"):
        factory(settings(endpoint=endpoint, credential="emulator"))


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:8100", "http://localhost:8100/"])
def test_emulator_credential_is_accepted_on_loopback(endpoint):
    client = compute_client(settings(endpoint=endpoint, credential="emulator"))

    assert isinstance(client, ComputeManagementClient)


def test_unknown_credential_mode_is_refused():
    with pytest.raises(ValueError, match="credential mode"):
        network_client(settings(credential="password"))


def test_default_credential_builds_real_clients_without_calling_azure():
    production = settings()

    assert production.endpoint == "https://management.azure.com"
    assert isinstance(compute_client(production), ComputeManagementClient)
    assert isinstance(network_client(production), NetworkManagementClient)


def test_clients_are_cached_per_settings():
    local = settings(endpoint="http://127.0.0.1:8100", credential="emulator")

    assert compute_client(local) is compute_client(dataclasses.replace(local))
    assert network_client(local) is network_client(local)
    assert compute_client(local) is not compute_client(dataclasses.replace(local, retry_total=5))


def test_emulator_requests_carry_the_emulator_token(azure, control):
    from cloud.azure_vm import get

    get(azure, name="ws-000000000000")

    assert [r["status"] for r in control.requests()] == [404]


def test_a_hung_arm_ends_a_call_at_the_read_timeout(azure, control):
    """azure-core's own read timeout is 300 s per attempt: a hung ARM held the caller."""
    import time

    from cloud import azure_vm
    from cloud.errors import CloudError

    hurried = dataclasses.replace(azure, read_timeout=0.3, retry_total=0)
    control.hang(60)
    started = time.monotonic()
    try:
        with pytest.raises(CloudError) as failed:
            azure_vm.get(hurried, name="vm-hung")
    finally:
        control.hang(0)
    assert failed.value.transient and time.monotonic() - started < 3
