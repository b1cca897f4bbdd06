"""The GPU catalog built from the real Azure price data in data/azure_gpu_vms.csv."""

import io
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.utils import timezone

from workspaces.catalog import read_catalog
from workspaces.models import SizeOffering
from workspaces.selectors import offering_list


@pytest.fixture(scope="module")
def rows():
    return read_catalog()


def test_only_current_nvidia_sizes_with_prices_are_offerable(rows):
    models = {r.gpu_model for r in rows}
    assert models == {"A100", "H100", "T4", "A10"}
    sizes = {r.vm_size for r in rows}
    assert "Standard_NC6" not in sizes  # K80, retired
    assert "Standard_NC6s_v3" not in sizes  # V100, retired 2025-09-30
    assert not any(s.endswith("_Promo") or "as_v4" in s for s in sizes)


def test_known_errors_of_the_source_are_corrected(rows):
    nd_h100 = next(r for r in rows if r.vm_size == "Standard_ND96isr_H100_v5")
    assert nd_h100.gpu_count == 8
    nc_h100 = next(r for r in rows if r.vm_size == "Standard_NC40ads_H100_v5")
    assert nc_h100.gpu_memory_gib == 94


def test_prices_are_decimal_usd_per_hour(rows):
    a100 = next(r for r in rows if r.vm_size == "Standard_NC24ads_A100_v4" and r.region == "eastus")
    assert isinstance(a100.price_per_hour, Decimal)
    assert a100.price_per_hour == Decimal("3.673")
    assert a100.gpu_memory_gib == 80 and a100.gpu_count == 1


@pytest.mark.django_db
def test_a_size_whose_source_spot_price_is_pay_as_you_go_has_no_spot_price():
    call_command("load_catalog", verbosity=0)
    call_command("sync_prices", offline=True, stdout=io.StringIO())
    offerings = offering_list(region="eastus", now=timezone.now())
    spot = {o.vm_size: o.spot_hourly for o in offerings}
    assert spot["Standard_ND96isr_H100_v5"] is None  # the source's spot equals pay-as-you-go
    assert spot["Standard_NC24ads_A100_v4"] == Decimal("0.444433")


@pytest.mark.django_db
def test_reloading_the_catalog_keeps_the_platform_admins_choice():
    call_command("load_catalog", verbosity=0)
    count = SizeOffering.objects.count()
    SizeOffering.objects.filter(region="westus").update(offered=False)
    call_command("load_catalog", verbosity=0)
    assert SizeOffering.objects.count() == count
    assert not SizeOffering.objects.filter(region="westus", offered=True).exists()
