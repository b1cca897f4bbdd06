"""Injected faults: consumed per operation, FIFO, with Azure's status codes and bodies."""

import pytest


def test_throttle_answers_429_with_retry_after_then_the_next_call_succeeds(arm, ctl):
    ctl.inject("vm.create", "throttle", count=1, retry_after=7)

    throttled = arm.put_vm("vm1")
    accepted = arm.put_vm("vm1")

    assert throttled.status == 429
    assert throttled.code == "TooManyRequests"
    assert throttled.headers["retry-after"] == "7"
    assert throttled.headers["x-ms-error-code"] == "TooManyRequests"
    assert throttled.body["error"]["message"].startswith(
        "The request is being throttled as the limit has been reached for operation group"
    )
    assert accepted.status == 201


def test_count_queues_that_many_faults(arm, ctl):
    arm.wait(arm.put_vm("vm1"))
    ctl.inject("vm.get", "server_error", count=2)

    replies = [arm.call("GET", arm.vm_path("vm1")) for _ in range(3)]

    assert [r.status for r in replies] == [500, 500, 200]
    assert replies[0].code == "InternalExecutionError"
    assert replies[0].body["error"]["message"] == (
        "An internal execution error occurred. Please retry later."
    )


def test_faults_of_different_kinds_are_served_in_fifo_order(arm, ctl):
    arm.wait(arm.put_vm("vm1"))
    ctl.inject("vm.get", "unavailable", retry_after=3)
    ctl.inject("vm.get", "conflict")

    first, second = arm.call("GET", arm.vm_path("vm1")), arm.call("GET", arm.vm_path("vm1"))

    assert (first.status, first.code, first.headers["retry-after"]) == (
        503,
        "ServiceUnavailable",
        "3",
    )
    assert (second.status, second.code) == (409, "Conflict")


def test_faults_apply_only_to_their_operation(arm, ctl):
    ctl.inject("vm.update", "throttle")

    created = arm.put_vm("vm1")  # A create, not an update.
    arm.wait(created)
    updated = arm.put_vm("vm1")

    assert created.status == 201
    assert updated.status == 429


@pytest.mark.parametrize(
    ("op", "call"),
    [
        ("vm.delete", lambda arm: arm.call("DELETE", arm.vm_path("vm1"))),
        ("vm.start", lambda arm: arm.call("POST", arm.vm_path("vm1") + "/start")),
        ("vm.deallocate", lambda arm: arm.call("POST", arm.vm_path("vm1") + "/deallocate")),
        ("nic.create", lambda arm: arm.put_nic("nic-x")),
        ("nic.delete", lambda arm: arm.call("DELETE", arm.nic_id("vm1-nic"))),
        ("disk.delete", lambda arm: arm.call("DELETE", arm.disk_path("vm1-osdisk"))),
    ],
)
def test_synchronous_faults_change_nothing(arm, ctl, op, call):
    arm.wait(arm.put_vm("vm1"))
    before = ctl.state()
    ctl.inject(op, "conflict")

    reply = call(arm)

    assert (reply.status, reply.code) == (409, "Conflict")
    after = ctl.state()
    for kind in ("virtualMachines", "networkInterfaces", "disks"):
        assert after[kind] == before[kind]


def test_operation_polling_can_be_throttled(arm, ctl):
    reply = arm.put_vm("vm1")
    ctl.inject("operation.get", "throttle", retry_after=2)

    throttled = arm.call("GET", reply.headers["azure-asyncoperation"], api=None)

    assert (throttled.status, throttled.headers["retry-after"]) == (429, "2")
    assert arm.wait(reply)["status"] == "Succeeded"


@pytest.mark.parametrize(
    ("kind", "code"),
    [
        ("allocation_failed", "AllocationFailed"),
        ("zonal_allocation_failed", "ZonalAllocationFailed"),
    ],
)
def test_allocation_faults_fail_the_create_lro(arm, ctl, kind, code):
    ctl.inject("vm.create", kind)

    reply = arm.put_vm("vm1")
    status = arm.wait(reply)

    assert reply.status == 201
    assert (status["status"], status["error"]["code"]) == ("Failed", code)
    assert arm.vm("vm1")["properties"]["provisioningState"] == "Failed"
    assert arm.wait(arm.put_vm("vm2"))["status"] == "Succeeded"  # One fault, one create.


