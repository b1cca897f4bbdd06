"""Create, deallocate, start and delete a workspace VM through the real SDK."""

import base64
import time
import uuid
from dataclasses import replace

import pytest

from cloud import azure_vm
from cloud.azure_vm import VmNames, begin, delete_leftovers, get, poll, vm_names
from cloud.clients import compute_client, network_client
from cloud.errors import CloudError

from .support import RESOURCE_GROUP, T4, WORKSPACE_ID, arm_requests, resume


def create(azure, spec):
    name = vm_names(spec.workspace_id).vm
    return resume(azure, "create", name=name, token=begin(azure, "create", name=name, spec=spec))


def run(azure, operation, name):
    return resume(azure, operation, name=name, token=begin(azure, operation, name=name))


def test_vm_names_are_deterministic_per_workspace():
    names = vm_names(uuid.UUID(WORKSPACE_ID))

    assert names == VmNames("ws-3f2b8c1e9a4d", "ws-3f2b8c1e9a4d-nic", "ws-3f2b8c1e9a4d-osdisk")
    assert vm_names(WORKSPACE_ID.upper()) == names
    with pytest.raises(ValueError):
        vm_names("not-a-uuid")


def test_create_brings_up_a_running_vm_with_a_private_ip(azure, spec):
    state = create(azure, spec)

    assert state.name == "ws-3f2b8c1e9a4d"
    assert state.provisioning_state == "Succeeded"
    assert state.power_state == "running"
    assert state.private_ip == "10.0.0.4"
    assert (state.location, state.vm_size) == ("eastus", T4)
    assert state.vm_id
    assert get(azure, name=state.name) == state
    # Plain strings, not the SDK's str-Enums (whose str() is "Type.MEMBER").
    assert {type(v) for v in (state.provisioning_state, state.location, state.vm_size)} == {str}


def test_create_sends_tags_cloud_init_and_ssh_key_and_no_public_ip(azure, control, spec):
    names = vm_names(spec.workspace_id)
    create(azure, spec)

    sim = control.state()
    [vm], [nic] = sim["virtualMachines"], sim["networkInterfaces"]
    assert vm["tags"] == spec.tags
    assert nic["tags"] == spec.tags
    assert base64.b64decode(vm["customData"]).decode() == spec.custom_data
    assert nic["virtualMachine"] == vm["id"]
    assert [d["name"] for d in sim["disks"]] == [names.os_disk]

    props = compute_client(azure).virtual_machines.get(RESOURCE_GROUP, names.vm).properties
    linux = props.os_profile.linux_configuration
    assert linux.disable_password_authentication is True
    assert [(k.path, k.key_data) for k in linux.ssh.public_keys] == [
        ("/home/alice/.ssh/authorized_keys", spec.ssh_public_key)
    ]
    os_disk = props.storage_profile.os_disk
    assert (os_disk.name, os_disk.delete_option, os_disk.disk_size_gb) == (
        names.os_disk,
        "Detach",
        128,
    )
    assert os_disk.managed_disk.storage_account_type == "Premium_LRS"
    image = props.storage_profile.image_reference
    assert (image.publisher, image.offer, image.sku) == (
        "Canonical",
        "0001-com-ubuntu-server-jammy",
        "22_04-lts-gen2",
    )

    # No public IP anywhere: none created, none on the NIC, no inline NIC configuration.
    assert arm_requests(control, contains="publicIPAddresses") == []
    nic_configs = (
        network_client(azure)
        .network_interfaces.get(RESOURCE_GROUP, names.nic)
        .properties.ip_configurations
    )
    assert [c.properties.public_ip_address for c in nic_configs] == [None]
    assert props.network_profile.network_interface_configurations is None


def test_a_vm_without_an_ssh_key_gets_a_key_nobody_holds_and_no_password(azure, spec):
    """Azure refuses a Linux VM with no password and no key; the VM gets a fresh public key
    whose private half was never kept, so nobody can ssh in and sshd takes no password."""
    create(azure, replace(spec, ssh_public_key=""))

    props = compute_client(azure).virtual_machines.get(
        RESOURCE_GROUP, vm_names(spec.workspace_id).vm
    )
    linux = props.properties.os_profile.linux_configuration
    assert linux.disable_password_authentication is True
    [key] = linux.ssh.public_keys
    assert key.path == "/home/alice/.ssh/authorized_keys"
    assert key.key_data.startswith("ssh-ed25519 ") and key.key_data != spec.ssh_public_key
    assert azure_vm.unusable_ssh_key() != azure_vm.unusable_ssh_key()  # never a shared key


def test_begin_returns_a_token_without_waiting(azure, control, spec):
    control.set_latency(0.5)
    name = vm_names(spec.workspace_id).vm

    token = begin(azure, "create", name=name, spec=spec)
    time.sleep(0.2)  # Long enough for a background poller to have shown itself.

    assert isinstance(token, str) and token
    # The NIC is waited for (it is quick); the VM's operation is not polled at all.
    assert arm_requests(control, contains="Microsoft.Compute/locations/eastus/operations") == []
    assert get(azure, name=name).provisioning_state == "Creating"


