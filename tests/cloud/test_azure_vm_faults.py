"""Every fault the emulator can inject, as a caller of the adapter sees it."""

import dataclasses
from itertools import pairwise

import pytest

from cloud.azure_vm import begin, delete_leftovers, get, vm_names
from cloud.errors import CloudError

from .support import T4_FAMILY, arm_requests, resume

VM_PUTS = ("PUT", "/virtualMachines/")


def create(azure, spec):
    name = vm_names(spec.workspace_id).vm
    return resume(azure, "create", name=name, token=begin(azure, "create", name=name, spec=spec))


def run(azure, operation, name):
    return resume(azure, operation, name=name, token=begin(azure, operation, name=name))


def assert_nothing_left(control):
    sim = control.state()
    assert (sim["virtualMachines"], sim["networkInterfaces"], sim["disks"]) == ([], [], [])


# --- throttling -----------------------------------------------------------------------------


def test_throttling_within_retry_total_is_absorbed_after_retry_after(azure, control, spec):
    control.inject("vm.create", "throttle", count=2, retry_after=1)

    state = create(azure, spec)

    puts = arm_requests(control, *VM_PUTS)
    assert [r["status"] for r in puts] == [429, 429, 201]
    assert all(later["t"] - earlier["t"] >= 0.95 for earlier, later in pairwise(puts))
    assert state.power_state == "running"


def test_throttling_beyond_retry_total_is_transient_with_retry_after(azure, control, spec):
    control.inject("vm.create", "throttle", count=3, retry_after=1)

    with pytest.raises(CloudError) as caught:
        begin(azure, "create", name=vm_names(spec.workspace_id).vm, spec=spec)

    err = caught.value
    assert (err.code, err.status, err.transient, err.retry_after) == (
        "TooManyRequests",
        429,
        True,
        1.0,
    )
    assert "throttled" in err.message
    assert len(arm_requests(control, *VM_PUTS)) == 3  # one try plus retry_total retries


def test_throttled_start_is_retried_although_it_is_a_post(azure, control, spec):
    name = create(azure, spec).name
    run(azure, "deallocate", name)
    control.inject("vm.start", "throttle", count=1)

    assert run(azure, "start", name).power_state == "running"
    assert [r["status"] for r in arm_requests(control, "POST", "/start")] == [429, 202]


# --- transient faults: the same call succeeds later ----------------------------------------------


TRANSIENT = [
    # kind, count that outlasts the SDK's own retries, status, code
    ("throttle", 3, 429, "TooManyRequests"),
    ("conflict", 1, 409, "Conflict"),  # a 409 is not retried by the SDK
    ("server_error", 3, 500, "InternalExecutionError"),
    ("unavailable", 3, 503, "ServiceUnavailable"),
]


@pytest.mark.parametrize("kind, count, status, code", TRANSIENT)
def test_transient_create_failure_can_be_retried(azure, control, spec, kind, count, status, code):
    name = vm_names(spec.workspace_id).vm
    control.inject("vm.create", kind, count=count)

    with pytest.raises(CloudError) as caught:
        begin(azure, "create", name=name, spec=spec)

    assert (caught.value.code, caught.value.status, caught.value.transient) == (code, status, True)
    assert caught.value.message
    token = begin(azure, "create", name=name, spec=spec)  # the caller's retry
    assert resume(azure, "create", name=name, token=token).power_state == "running"


@pytest.mark.parametrize("kind, count, status, code", TRANSIENT)
def test_transient_nic_failure_can_be_retried(azure, control, spec, kind, count, status, code):
    name = vm_names(spec.workspace_id).vm
    control.inject("nic.create", kind, count=count)

    with pytest.raises(CloudError) as caught:
        begin(azure, "create", name=name, spec=spec)

    assert (caught.value.code, caught.value.status, caught.value.transient) == (code, status, True)
    assert arm_requests(control, *VM_PUTS) == []
    assert create(azure, spec).power_state == "running"


@pytest.mark.parametrize("kind, count, status, code", TRANSIENT)
@pytest.mark.parametrize("operation", ["start", "deallocate", "delete"])
def test_transient_failure_of_an_action_can_be_retried(
    azure, control, spec, operation, kind, count, status, code
):
    name = create(azure, spec).name
    if operation == "start":
        run(azure, "deallocate", name)
    control.inject(f"vm.{operation}", kind, count=count)

    with pytest.raises(CloudError) as caught:
        begin(azure, operation, name=name)

    assert (caught.value.code, caught.value.status, caught.value.transient) == (code, status, True)
    run(azure, operation, name)  # the caller's retry goes through


@pytest.mark.parametrize("kind, count, status, code", TRANSIENT)
def test_failed_polls_leave_the_token_usable(azure, control, spec, kind, count, status, code):
    name = vm_names(spec.workspace_id).vm
    token = begin(azure, "create", name=name, spec=spec)
    control.inject("operation.get", kind, count=count)

    with pytest.raises(CloudError) as caught:
        resume(azure, "create", name=name, token=token)

    assert (caught.value.code, caught.value.status, caught.value.transient) == (code, status, True)
    assert resume(azure, "create", name=name, token=token).power_state == "running"
    assert len(arm_requests(control, *VM_PUTS)) == 1


def test_transient_failure_of_get_is_raised(azure, control, spec):
    name = create(azure, spec).name
    control.inject("vm.get", "unavailable", count=3)

    with pytest.raises(CloudError) as caught:
        get(azure, name=name)

    assert (caught.value.code, caught.value.transient) == ("ServiceUnavailable", True)
    assert get(azure, name=name).power_state == "running"


