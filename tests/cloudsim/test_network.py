"""Network interfaces: create, read, update, delete, IP assignment and in-use protection."""


def test_nic_create_assigns_unique_ips_from_10_0_0_4(arm):
    first, second = arm.put_nic("nic-a"), arm.put_nic("nic-b")

    assert (first.status, second.status) == (201, 201)
    config = first.body["properties"]["ipConfigurations"][0]
    assert config["properties"]["privateIPAddress"] == "10.0.0.4"
    assert config["properties"]["privateIPAllocationMethod"] == "Dynamic"
    assert config["properties"]["subnet"]["id"] == arm.SUBNET
    assert config["id"] == arm.nic_id("nic-a") + "/ipConfigurations/ipconfig1"
    assert second.body["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"] == (
        "10.0.0.5"
    )
    assert first.body["id"] == arm.nic_id("nic-a")
    assert first.body["type"] == "Microsoft.Network/networkInterfaces"
    assert first.body["properties"]["provisioningState"] == "Succeeded"
    assert first.body["tags"] == {"workspace": "w1"}
    assert first.body["etag"]


def test_nic_put_sends_network_async_operation_that_succeeds(arm, sim):
    reply = arm.put_nic("nic-a")

    url = reply.headers["azure-asyncoperation"]
    assert url.startswith(f"{sim.url}/subscriptions/{arm.SUB}/providers/Microsoft.Network/")
    assert arm.wait(reply)["status"] == "Succeeded"


def test_nic_update_returns_200_and_keeps_ip(arm):
    arm.put_nic("nic-a")
    arm.put_nic("nic-b")

    again = arm.put_nic("nic-a", tags={"workspace": "w2"})

    assert again.status == 200
    assert again.body["tags"] == {"workspace": "w2"}
    config = again.body["properties"]["ipConfigurations"][0]
    assert config["properties"]["privateIPAddress"] == "10.0.0.4"


def test_nic_get_returns_resource_or_arm_404(arm):
    arm.put_nic("nic-a")

    assert arm.call("GET", arm.nic_id("nic-a")).body["name"] == "nic-a"
    missing = arm.call("GET", arm.nic_id("nope"))
    assert missing.status == 404
    assert missing.code == "ResourceNotFound"
    assert missing.headers["x-ms-error-code"] == "ResourceNotFound"
    assert missing.body["error"]["message"] == (
        "The Resource 'Microsoft.Network/networkInterfaces/nope' under resource group "
        f"'{arm.RG}' was not found."
    )


def test_nic_lookup_is_case_insensitive_on_provider_and_type(arm):
    arm.put_nic("nic-a")
    path = arm.nic_id("nic-a").replace(
        "Microsoft.Network/networkInterfaces", "microsoft.network/NETWORKINTERFACES"
    )

    assert arm.call("GET", path).status == 200


def test_nic_without_subnet_is_invalid_request_format(arm):
    reply = arm.call("PUT", arm.nic_id("nic-a"), {"location": "eastus", "properties": {}})

    assert reply.status == 400
    assert reply.code == "InvalidRequestFormat"
    assert arm.call("GET", arm.nic_id("nic-a")).status == 404


def test_nic_delete_is_an_lro_then_the_nic_is_gone_and_its_ip_reusable(arm):
    arm.put_nic("nic-a")

    reply = arm.call("DELETE", arm.nic_id("nic-a"))

    assert reply.status == 202
    assert {"azure-asyncoperation", "location", "retry-after"} <= reply.headers.keys()
    assert arm.wait(reply)["status"] == "Succeeded"
    assert arm.call("GET", arm.nic_id("nic-a")).status == 404
    assert arm.call("DELETE", arm.nic_id("nic-a")).status == 204
    reused = arm.put_nic("nic-b").body["properties"]["ipConfigurations"][0]
    assert reused["properties"]["privateIPAddress"] == "10.0.0.4"


def test_nic_used_by_a_vm_cannot_be_deleted(arm):
    arm.wait(arm.put_vm("vm1", nic="nic-a"))

    nic = arm.call("GET", arm.nic_id("nic-a")).body
    reply = arm.call("DELETE", arm.nic_id("nic-a"))

    assert nic["properties"]["virtualMachine"]["id"] == arm.vm_path("vm1")
    assert reply.status == 400
    assert reply.code == "NicInUse"
    assert reply.body["error"]["message"] == (
        f"Network Interface {arm.nic_id('nic-a')} is used by existing resource "
        f"{arm.vm_path('vm1')}. In order to delete the network interface, it must be "
        "dissociated from the resource."
    )