def test_resume_from_a_saved_token_only_polls(azure, control, spec):
    name = vm_names(spec.workspace_id).vm
    token = begin(azure, "create", name=name, spec=spec)
    sent_by_begin = len(control.requests())
    # A replacement worker: a fresh process has no cached clients.
    compute_client(azure).close()
    network_client(azure).close()
    compute_client.cache_clear()
    network_client.cache_clear()

    state = resume(azure, "create", name=name, token=token)
    again = resume(azure, "create", name=name, token=token)  # a second crash-and-retry

    later = control.requests()[sent_by_begin:]
    # Polls, and once done the tags onto the OS disk (a PATCH each time, harmless): no create.
    assert later and {r["method"] for r in later} == {"GET", "PATCH"}
    assert {r["path"].rsplit("/", 2)[-2] for r in later if r["method"] == "PATCH"} == {"disks"}
    assert len(arm_requests(control, "PUT", "/virtualMachines/")) == 1
    assert state.power_state == again.power_state == "running"


def test_a_created_vms_os_disk_carries_the_vms_tags(azure, control, spec):
    name = create(azure, spec).name
    (disk,) = [d for d in control.state()["disks"] if d["name"] == f"{name}-osdisk"]
    costs = control.costs()
    disk_usage = [u for u in costs["usages"] if u["kind"] == "disk"]
    assert disk_usage and disk_usage[0]["tags"]["workspace"] == spec.workspace_id
    assert disk["name"] and spec.tags["workspace"] == spec.workspace_id


def test_deallocate_keeps_the_disk_and_start_brings_the_vm_back(azure, control, spec):
    name = create(azure, spec).name

    stopped = run(azure, "deallocate", name)

    assert stopped.power_state == "deallocated"
    assert stopped.provisioning_state == "Succeeded"
    assert [(d["name"], d["diskState"]) for d in control.state()["disks"]] == [
        (f"{name}-osdisk", "Reserved")
    ]

    started = run(azure, "start", name)

    assert started.power_state == "running"
    assert started.private_ip == "10.0.0.4"
    assert started.vm_id == stopped.vm_id


def test_delete_removes_vm_nic_and_os_disk(azure, control, spec):
    name = create(azure, spec).name

    assert run(azure, "delete", name) is None

    sim = control.state()
    assert (sim["virtualMachines"], sim["networkInterfaces"], sim["disks"]) == ([], [], [])
    assert get(azure, name=name) is None


def test_get_of_an_unknown_vm_is_none(azure):
    assert get(azure, name="ws-000000000000") is None


def test_delete_leftovers_with_nothing_left_is_a_no_op(azure, control):
    delete_leftovers(azure, name="ws-000000000000")
    delete_leftovers(azure, name="ws-000000000000")

    assert {r["status"] for r in control.requests()} == {204}


def test_delete_of_a_vm_that_is_already_gone_succeeds(azure, control, spec):
    name = create(azure, spec).name
    token = begin(azure, "delete", name=name)
    resume(azure, "delete", name=name, token=token)

    # A retried task may delete again; there is nothing left to do and nothing fails.
    assert run(azure, "delete", name) is None
    assert control.state()["virtualMachines"] == []


@pytest.mark.parametrize(
    "operation, kwargs",
    [
        ("reboot", {}),
        ("start", {"spec": "not-a-spec"}),
    ],
)
def test_begin_rejects_bad_arguments(azure, operation, kwargs):
    with pytest.raises(ValueError):
        begin(azure, operation, name="ws-000000000000", **kwargs)


def test_create_needs_the_spec_of_the_named_workspace(azure, spec):
    with pytest.raises(ValueError):
        begin(azure, "create", name="ws-000000000000", spec=spec)
    with pytest.raises(ValueError):
        begin(azure, "create", name=vm_names(spec.workspace_id).vm)
    assert azure_vm.OPERATIONS == ("create", "start", "deallocate", "delete")


def test_create_begun_twice_converges_on_one_vm(azure, control, spec):
    # A worker that died between begin() and saving the token gets its task retried.
    control.set_latency(0.3)
    name = vm_names(spec.workspace_id).vm
    first = begin(azure, "create", name=name, spec=spec)

    with pytest.raises(CloudError) as caught:
        begin(azure, "create", name=name, spec=spec)  # while the first PUT still runs

    assert (caught.value.code, caught.value.transient) == ("Conflict", True)
    resume(azure, "create", name=name, token=first)
    second = begin(azure, "create", name=name, spec=spec)  # once it is done: a no-op update
    assert resume(azure, "create", name=name, token=second).power_state == "running"
    sim = control.state()
    assert [len(sim[kind]) for kind in ("virtualMachines", "networkInterfaces", "disks")] == [
        1,
        1,
        1,
    ]


@pytest.mark.parametrize("operation", ["start", "deallocate"])
def test_acting_on_a_missing_vm_is_a_permanent_not_found(azure, operation):
    with pytest.raises(CloudError) as caught:
        begin(azure, operation, name="ws-000000000000")

    assert (caught.value.code, caught.value.status, caught.value.transient) == (
        "ResourceNotFound",
        404,
        False,
    )


def test_poll_asks_once_and_reports_progress_without_waiting(azure, control, spec):
    control.set_latency(0.5)
    name = vm_names(spec.workspace_id).vm
    token = begin(azure, "create", name=name, spec=spec)
    requests_before = len(control.requests())

    first = poll(azure, "create", name=name, token=token)

    assert first.done is False and first.state is None
    new = control.requests()[requests_before:]
    assert [r["method"] for r in new] == ["GET"]  # one status read, no second PUT
    time.sleep(0.6)
    last = poll(azure, "create", name=name, token=token)
    assert last.done is True and last.state.power_state == "running"
