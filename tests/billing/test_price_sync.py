"""Prices stored with their effective dates: a change adds a row, history is never
rewritten, and a bad response changes nothing."""

import io
import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from billing import price_sync as billing
from billing.models import Price, SpendRollup
from cloud.prices import RetailPrice
from tests.factories import OfferingFactory
from workspaces.selectors import offering_spot_price

pytestmark = pytest.mark.django_db
JAN = datetime(2026, 1, 1, tzinfo=UTC)
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def retail(price, start=JAN, *, size="Standard_NC24ads_A100_v4", spot=False):
    return RetailPrice(
        kind="vm",
        arm_sku_name=size,
        region="eastus",
        spot=spot,
        unit_price=Decimal(price),
        unit="1 Hour",
        effective_start=start,
        meter_id="m-1",
        product_name="Virtual Machines NCads A100 v4 Series",
        sku_name="NC24ads A100 v4" + (" Spot" if spot else ""),
        meter_name="NC24ads A100 v4" + (" Spot" if spot else ""),
    )


def history():
    return [(p.effective_start, p.unit_price, p.spot) for p in Price.objects.order_by("pk")]


def test_a_price_change_adds_a_row_and_keeps_the_old_one():
    billing.prices_sync(prices=[retail("3.6730")], source="api", now=NOW)
    june = datetime(2026, 6, 1, tzinfo=UTC)

    result = billing.prices_sync(
        prices=[retail("3.6730"), retail("3.9000", june)], source="api", now=NOW
    )

    assert (result.added, result.unchanged, result.changed_since) == (1, 1, june)
    assert history() == [(JAN, Decimal("3.6730"), False), (june, Decimal("3.9000"), False)]


def test_the_same_prices_again_add_nothing_and_spot_is_its_own_meter():
    prices = [retail("3.6730"), retail("0.7346", spot=True)]
    billing.prices_sync(prices=prices, source="api", now=NOW)

    again = billing.prices_sync(prices=prices, source="api", now=NOW)

    assert (again.added, again.unchanged) == (0, 2)
    assert Price.objects.filter(spot=True).get().unit_price == Decimal("0.7346")


def test_a_corrected_price_for_a_known_start_applies_from_now_not_backwards():
    billing.prices_sync(prices=[retail("3.6730")], source="api", now=NOW)

    billing.prices_sync(prices=[retail("3.5000")], source="api", now=NOW)
    billing.prices_sync(prices=[retail("3.5000")], source="api", now=NOW)  # no third row

    assert history() == [(JAN, Decimal("3.6730"), False), (NOW, Decimal("3.5000"), False)]


def test_a_change_in_the_past_sends_rolled_up_days_back_to_live(cast):
    billing.prices_sync(prices=[retail("3.6730")], source="api", now=NOW)
    SpendRollup.objects.create(team=cast.team, rolled_through=NOW.date(), rebuilt_at=NOW)

    billing.prices_sync(
        prices=[retail("3.9000", datetime(2026, 11, 10, tzinfo=UTC))], source="api", now=NOW
    )

    assert SpendRollup.objects.get(team=cast.team).rolled_through.isoformat() == "2026-11-09"


def test_the_offline_snapshot_loads_the_catalog_prices():
    out = io.StringIO()
    call_command("sync_prices", offline=True, stdout=out)

    a100 = Price.objects.get(sku="Standard_NC24ads_A100_v4", region="eastus", spot=False)
    disk = Price.objects.get(kind="disk", sku="P10 LRS", region="eastus")
    assert a100.unit_price == Decimal("3.673") and a100.source == "snapshot"
    assert disk.hourly == Decimal("0.027")  # $19.71 per 730-hour month
    assert not Price.objects.filter(sku__startswith="Standard_ND96isr_H100", spot=True).exists()
    # 345 from azure_gpu_vms.csv, and 21 pay-as-you-go and 21 Spot prices of the fractional
    # NVadsA10 v5 sizes (azure_fractional_gpu_vms.csv); and 4 Premium Files meters
    # (provisioned and snapshot GiB in eastus and eastus2).
    assert "391 prices from the snapshot: 391 added" in out.getvalue()