def test_allocation_fault_on_start_leaves_the_vm_deallocated(arm, ctl):
    arm.wait(arm.put_vm("vm1"))
    arm.wait(arm.call("POST", arm.vm_path("vm1") + "/deallocate"))
    ctl.inject("vm.start", "allocation_failed")

    status = arm.wait(arm.call("POST", arm.vm_path("vm1") + "/start"))

    assert status["error"]["code"] == "AllocationFailed"
    assert arm.power("vm1")[1] == "PowerState/deallocated"


def test_sku_not_available_fault_is_synchronous_and_creates_nothing(arm, ctl):
    arm.put_nic("nic-a")
    ctl.inject("vm.create", "sku_not_available")

    reply = arm.put_vm("vm1", nic="nic-a")

    assert (reply.status, reply.code) == (409, "SkuNotAvailable")
    assert (
        f"Restrictions: {arm.A100}' is currently not available in location 'eastus'"
        in (reply.body["error"]["message"])
    )
    state = ctl.state()
    assert state["virtualMachines"] == [] and state["disks"] == []


def test_quota_fault_is_synchronous_with_the_quota_message(arm, ctl):
    ctl.inject("vm.create", "quota")

    reply = arm.put_vm("vm1")

    assert (reply.status, reply.code) == (409, "OperationNotAllowed")
    assert reply.body["error"]["message"].startswith(
        "Operation could not be completed as it results in exceeding approved "
        "standardNCADSA100v4Family Cores quota. Additional details - Deployment Model: "
        "Resource Manager, Location: eastus, Current Limit: 96, Current Usage: 0, "
        "Additional Required: 24, (Minimum) New Limit Required: 24."
    )
    assert ctl.state()["virtualMachines"] == []


def test_a_quota_fault_on_a_spot_vm_names_the_spot_quota(arm, ctl):
    ctl.inject("vm.create", "quota")

    reply = arm.put_vm("vm1", priority="spot")

    assert (reply.status, reply.code) == (409, "OperationNotAllowed")
    assert reply.body["error"]["message"].startswith(
        "Operation could not be completed as it results in exceeding approved "
        "LowPriorityCores quota. Additional details - Deployment Model: Resource Manager, "
        "Location: eastus, Current Limit: 350, Current Usage: 0, Additional Required: 24, "
    )


def test_reset_clears_queued_faults(arm, ctl):
    ctl.inject("vm.create", "throttle", count=5)

    ctl.reset()

    assert arm.put_vm("vm1").status == 201


@pytest.mark.parametrize(
    "body",
    [
        {"op": "vm.fly", "kind": "throttle"},
        {"op": "vm.get", "kind": "gremlins"},
        {"op": "vm.get", "kind": "allocation_failed"},
        {"op": "vm.get", "kind": "throttle", "count": 0},
        {"op": "vm.get"},
    ],
)
def test_control_api_rejects_faults_it_cannot_honour(arm, body):
    reply = arm.call("POST", "/_sim/faults", body, api=None)

    assert reply.status == 400
    assert reply.code == "InvalidControlRequest"


def test_a_hang_holds_arm_requests_until_lifted_while_the_control_api_answers(arm, ctl):
    import threading
    import time

    ctl.hang(30)
    replies, started = [], time.monotonic()
    held = threading.Thread(target=lambda: replies.append(arm.call("GET", arm.vm_path("vm1"))))
    held.start()
    held.join(0.5)
    assert held.is_alive() and not replies  # ARM hangs ...
    assert ctl.state() is not None  # ... /_sim does not

    ctl.hang(0)
    held.join(5)

    assert [r.status for r in replies] == [404]
    assert time.monotonic() - started < 5
