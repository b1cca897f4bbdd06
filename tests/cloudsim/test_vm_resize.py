"""The emulator resizes VMs as Azure does (cloudsim/vm_resize.py): PATCH of
hardwareProfile.vmSize, the hardware-cluster rule for a running VM, SkuNotAvailable outside the
region, and ListAvailableSizes (GET .../vmSizes)."""

T4 = "Standard_NC4as_T4_v3"  # standardNCASv3_T4Family: another hardware cluster than the A100s.
TWO_A100 = "Standard_NC48ads_A100_v4"


def _patch(arm, name, size, **extra):
    body = {"properties": {"hardwareProfile": {"vmSize": size}}, **extra}
    return arm.call("PATCH", arm.vm_path(name), body)


def _sizes(arm, name):
    reply = arm.call("GET", arm.vm_path(name) + "/vmSizes")
    assert reply.status == 200, reply
    return [s["name"] for s in reply.body["value"]]


def test_running_vm_lists_its_clusters_sizes_and_takes_one_of_them(arm):
    arm.wait(arm.put_vm("vm1"))
    sizes = _sizes(arm, "vm1")
    assert arm.A100 in sizes and TWO_A100 in sizes and T4 not in sizes
    reply = _patch(arm, "vm1", TWO_A100)
    assert reply.status == 200 and "azure-asyncoperation" in reply.headers
    assert arm.wait(reply)["status"] == "Succeeded"
    vm = arm.vm("vm1")
    assert vm["properties"]["hardwareProfile"]["vmSize"] == TWO_A100
    assert vm["properties"]["osProfile"]["adminUsername"] == "azureuser"  # the rest kept
    assert arm.power("vm1")[1] == "PowerState/running"


def test_running_vm_resize_outside_its_hardware_cluster_is_refused_as_azure_does(arm):
    arm.wait(arm.put_vm("vm1"))
    reply = _patch(arm, "vm1", T4)
    assert reply.status == 409 and reply.code == "OperationNotAllowed"
    error = reply.body["error"]
    assert error["target"] == "vmSize"
    assert error["message"].startswith(
        f"Unable to resize the VM 'vm1' because the requested size {T4} is not available in "
        "the current hardware cluster. The available sizes are: "
    )
    assert error["message"].endswith(
        "Read more on VM resizing strategy at https://aka.ms/azure-resizevm."
    )
    assert arm.vm("vm1")["properties"]["hardwareProfile"]["vmSize"] == arm.A100
    # A PUT of the whole VM is held to the same rule.
    assert arm.put_vm("vm1", size=T4).code == "OperationNotAllowed"


def test_deallocated_vm_lists_the_region_and_takes_another_family(arm):
    arm.wait(arm.put_vm("vm1"))
    arm.wait(arm.call("POST", arm.vm_path("vm1") + "/deallocate"))
    assert T4 in _sizes(arm, "vm1")
    assert arm.wait(_patch(arm, "vm1", T4))["status"] == "Succeeded"
    assert arm.vm("vm1")["properties"]["hardwareProfile"]["vmSize"] == T4
    assert arm.power("vm1")[1] == "PowerState/deallocated"  # a resize does not start it


def test_size_not_in_the_region_or_restricted_is_sku_not_available(arm, ctl):
    arm.wait(arm.put_vm("vm1"))
    arm.wait(arm.call("POST", arm.vm_path("vm1") + "/deallocate"))
    assert _patch(arm, "vm1", "Standard_NC24r").code == "SkuNotAvailable"
    ctl.restrict_sku("eastus", T4)
    assert T4 in _sizes(arm, "vm1")  # ListAvailableSizes lists it all the same, as Azure's does
    assert _patch(arm, "vm1", T4).code == "SkuNotAvailable"


def test_bad_patches_and_missing_vms_are_client_errors(arm, ctl):
    arm.wait(arm.put_vm("vm1"))
    assert arm.call("PATCH", arm.vm_path("vm1"), {"properties": [1]}).code == "InvalidParameter"
    assert arm.call("PATCH", arm.vm_path("vm1"), raw=b"[").status == 400
    assert _patch(arm, "nope", T4).status == 404
    assert arm.call("GET", arm.vm_path("nope") + "/vmSizes").status == 404
    ctl.inject("vm.sizes", "throttle")
    assert arm.call("GET", arm.vm_path("vm1") + "/vmSizes").status == 429
