"""ARM protocol details: api-version, bad input, unknown routes, operations, the request log."""

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_missing_api_version_is_rejected_like_arm(arm):
    reply = arm.call("GET", arm.vm_path("vm1"), api=None)

    assert reply.status == 400
    assert reply.code == "MissingApiVersionParameter"
    assert reply.headers["x-ms-error-code"] == "MissingApiVersionParameter"
    assert reply.body["error"]["message"] == (
        "The api-version query parameter (?api-version=) is required for all requests."
    )


def test_any_api_version_is_accepted(arm):
    assert arm.call("GET", arm.vm_path("vm1"), api="1999-01-01").status == 404


def test_malformed_json_is_a_400_arm_error(arm, ctl):
    for raw in (b"{not json", b"[1, 2]", b"\xff\xfe"):
        reply = arm.call("PUT", arm.vm_path("vm1"), raw=raw)

        assert reply.status == 400
        assert reply.code == "InvalidRequestContent"
        assert reply.body["error"]["details"] == []
    assert ctl.state()["virtualMachines"] == []


def test_unknown_paths_are_404_invalid_resource_type(arm):
    for path in (
        "/nothing/here",
        f"/subscriptions/{arm.SUB}/resourceGroups/{arm.RG}/providers/Microsoft.Compute/widgets/w",
        arm.vm_path("vm1") + "/explode",
    ):
        reply = arm.call("GET", path)

        assert reply.status == 404
        assert reply.code == "InvalidResourceType"


def test_unsupported_method_is_405_with_an_arm_body(arm):
    reply = arm.call("PATCH", arm.nic_id("nic-a"), {})

    assert reply.status == 405
    assert reply.code == "MethodNotAllowed"


def test_unknown_operation_id_is_404(arm):
    path = f"/subscriptions/{arm.SUB}/providers/Microsoft.Compute/locations/eastus/operations/nope"

    reply = arm.call("GET", path)

    assert (reply.status, reply.code) == (404, "ResourceNotFound")


def test_request_log_records_every_arm_request_in_order(arm, ctl):
    arm.put_nic("nic-a")
    arm.call("GET", "/nothing/here")
    arm.call("PUT", arm.vm_path("vm1"), raw=b"{")

    log = ctl.requests()

    assert [(r["method"], r["path"], r["status"]) for r in log] == [
        ("PUT", arm.nic_id("nic-a"), 201),
        ("GET", "/nothing/here", 404),
        ("PUT", arm.vm_path("vm1"), 400),
    ]
    assert log[0]["t"] <= log[1]["t"] <= log[2]["t"]
    assert all(not r["path"].startswith("/_sim") for r in log)


def test_state_lists_operations_and_reset_empties_everything(arm, ctl):
    arm.wait(arm.put_vm("vm1"))

    state = ctl.state()
    ctl.reset()

    assert [op["status"] for op in state["operations"]] == ["Succeeded", "Succeeded"]
    empty = ctl.state()
    assert empty["virtualMachines"] == [] and empty["operations"] == [] and ctl.requests() == []


def test_latency_control_keeps_operations_in_progress(arm, ctl):
    ctl.set_latency(60, retry_after=4)

    reply = arm.put_vm("vm1")

    assert reply.headers["retry-after"] == "4"
    assert arm.call("GET", reply.headers["azure-asyncoperation"], api=None).body["status"] == (
        "InProgress"
    )


def test_control_requests_reject_bad_json(arm):
    reply = arm.call("POST", "/_sim/capacity", raw=b"nope", api=None)

    assert reply.status == 400
    assert reply.code == "InvalidRequestContent"


def test_unknown_control_endpoint_is_404(arm):
    assert arm.call("POST", "/_sim/explode", {}, api=None).status == 404


def test_command_line_entry_point_serves_arm():
    """`python -m cloudsim --port 0` logs its URL and answers ARM requests."""
    command = [sys.executable, "-m", "cloudsim", "--port", "0", "--latency", "0.1"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        banner = process.stderr.readline()
        url = re.search(r"http://[\d.]+:\d+", banner).group(0)
        path = "/subscriptions/s/providers/Microsoft.Compute/locations/eastus/usages"
        with urllib.request.urlopen(f"{url}{path}?api-version=2024-07-01", timeout=5) as reply:
            names = [u["name"]["value"] for u in json.loads(reply.read())["value"]]
        assert names[0] == "cores"
        assert "listening" in banner
        request_line = process.stderr.readline()
        assert "GET /subscriptions/s/providers" in request_line and " 200 " in request_line
    finally:
        process.terminate()
        process.wait(timeout=5)


def _vm_variants(arm) -> list:
    good = arm.vm_body("nic-a")
    props = good["properties"]
    return [
        {**good, "location": 5},
        {**good, "properties": ["not", "an", "object"]},
        {**good, "properties": {**props, "storageProfile": "x"}},
        {**good, "properties": {**props, "storageProfile": {"osDisk": []}}},
        {**good, "properties": {**props, "osProfile": "x"}},
        {**good, "properties": {**props, "networkProfile": {"networkInterfaces": [1]}}},
        {**good, "properties": {**props, "networkProfile": {"networkInterfaces": [{"id": 5}]}}},
        {
            **good,
            "properties": {
                **props,
                "networkProfile": {
                    "networkInterfaces": [{"id": arm.nic_id("nic-a"), "properties": 1}]
                },
            },
        },
    ]


def test_odd_bodies_get_4xx_arm_errors_never_a_server_error(arm, ctl):
    arm.put_nic("nic-a")
    nic_bodies = [{"location": 1}, {"location": "eastus", "properties": {"ipConfigurations": "x"}}]
    calls = [("PUT", arm.vm_path("vm1"), body) for body in _vm_variants(arm)]
    calls += [("PUT", arm.nic_id("nic-b"), body) for body in nic_bodies]
    calls += [
        ("POST", "/_sim/faults", {"op": 5, "kind": "throttle"}),
        ("POST", "/_sim/capacity", {"location": "eastus", "vm_size": 1, "available": "x"}),
        ("POST", "/_sim/latency", {"seconds": -1}),
        ("POST", "/_sim/skus/restrict", {"location": "eastus", "vm_size": "x", "restricted": 1}),
    ]

    for method, path, body in calls:
        reply = arm.call(method, path, body, api=None if path.startswith("/_sim") else "2024-07-01")

        assert 400 <= reply.status < 500, (path, body, reply)
        assert reply.code, reply
    assert ctl.state()["virtualMachines"] == []
