"""The NVIDIA GPU Driver Extension through the real SDK against the emulator."""

import time

import pytest

from cloud import azure_extensions
from cloud.azure_vm import begin, vm_names
from cloud.errors import CloudError

from .support import arm_requests, resume


@pytest.fixture
def vm(azure, spec):
    name = vm_names(spec.workspace_id).vm
    resume(azure, "create", name=name, token=begin(azure, "create", name=name, spec=spec))
    return name


def settled(azure, vm, timeout=5.0):
    deadline = time.time() + timeout
    while True:
        state = azure_extensions.get(azure, vm=vm)
        if state.succeeded or state.failed or time.time() > deadline:
            return state
        time.sleep(0.02)


def test_put_sends_microsofts_documented_body_and_returns_at_once(azure, control, vm):
    control.extensions(seconds=60)
    token = azure_extensions.put(
        azure, vm=vm, location="eastus", settings={"installCUDA": True, "updateOS": False}
    )
    assert token
    (put,) = arm_requests(control, "PUT", "/extensions/")
    assert put["path"].endswith(f"/virtualMachines/{vm}/extensions/NvidiaGpuDriverLinux")
    state = azure_extensions.get(azure, vm=vm)
    assert state.provisioning_state == "Creating"
    assert not state.succeeded and not state.failed and state.exit_code is None


def test_a_finished_install_reads_succeeded_with_exit_code_zero(azure, control, vm):
    azure_extensions.put(azure, vm=vm, location="eastus", settings={})
    state = settled(azure, vm)
    assert state.succeeded and state.exit_code == 0
    assert state.meaning == "Operation successful"


@pytest.mark.parametrize(
    ("fault", "code", "meaning"),
    [
        ("extension_no_gpu", 11, "NVIDIA GPU not found on this VM size"),
        ("extension_size_unsupported", 13, "VM size not supported"),
    ],
)
def test_a_failed_install_carries_azures_exit_code_and_message(
    azure, control, vm, fault, code, meaning
):
    control.inject("vm.extension.create", fault)
    azure_extensions.put(azure, vm=vm, location="eastus", settings={})
    state = settled(azure, vm)
    assert state.failed and state.exit_code == code and state.meaning == meaning
    assert f"Exit code {code}" in state.message


def test_no_extension_reads_none_and_delete_removes_it(azure, control, vm):
    assert azure_extensions.get(azure, vm=vm) is None
    azure_extensions.put(azure, vm=vm, location="eastus", settings={})
    settled(azure, vm)
    azure_extensions.delete(azure, vm=vm)
    deadline = time.time() + 5
    while azure_extensions.get(azure, vm=vm) is not None:
        assert time.time() < deadline
        time.sleep(0.02)


def test_azures_refusals_are_cloud_errors(azure, control, vm):
    control.inject("vm.extension.create", "throttle", count=5, retry_after=0)
    with pytest.raises(CloudError) as caught:
        azure_extensions.put(azure, vm=vm, location="eastus", settings={})
    assert caught.value.transient and caught.value.status == 429


def test_a_stopped_vm_is_refused_permanently(azure, control, vm):
    resume(azure, "deallocate", name=vm, token=begin(azure, "deallocate", name=vm))
    with pytest.raises(CloudError) as caught:
        azure_extensions.put(azure, vm=vm, location="eastus", settings={})
    assert caught.value.code == "OperationNotAllowed" and not caught.value.transient


def test_unknown_settings_are_refused_before_anything_is_sent(azure, control, vm):
    with pytest.raises(ValueError, match="DRIVER_URL"):
        azure_extensions.put(azure, vm=vm, location="eastus", settings={"DRIVER_URL": "x"})
    assert arm_requests(control, "PUT", "/extensions/") == []
