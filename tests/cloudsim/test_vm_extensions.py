"""VM extensions as Azure answers them (REST examples VirtualMachineExtension_*), and the NVIDIA
GPU Driver Extension: its time, its exit codes 11 and 13, its reboot, and driver-less VMs."""

import pytest

from cloudsim import SimControlError

NVIDIA = {
    "publisher": "Microsoft.HpcCompute",
    "type": "NvidiaGpuDriverLinux",
    "typeHandlerVersion": "1.6",
    "autoUpgradeMinorVersion": True,
    "settings": {"updateOS": False, "installCUDA": True},
}
HPC_IMAGE = {
    "publisher": "microsoft-dsvm",
    "offer": "ubuntu-hpc",
    "sku": "2204",
    "version": "22.04.2024102301",
}


def ext_path(arm, vm, name="NvidiaGpuDriverLinux"):
    return f"{arm.vm_path(vm)}/extensions/{name}"


def running_vm(arm, name="vm1", **kwargs):
    assert arm.wait(arm.put_vm(name, **kwargs))["status"] == "Succeeded"


def put_ext(arm, vm="vm1", properties=None, name="NvidiaGpuDriverLinux"):
    body = {"location": "eastus", "properties": properties or NVIDIA}
    return arm.call("PUT", ext_path(arm, vm, name), body)


def view(arm, vm="vm1", name="NvidiaGpuDriverLinux"):
    reply = arm.call("GET", ext_path(arm, vm, name) + "?$expand=instanceView")
    assert reply.status == 200, reply
    return reply.body


def test_put_answers_201_creating_then_succeeds_as_an_lro(arm, ctl, finish):
    running_vm(arm)
    ctl.extensions(seconds=60)
    reply = put_ext(arm)
    assert reply.status == 201
    body = reply.body
    assert body["id"] == ext_path(arm, "vm1")
    assert body["type"] == "Microsoft.Compute/virtualMachines/extensions"
    assert body["properties"]["provisioningState"] == "Creating"
    assert body["properties"]["typeHandlerVersion"] == "1.6"
    status = view(arm)["properties"]["instanceView"]["statuses"][0]
    assert status["code"] == "ProvisioningState/transitioning"
    assert arm.call("GET", reply.headers["azure-asyncoperation"], api=None).body["status"] == (
        "InProgress"
    )
    finish()
    got = view(arm)["properties"]
    assert got["provisioningState"] == "Succeeded"
    assert got["instanceView"]["statuses"][0]["code"] == "ProvisioningState/succeeded"
    assert got["instanceView"]["type"] == "Microsoft.HpcCompute.NvidiaGpuDriverLinux"
    assert "instanceView" not in arm.call("GET", ext_path(arm, "vm1")).body["properties"]


def test_protected_settings_are_never_echoed(arm):
    running_vm(arm)
    reply = put_ext(arm, properties={**NVIDIA, "protectedSettings": {"secret": "s3"}})
    assert "protectedSettings" not in reply.body["properties"]
    assert "s3" not in str(view(arm))


@pytest.mark.parametrize(
    ("size", "fault", "code"),
    [
        ("Standard_NV8as_v4", None, 11),  # an AMD GPU: NVIDIA's driver finds none
        ("Standard_NC24ads_A100_v4", "extension_size_unsupported", 13),
    ],
)
def test_a_size_it_cannot_drive_fails_with_the_handlers_exit_code(arm, ctl, size, fault, code):
    running_vm(arm, size=size)
    if fault:
        ctl.inject("vm.extension.create", fault)
    status = arm.wait(put_ext(arm))
    assert status["status"] == "Failed"
    assert status["error"]["code"] == "VMExtensionProvisioningError"
    assert f"Exit code {code}" in status["error"]["message"]
    got = view(arm)["properties"]
    assert got["provisioningState"] == "Failed"
    assert got["instanceView"]["statuses"][0]["code"] == f"ProvisioningState/failed/{code}"
    assert got["instanceView"]["substatuses"][0]["message"].startswith(f"Exit code {code}: ")


def test_an_injected_exit_code_fails_the_next_install_only(arm, ctl):
    running_vm(arm)
    ctl.inject("vm.extension.create", "extension_no_gpu")
    assert "Exit code 11" in arm.wait(put_ext(arm))["error"]["message"]
    assert arm.wait(put_ext(arm))["status"] == "Succeeded"  # a PUT again runs it again


