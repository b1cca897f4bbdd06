"""sku_info: a size's quota family and vCPUs from the Resource SKUs API, with restrictions."""

import pytest

from cloud.azure_vm import SkuInfo, sku_info
from cloud.errors import CloudError

from .support import T4, T4_FAMILY


def test_sku_info_gives_family_and_vcpus(azure):
    assert sku_info(azure, location="eastus", vm_size=T4) == SkuInfo(
        name=T4,
        family=T4_FAMILY,
        vcpus=4,
        offered=True,
        reason=None,
        hyper_v_generations=("V1", "V2"),
        premium_io=True,
    )
    a100 = sku_info(azure, location="eastus", vm_size="standard_nc24ads_a100_v4")
    assert (a100.name, a100.family, a100.vcpus) == (
        "Standard_NC24ads_A100_v4",
        "standardNCADSA100v4Family",
        24,
    )


@pytest.mark.parametrize(
    ("location", "size", "generations", "premium", "image", "disk"),
    [
        ("eastus", "Standard_NC24ads_A100_v4", ("V2",), True, "22_04-lts-gen2", "Premium_LRS"),
        ("eastus", T4, ("V1", "V2"), True, "22_04-lts-gen2", "Premium_LRS"),
        ("westus2", "Standard_NC6", ("V1",), False, "22_04-lts", "StandardSSD_LRS"),
    ],
)
def test_sku_capabilities_choose_the_image_generation_and_os_disk_sku(
    azure, location, size, generations, premium, image, disk
):
    info = sku_info(azure, location=location, vm_size=size)

    assert (info.hyper_v_generations, info.premium_io) == (generations, premium)
    assert (info.image.split(":")[2], info.os_disk_sku) == (image, disk)


def test_sku_info_of_a_restricted_size_keeps_its_family(azure, control):
    control.restrict_sku("eastus", T4)

    info = sku_info(azure, location="eastus", vm_size=T4)

    assert (info.offered, info.reason, info.family, info.vcpus) == (
        False,
        "NotAvailableForSubscription",
        T4_FAMILY,
        4,
    )


def test_sku_info_of_a_size_not_sold_there(azure):
    info = sku_info(azure, location="eastus", vm_size="Standard_D2s_v5")

    assert info == SkuInfo("Standard_D2s_v5", "", 0, False, "NotOffered")


def test_sku_info_refused_is_a_permanent_cloud_error(azure, control):
    control.inject("sku.list", "authorization_failed")

    with pytest.raises(CloudError) as refused:
        sku_info(azure, location="eastus", vm_size=T4)

    assert (refused.value.code, refused.value.status) == ("AuthorizationFailed", 403)
    assert not refused.value.transient