def test_a_malformed_snapshot_is_refused_whole_and_the_old_prices_stay(tmp_path, monkeypatch):
    from billing.management.commands import sync_prices

    billing.prices_sync(prices=[retail("3.6730")], source="api", now=NOW)
    good = json.loads(sync_prices.SNAPSHOT.read_text())
    del good["Items"][3]["unitPrice"]  # one bad item among hundreds of good ones
    bad = tmp_path / "snapshot.json"
    bad.write_text(json.dumps(good))
    monkeypatch.setattr(sync_prices, "SNAPSHOT", bad)

    with pytest.raises(CommandError, match="the old ones stay"):
        call_command("sync_prices", offline=True)

    assert history() == [(JAN, Decimal("3.6730"), False)]


def test_sync_prices_reads_the_retail_prices_api_and_records_a_later_change(sim):
    call_command("sync_prices", stdout=io.StringIO())
    a100 = {"sku": "Standard_NC24ads_A100_v4", "region": "eastus", "spot": False}
    assert Price.objects.get(**a100).source == "api"
    [item] = [
        i
        for i in sim.prices()["items"]
        if i["armSkuName"] == a100["sku"]
        and i["armRegionName"] == "eastus"
        and i["type"] == "Consumption"
        and not i["skuName"].endswith(" Spot")
    ]
    sim.add_prices(
        [
            {
                **item,
                "retailPrice": 3.9,
                "unitPrice": 3.9,
                "effectiveStartDate": "2026-06-01T00:00:00Z",
            }
        ]
    )

    out = io.StringIO()
    call_command("sync_prices", stdout=out)

    assert ": 1 added" in out.getvalue()
    assert [p.unit_price for p in Price.objects.filter(**a100)] == [
        Decimal("3.673"),
        Decimal("3.9"),
    ]


def test_a_throttled_then_failing_price_api_leaves_the_old_prices(sim):
    call_command("sync_prices", offline=True, stdout=io.StringIO())
    before = Price.objects.count()
    sim.inject("price.list", "throttle", count=10, retry_after=0)

    with pytest.raises(CommandError, match="Prices not synced; the old ones stay"):
        call_command("sync_prices")

    assert Price.objects.count() == before


def test_sync_reprices_the_offerings_and_withdraws_a_size_azure_has_no_price_for():
    from workspaces.models import SizeOffering

    a100 = OfferingFactory(vm_size="Standard_NC24ads_A100_v4", region="eastus", price_per_hour=1)
    nowhere = OfferingFactory(vm_size="Standard_NC24ads_A100_v4", region="antarctica")
    out = io.StringIO()

    call_command("sync_prices", offline=True, stdout=out)

    a100.refresh_from_db()
    assert a100.price_per_hour == Decimal("3.673")
    spot = offering_spot_price(offering=a100, now=timezone.now())
    assert spot == Decimal("0.444433")
    assert not SizeOffering.objects.get(pk=nowhere.pk).offered
    assert (
        "No longer offered, Azure has no price for it: Standard_NC24ads_A100_v4 in antarctica"
        in out.getvalue()
    )


def test_the_admin_is_told_why_a_size_without_a_price_cannot_be_offered(client, cast):
    from django.urls import reverse

    nowhere = OfferingFactory(
        vm_size="Standard_NC24ads_A100_v4", region="antarctica", offered=False
    )
    client.force_login(cast.platform_admin)
    url = reverse("admin:workspaces_sizeoffering_changelist")

    response = client.post(url, {"action": "offer", "_selected_action": [nowhere.pk]}, follow=True)

    nowhere.refresh_from_db()
    assert not nowhere.offered
    assert (
        "Azure publishes no Linux pay-as-you-go price for Standard_NC24ads_A100_v4 in antarctica"
        in response.content.decode()
    )