def test_exit_code_kinds_apply_to_the_extension_create_only(ctl):
    with pytest.raises(SimControlError):
        ctl.inject("vm.create", "extension_size_unsupported")


def test_a_throttled_put_is_a_429(arm, ctl):
    running_vm(arm)
    ctl.inject("vm.extension.create", "throttle", retry_after=3)
    reply = put_ext(arm)
    assert reply.status == 429 and reply.headers["retry-after"] == "3"


def test_extensions_need_a_running_vm(arm, finish):
    running_vm(arm)
    arm.call("POST", arm.vm_path("vm1") + "/deallocate")
    finish()
    reply = put_ext(arm)
    assert reply.status == 409 and reply.code == "OperationNotAllowed"


def test_get_and_delete_of_what_is_not_there(arm):
    assert arm.call("GET", ext_path(arm, "nope")).code == "ParentResourceNotFound"
    running_vm(arm)
    assert arm.call("GET", ext_path(arm, "vm1")).status == 404
    assert arm.call("DELETE", ext_path(arm, "vm1")).status == 204


def test_delete_is_an_lro_and_the_list_follows(arm, finish):
    running_vm(arm)
    arm.wait(put_ext(arm))
    listed = arm.call("GET", arm.vm_path("vm1") + "/extensions").body["value"]
    assert [e["name"] for e in listed] == ["NvidiaGpuDriverLinux"]
    reply = arm.call("DELETE", ext_path(arm, "vm1"))
    assert reply.status == 202 and reply.headers["location"]
    finish()
    assert arm.call("GET", ext_path(arm, "vm1")).status == 404
    assert arm.call("GET", arm.vm_path("vm1") + "/extensions").body["value"] == []


def _driver(sim, vm="vm1"):
    with sim.state.lock:
        return sim.state.vm(arm_id(vm)).driver


def arm_id(vm):
    from tests.cloudsim.conftest import resource_path

    return resource_path("Microsoft.Compute/virtualMachines", vm)


def test_an_hpc_image_carries_the_driver_and_a_plain_one_gets_it_from_the_extension(arm, sim):
    hpc = arm.vm_body("hpc-nic", disk="hpc-osdisk")
    hpc["properties"]["storageProfile"]["imageReference"] = HPC_IMAGE
    arm.put_nic("hpc-nic")
    assert arm.wait(arm.call("PUT", arm.vm_path("hpc"), hpc))["status"] == "Succeeded"
    running_vm(arm)
    assert _driver(sim, "hpc") is True
    assert _driver(sim) is False
    arm.wait(put_ext(arm))
    assert _driver(sim) is True


def test_a_failed_install_leaves_no_driver_and_another_extension_installs_none(arm, sim, ctl):
    running_vm(arm)
    ctl.inject("vm.extension.create", "extension_failed")
    arm.wait(put_ext(arm))
    other = {
        "publisher": "Microsoft.Azure.Monitor",
        "type": "AzureMonitorLinuxAgent",
        "typeHandlerVersion": "1.33",
    }
    assert arm.wait(put_ext(arm, properties=other, name="monitor"))["status"] == "Succeeded"
    assert _driver(sim) is False


def test_the_install_reboots_the_guest_in_its_middle(arm, sim, ctl):
    running_vm(arm)
    ctl.extensions(seconds=100)
    put_ext(arm)
    with sim.state.lock:
        vm = sim.state.vm(arm_id("vm1"))
        start, end = vm.rebooting
        assert vm.power == "running"
    assert 19 < end - start < 21 and start > vm.extensions["nvidiagpudriverlinux"].started


def test_the_extension_settings_are_shown_by_the_control_api(ctl):
    assert ctl.extensions(seconds=2, drivers_required=True) == {
        "seconds": 2.0,
        "drivers_required": True,
        "setup_seconds": None,
    }
    assert ctl.extensions(setup_seconds=7)["setup_seconds"] == 7.0


def test_drivers_required_at_start_outlives_a_reset():
    from cloudsim import start_server

    server = start_server(port=0, latency=0.05, retry_after=0)
    try:
        with server.state.lock:
            server.state.drivers_required = True
            server.state.reset()
            assert server.state.extension_play.drivers_required is True
    finally:
        server.shutdown()
