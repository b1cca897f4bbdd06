"""Azure details the emulator plays as Microsoft documents them: SKU capabilities
(HyperVGenerations, PremiumIO) and the create-time refusals that follow from them."""

SKUS = "/subscriptions/{sub}/providers/Microsoft.Compute/skus"


def _capabilities(arm, location: str, size: str) -> dict:
    reply = arm.call("GET", SKUS.format(sub=arm.SUB) + f"?$filter=location%20eq%20%27{location}%27")
    sku = next(s for s in reply.body["value"] if s["name"] == size)
    return {c["name"]: c["value"] for c in sku["capabilities"]}


def test_resource_skus_list_generations_and_premium_io_as_azure_does(arm):
    a100 = _capabilities(arm, "eastus", "Standard_NC24ads_A100_v4")
    t4 = _capabilities(arm, "eastus", "Standard_NC4as_T4_v3")
    nc6 = _capabilities(arm, "westus2", "Standard_NC6")

    assert (a100["HyperVGenerations"], a100["PremiumIO"]) == ("V2", "True")
    assert (t4["HyperVGenerations"], t4["PremiumIO"]) == ("V1,V2", "True")
    assert (nc6["HyperVGenerations"], nc6["PremiumIO"]) == ("V1", "False")


def _image(sku: str) -> dict:
    return {
        "imageReference": {
            "publisher": "Canonical",
            "offer": "0001-com-ubuntu-server-jammy",
            "sku": sku,
            "version": "latest",
        },
        "osDisk": {
            "name": "vm1-osdisk",
            "createOption": "FromImage",
            "managedDisk": {"storageAccountType": "StandardSSD_LRS"},
        },
    }


def test_a_gen2_image_on_a_gen1_only_size_is_refused(arm):
    gen2 = _image("22_04-lts-gen2")

    reply = arm.put_vm("vm1", size="Standard_NC6", location="westus2", storageProfile=gen2)

    assert (reply.status, reply.code) == (400, "BadRequest")
    assert "cannot boot Hypervisor Generation '2'" in reply.body["error"]["message"]
    gen1 = _image("22_04-lts")
    ok = arm.put_vm("vm1", size="Standard_NC6", location="westus2", storageProfile=gen1)
    assert ok.status == 201


def test_a_gen1_image_on_a_gen2_only_size_is_refused(arm):
    reply = arm.put_vm("vm1", storageProfile=_image("22_04-lts"))  # A100 v4: V2 only

    assert (reply.status, reply.code) == (400, "BadRequest")


def test_premium_ssd_on_a_size_without_premium_io_is_refused(arm):
    premium = _image("22_04-lts")
    premium["osDisk"]["managedDisk"]["storageAccountType"] = "Premium_LRS"

    reply = arm.put_vm("vm1", size="Standard_NC6", location="westus2", storageProfile=premium)

    assert (reply.status, reply.code) == (400, "BadRequest")
    assert "does not support the storage account type Premium_LRS" in reply.body["error"]["message"]