def test_unreachable_endpoint_is_transient(azure):
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    offline = dataclasses.replace(azure, endpoint=f"http://127.0.0.1:{port}")

    with pytest.raises(CloudError) as caught:
        get(offline, name="ws-000000000000")

    assert (caught.value.status, caught.value.transient) == (None, True)


# --- permanent faults: cleanup leaves nothing behind -----------------------------------------


@pytest.mark.parametrize(
    "kind, code",
    [
        ("allocation_failed", "AllocationFailed"),
        ("zonal_allocation_failed", "ZonalAllocationFailed"),
    ],
)
def test_allocation_failure_is_permanent_and_cleaned_up(azure, control, spec, kind, code):
    name = vm_names(spec.workspace_id).vm
    control.inject("vm.create", kind)
    token = begin(azure, "create", name=name, spec=spec)

    with pytest.raises(CloudError) as caught:
        resume(azure, "create", name=name, token=token)

    err = caught.value
    assert (err.code, err.status, err.transient) == (code, None, False)
    assert err.message.startswith("Allocation failed. We do not have sufficient capacity")
    assert get(azure, name=name).provisioning_state == "Failed"

    delete_leftovers(azure, name=name)

    assert_nothing_left(control)
    assert get(azure, name=name) is None


def test_create_without_capacity_fails_like_an_injected_allocation_failure(azure, control, spec):
    control.set_capacity("eastus", spec.vm_size, 0)
    name = vm_names(spec.workspace_id).vm
    token = begin(azure, "create", name=name, spec=spec)

    with pytest.raises(CloudError) as caught:
        resume(azure, "create", name=name, token=token)

    assert (caught.value.code, caught.value.transient) == ("AllocationFailed", False)
    delete_leftovers(azure, name=name)
    assert_nothing_left(control)


def test_allocation_failure_on_start_is_permanent_and_keeps_the_vm(azure, control, spec):
    name = create(azure, spec).name
    run(azure, "deallocate", name)
    control.inject("vm.start", "allocation_failed")
    token = begin(azure, "start", name=name)

    with pytest.raises(CloudError) as caught:
        resume(azure, "start", name=name, token=token)

    assert (caught.value.code, caught.value.transient) == ("AllocationFailed", False)
    assert get(azure, name=name).power_state == "deallocated"
    assert len(control.state()["disks"]) == 1


REFUSED = [
    ("sku_not_available", "SkuNotAvailable", "is currently not available in location 'eastus'"),
    ("quota", "OperationNotAllowed", f"exceeding approved {T4_FAMILY} Cores quota"),
]


@pytest.mark.parametrize("kind, code, wording", REFUSED)
def test_refused_create_is_permanent_with_azures_words(azure, control, spec, kind, code, wording):
    name = vm_names(spec.workspace_id).vm
    control.inject("vm.create", kind)

    with pytest.raises(CloudError) as caught:
        begin(azure, "create", name=name, spec=spec)

    err = caught.value
    assert (err.code, err.status, err.transient) == (code, 409, False)
    assert wording in err.message
    assert str(err) == f"{code}: {err.message}"

    delete_leftovers(azure, name=name)

    assert_nothing_left(control)


def test_exhausted_quota_refuses_create(azure, control, spec):
    control.set_quota("eastus", T4_FAMILY, 0)
    name = vm_names(spec.workspace_id).vm

    with pytest.raises(CloudError) as caught:
        begin(azure, "create", name=name, spec=spec)

    assert (caught.value.code, caught.value.transient) == ("OperationNotAllowed", False)
    assert "Current Limit: 0" in caught.value.message
    delete_leftovers(azure, name=name)
    assert_nothing_left(control)


def test_restricted_size_refuses_create(azure, control, spec):
    control.restrict_sku("eastus", spec.vm_size)
    name = vm_names(spec.workspace_id).vm

    with pytest.raises(CloudError) as caught:
        begin(azure, "create", name=name, spec=spec)

    assert (caught.value.code, caught.value.transient) == ("SkuNotAvailable", False)
    delete_leftovers(azure, name=name)
    assert_nothing_left(control)


def test_permanent_nic_failure_leaves_nothing_behind(azure, control, spec):
    broken = dataclasses.replace(azure, subnet_id="")

    with pytest.raises(CloudError) as caught:
        begin(broken, "create", name=vm_names(spec.workspace_id).vm, spec=spec)

    assert (caught.value.status, caught.value.transient) == (400, False)
    assert arm_requests(control, *VM_PUTS) == []
    assert_nothing_left(control)


def test_cleanup_that_fails_midway_finishes_on_the_next_call(azure, control, spec):
    name = vm_names(spec.workspace_id).vm
    control.inject("vm.create", "allocation_failed")
    token = begin(azure, "create", name=name, spec=spec)
    with pytest.raises(CloudError):
        resume(azure, "create", name=name, token=token)
    control.inject("disk.delete", "server_error", count=3)

    with pytest.raises(CloudError) as caught:
        delete_leftovers(azure, name=name)

    assert (caught.value.code, caught.value.transient) == ("InternalExecutionError", True)
    sim = control.state()
    assert (sim["virtualMachines"], sim["networkInterfaces"]) == ([], [])
    assert [d["name"] for d in sim["disks"]] == [f"{name}-osdisk"]

    delete_leftovers(azure, name=name)
    assert_nothing_left(control)


def test_delete_that_fails_on_the_nic_reports_it_and_can_be_finished(azure, control, spec):
    name = create(azure, spec).name
    control.inject("nic.delete", "conflict")
    token = begin(azure, "delete", name=name)

    with pytest.raises(CloudError) as caught:
        resume(azure, "delete", name=name, token=token)

    assert (caught.value.code, caught.value.transient) == ("Conflict", True)
    assert control.state()["disks"] == []  # the disk step still ran
    delete_leftovers(azure, name=name)
    assert_nothing_left(control)
