"""The Retail Prices client: parsing real API pages, filters, and fetching over HTTP from cloudsim.

The parser tests read real API responses kept in tests/data/retail_prices (see its SOURCE.md).
"""

import json
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from cloud.prices import (
    MAX_NAMES_PER_FILTER,
    PriceApiError,
    PriceFormatError,
    RetailPrice,
    disk_filter,
    fetch_prices,
    files_filter,
    parse_item,
    parse_items,
    parse_page,
    vm_filter,
    vm_filters,
)

SHARED = Path(__file__).resolve().parents[1] / "data" / "retail_prices"  # see its SOURCE.md
PAGE = SHARED / "page_unfiltered_2021-12.json"
PRICE_CHANGE = SHARED / "item_price_change_2022-04.json"
A100 = "Standard_NC24ads_A100_v4"
T4 = "Standard_NC4as_T4_v3"


def _load(path: Path):
    return json.loads(path.read_text(), parse_float=Decimal)


@pytest.fixture
def page() -> dict:
    return _load(PAGE)


def _by_meter(prices: list[RetailPrice]) -> dict[tuple[str, str, bool], RetailPrice]:
    return {(p.arm_sku_name, p.region, p.spot): p for p in prices}


# --- the real page -----------------------------------------------------------------------------


def test_a_real_page_keeps_exactly_the_linux_pay_as_you_go_vms_and_the_managed_disk(page):
    prices, next_link = parse_page(page)

    # Counted by hand from the file: 12 Linux Consumption VM meters and 1 managed disk of 100.
    assert [(p.kind, p.arm_sku_name, p.region, p.spot) for p in prices] == [
        ("disk", "E10 LRS", "uksouth", False),
        ("vm", "Standard_E2bds_v5", "westus", True),
        ("vm", "Standard_E2s_v5", "northeurope", True),
        ("vm", "Standard_D14_v2_Promo", "northcentralus", False),
        ("vm", "Standard_DS14_v2_Promo", "northcentralus", False),
        ("vm", "Basic_A2", "brazilsouth", False),
        ("vm", "Standard_DS4_v2", "westindia", True),
        ("vm", "Standard_D64ds_v5", "westus2", False),
        ("vm", "Standard_E32_v4", "uaecentral", True),
        ("vm", "Standard_HC44-32rs", "southeastasia", True),
        ("vm", "Standard_D64s_v4", "usgovarizona", False),
        ("vm", "Standard_E64_v4", "southcentralus", False),
        ("vm", "Standard_D5_v2", "southindia", True),
    ]
    assert next_link == "https://prices.azure.com:443/api/retail/prices?$skip=100"
    assert {p.currency for p in prices} == {"USD"}
    assert {p.unit for p in prices if p.kind == "vm"} == {"1 Hour"}


def test_windows_low_priority_devtest_reservations_hosts_and_other_services_are_dropped(page):
    kept = parse_items(page["Items"])
    meters = {p.meter_id for p in kept}

    assert not any(p.product_name.endswith(" Windows") for p in kept)
    assert not any("Low Priority" in p.sku_name or "Low Priority" in p.meter_name for p in kept)
    assert "000009d0-057f-5f2b-b7e9-9e26add324a8" not in meters  # D14 Spot: Windows, DevTest
    dropped_linux = [
        i
        for i in page["Items"]
        if i["meterId"] not in meters and not i["productName"].endswith(" Windows")
    ]
    services = {i["serviceName"] for i in dropped_linux}
    assert {"Cloud Services", "Virtual Machines Licenses", "Azure Monitor"} <= services
    low_priority = [i for i in dropped_linux if i["armSkuName"] == "Standard_DC8as_v5"]
    assert low_priority[0]["skuName"].endswith(" Low Priority")  # a Linux Consumption meter
    host = [i for i in dropped_linux if i["productName"] == "Easv4 Series Dedicated Host"]
    assert {i["type"] for i in host} == {"Consumption", "Reservation"}
    # D64ds v5 has one pay-as-you-go and two reservation items on one meter: one stays.
    d64 = [i["type"] for i in page["Items"] if i["armSkuName"] == "Standard_D64ds_v5"]
    assert sorted(d64) == ["Consumption", "Reservation", "Reservation"]
    kept_d64 = [p.unit_price for p in kept if p.arm_sku_name == "Standard_D64ds_v5"]
    assert kept_d64 == [Decimal("3.616")]


def test_prices_are_the_exact_decimals_of_the_json_text(page):
    prices = _by_meter(parse_items(page["Items"]))
    text = PAGE.read_text()

    e32 = prices[("Standard_E32_v4", "uaecentral", True)]
    assert isinstance(e32.unit_price, Decimal)
    assert '"retailPrice": 0.346579' in text
    assert str(e32.unit_price) == "0.346579"
    assert prices[("E10 LRS", "uksouth", False)].unit_price == Decimal("10.56")
    assert prices[("E10 LRS", "uksouth", False)].unit == "1/Month"
    assert str(prices[("Standard_DS4_v2", "westindia", True)].unit_price) == "0.14175"


def test_effective_dates_are_aware_utc_and_an_end_date_is_carried(page):
    prices = _by_meter(parse_items(page["Items"]))

    e2s = prices[("Standard_E2s_v5", "northeurope", True)]
    assert e2s.effective_start == datetime(2021, 11, 1, tzinfo=UTC)
    assert e2s.effective_end == datetime(2021, 12, 31, 23, 59, tzinfo=UTC)
    assert prices[("Standard_D5_v2", "southindia", True)].effective_end is None


def test_a_real_price_change_is_the_same_meter_from_a_later_date(page):
    first, change = page["Items"][0], _load(PRICE_CHANGE)

    before, after = parse_item(first), parse_item(change)

    assert after.meter_id == before.meter_id == "000009d0-057f-5f2b-b7e9-9e26add324a8"
    assert (before.arm_sku_name, before.region, before.spot) == ("Standard_D14", "southindia", True)
    assert (after.arm_sku_name, after.region, after.spot) == ("Standard_D14", "southindia", True)
    assert before.effective_start == datetime(2021, 6, 1, tzinfo=UTC)
    assert after.effective_start == datetime(2022, 4, 1, tzinfo=UTC)
    assert (before.unit_price, after.unit_price) == (Decimal("0.41055"), Decimal("0.236555"))
    # Both are Windows dev/test meters: no pay-as-you-go Linux price among them.
    assert parse_items([first, change]) == []


def test_parse_item_refuses_what_is_neither_a_vm_nor_a_disk():
    item = _item(serviceName="Azure Monitor", unitOfMeasure="1 GB")
    with pytest.raises(ValueError, match="not a VM, disk or file share"):
        parse_item(item)


# --- malformed pages ---------------------------------------------------------------------------


def _item(**changes) -> dict:
    """A Linux pay-as-you-go A100 item in the API's shape, numbers as Decimal."""
    item = {
        "currencyCode": "USD",
        "tierMinimumUnits": Decimal("0.0"),
        "retailPrice": Decimal("3.673"),
        "unitPrice": Decimal("3.673"),
        "armRegionName": "eastus",
        "location": "US East",
        "effectiveStartDate": "2024-05-01T00:00:00Z",
        "meterId": "11111111-2222-3333-4444-555555555555",
        "meterName": "NC24ads A100 v4",
        "productId": "DZH318Z08M22",
        "skuId": "DZH318Z08M22/00C8",
        "productName": "Virtual Machines NCads A100 v4 Series",
        "skuName": "NC24ads A100 v4",
        "serviceName": "Virtual Machines",
        "serviceId": "DZH313Z7MMC8",
        "serviceFamily": "Compute",
        "unitOfMeasure": "1 Hour",
        "type": "Consumption",
        "isPrimaryMeterRegion": True,
        "armSkuName": A100,
    }
    item.update(changes)
    return {k: v for k, v in item.items() if v is not None}


def _page(items, **changes) -> dict:
    body = {"BillingCurrency": "USD", "CustomerEntityId": "Default"}
    body.update(CustomerEntityType="Retail", Items=items, NextPageLink=None, Count=len(items))
    body.update(changes)
    return {k: v for k, v in body.items() if v != "<drop>"}


def test_a_well_formed_item_parses():
    (price,) = parse_items([_item()])
    assert price == RetailPrice(
        kind="vm",
        arm_sku_name=A100,
        region="eastus",
        spot=False,
        unit_price=Decimal("3.673"),
        unit="1 Hour",
        effective_start=datetime(2024, 5, 1, tzinfo=UTC),
        meter_id="11111111-2222-3333-4444-555555555555",
        product_name="Virtual Machines NCads A100 v4 Series",
        sku_name="NC24ads A100 v4",
        meter_name="NC24ads A100 v4",
    )


@pytest.mark.parametrize(
    ("page", "message"),
    [
        (_page([], Items="<drop>"), "'Items' is missing"),
        (_page([], Items={"a": 1}), "'Items' is missing or not a list"),
        (_page([_item()], BillingCurrency="EUR"), "BillingCurrency is 'EUR'"),
        (_page([_item()], Count=100), "Count is 100 but 1 items came"),
        (_page([_item()], NextPageLink="<drop>"), "'NextPageLink' is missing"),
        (_page([_item()], NextPageLink=42), "NextPageLink is 42"),
        ([_item()], "page: not a JSON object"),
    ],
)
def test_a_malformed_page_raises(page, message):
    with pytest.raises(PriceFormatError, match=message):
        parse_page(page)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (_item(retailPrice=None), r"Items\[1\]: 'retailPrice' is missing or not a number"),
        (_item(unitPrice=None), r"Items\[1\]: 'unitPrice' is missing"),
        (_item(retailPrice="3.673"), "'retailPrice' is missing or not a number .'3.673'."),
        (_item(retailPrice=3.673), "'retailPrice' is a float; parse with parse_float=Decimal"),
        (_item(retailPrice=Decimal("NaN")), "'retailPrice' is not a price"),
        (_item(retailPrice=Decimal("-1")), "'retailPrice' is not a price"),
        (_item(currencyCode="EUR"), r"Items\[1\]: currencyCode is 'EUR', not USD"),
        (_item(effectiveStartDate="yesterday"), "'effectiveStartDate' is not an ISO 8601 time"),
        (_item(effectiveStartDate=None), "'effectiveStartDate' is not an ISO 8601 time"),
        (_item(effectiveEndDate="2024-13-01"), "'effectiveEndDate' is not an ISO 8601 time"),
        (_item(meterId=None), "'meterId' is missing or not a string"),
        (_item(armSkuName=""), "a vm price without a size or region"),
        ("not an object", r"Items\[1\]: not a JSON object"),
    ],
)
def test_a_malformed_item_raises_naming_item_and_field(item, message):
    with pytest.raises(PriceFormatError, match=message):
        parse_items([_item(), item])


def test_even_an_item_that_would_be_dropped_must_be_well_formed():
    windows = _item(productName="Virtual Machines NCads A100 v4 Series Windows", meterId=None)
    with pytest.raises(PriceFormatError, match="meterId"):
        parse_items([windows])


# --- filters -----------------------------------------------------------------------------------


def test_vm_filter_asks_for_pay_as_you_go_sizes_in_one_region():
    assert vm_filter(region="eastus", arm_sku_names=[A100, T4, A100]) == (
        "serviceName eq 'Virtual Machines' and priceType eq 'Consumption' and "
        f"armRegionName eq 'eastus' and (armSkuName eq '{A100}' or armSkuName eq '{T4}')"
    )


def test_disk_filter_escapes_quotes_odata_style():
    assert disk_filter(region="west'us", sku_names=["P10 LRS", "O'Neil"]) == (
        "serviceName eq 'Storage' and priceType eq 'Consumption' and "
        "armRegionName eq 'west''us' and (skuName eq 'P10 LRS' or skuName eq 'O''Neil')"
    )


def test_premium_files_meters_are_per_gib_a_month_keyed_by_meter_and_snapshots_stay_apart():
    files = {"serviceName": "Storage", "productName": "Premium Files", "armSkuName": ""}
    provisioned = _item(
        **files, skuName="Premium LRS", meterName="Premium LRS Provisioned",
        unitOfMeasure="1 GB/Month", retailPrice=Decimal("0.16"),
    )  # fmt: skip
    others = [
        _item(**files, skuName="Premium LRS", meterName="Premium LRS Burst Transactions"),
        _item(
            **files,
            skuName="Premium LRS",
            meterName="Premium LRS Snapshots",
            unitOfMeasure="1 GB/Month",
            type="Reservation",
        ),  # fmt: skip
    ]

    (price,) = parse_items([provisioned, *others])

    assert (price.kind, price.arm_sku_name, price.unit_price, price.unit) == (
        "files",
        "Premium LRS Provisioned",
        Decimal("0.16"),
        "1 GB/Month",
    )
    assert files_filter(region="eastus") == (
        "serviceName eq 'Storage' and priceType eq 'Consumption' and armRegionName eq 'eastus' "
        "and (meterName eq 'Premium LRS Provisioned' or meterName eq 'Premium LRS Snapshots')"
    )


def test_filters_take_a_bounded_number_of_names():
    names = [f"Standard_X{n}" for n in range(MAX_NAMES_PER_FILTER + 5)]
    with pytest.raises(ValueError):
        vm_filter(region="eastus", arm_sku_names=names)
    with pytest.raises(ValueError):
        vm_filter(region="eastus", arm_sku_names=[])
    split = vm_filters(region="eastus", arm_sku_names=names)
    assert len(split) == 2
    assert sum(f.count("armSkuName eq") for f in split) == len(names)


# --- over HTTP, against the emulator -----------------------------------------------------------


def _wire(**changes) -> dict:
    """_item() as JSON sends it (floats), for the emulator's control API."""
    return json.loads(json.dumps(_item(**changes), default=float))


def _wire_vm(size: str, region: str, price: float, n: int, **changes) -> dict:
    body = _wire(armSkuName=size, armRegionName=region, meterId=f"meter-{n}", **changes)
    return {**body, "retailPrice": price, "unitPrice": price}


def _fetch(emulator, filters, **kwargs):
    kwargs.setdefault("retry_backoff", 0.01)
    return fetch_prices(endpoint=emulator.url, filters=filters, **kwargs)


def _price_requests(control) -> list[dict]:
    return [r for r in control.requests() if r["path"] == "/api/retail/prices"]


def test_fetch_follows_next_page_links_to_the_last_page(emulator, control):
    items = [_wire_vm(A100, "eastus", 3.5 + n, n) for n in range(5)]
    control.set_prices(items, page_size=2)

    prices = _fetch(emulator, [vm_filter(region="eastus", arm_sku_names=[A100])])

    assert [p.meter_id for p in prices] == [f"meter-{n}" for n in range(5)]
    assert [p.unit_price for p in prices] == [Decimal(f"{3.5 + n}") for n in range(5)]
    assert [r["status"] for r in _price_requests(control)] == [200, 200, 200]


def test_fetch_returns_only_the_filtered_region_and_sizes(emulator, control):
    disk = {"serviceName": "Storage", "productName": "Premium SSD Managed Disks"}
    disk.update(unitOfMeasure="1/Month")
    control.set_prices(
        [
            _wire_vm(A100, "eastus", 3.673, 1),
            _wire_vm(A100, "eastus", 0.444433, 2, skuName="NC24ads A100 v4 Spot"),
            _wire_vm(A100, "westus2", 3.673, 3),
            _wire_vm(T4, "eastus", 0.526, 4),
            _wire_vm(A100, "eastus", 4.2, 5, productName="Virtual Machines NCads Windows"),
            _wire_vm("", "eastus", 19.71, 6, skuName="P10 LRS", meterName="P10 LRS Disk", **disk),
            _wire_vm("", "westus2", 19.71, 7, skuName="P10 LRS", meterName="P10 LRS Disk", **disk),
        ]
    )
    filters = [
        vm_filter(region="eastus", arm_sku_names=[A100]),
        disk_filter(region="eastus", sku_names=["P10 LRS"]),
    ]

    prices = _fetch(emulator, filters)

    assert [(p.kind, p.arm_sku_name, p.region, p.spot, p.unit_price) for p in prices] == [
        ("vm", A100, "eastus", False, Decimal("3.673")),
        ("vm", A100, "eastus", True, Decimal("0.444433")),
        ("disk", "P10 LRS", "eastus", False, Decimal("19.71")),
    ]
    assert prices[2].unit == "1/Month"


def test_a_price_change_comes_back_as_a_second_price_of_the_meter(emulator, control):
    control.set_prices([_wire_vm(A100, "eastus", 3.673, 1)])
    control.add_prices([_wire_vm(A100, "eastus", 3.9, 1, effectiveStartDate="2025-01-01T00:00Z")])

    prices = _fetch(emulator, [vm_filter(region="eastus", arm_sku_names=[A100])])

    assert {p.meter_id for p in prices} == {"meter-1"}
    assert [(p.effective_start.year, p.unit_price) for p in prices] == [
        (2024, Decimal("3.673")),
        (2025, Decimal("3.9")),
    ]


def test_throttling_is_retried_honouring_retry_after(emulator, control):
    control.set_prices([_wire_vm(A100, "eastus", 3.673, 1)])
    control.inject("price.list", "throttle", retry_after=1)
    control.inject("price.list", "throttle", retry_after=0)

    started = time.monotonic()
    prices = _fetch(emulator, [vm_filter(region="eastus", arm_sku_names=[A100])])

    assert time.monotonic() - started >= 1.0  # The first Retry-After: 1 was waited out.
    assert [p.meter_id for p in prices] == ["meter-1"]
    assert [r["status"] for r in _price_requests(control)] == [429, 429, 200]


def test_throttling_past_the_retries_raises_price_api_error(emulator, control):
    control.inject("price.list", "throttle", count=3)

    with pytest.raises(PriceApiError) as caught:
        _fetch(emulator, [vm_filter(region="eastus", arm_sku_names=[A100])], retry_total=2)

    assert (caught.value.status, caught.value.code) == (429, "TooManyRequests")
    assert len(_price_requests(control)) == 3


def test_a_server_error_is_retried(emulator, control):
    control.set_prices([_wire_vm(A100, "eastus", 3.673, 1)])
    control.inject("price.list", "server_error")

    prices = _fetch(emulator, [vm_filter(region="eastus", arm_sku_names=[A100])])

    assert len(prices) == 1
    assert [r["status"] for r in _price_requests(control)] == [500, 200]


def test_a_malformed_later_page_fails_the_whole_fetch(emulator, control):
    broken = _wire_vm(A100, "eastus", 3.673, 2)
    del broken["unitPrice"]
    control.set_prices([_wire_vm(A100, "eastus", 3.673, 1), broken], page_size=1)

    with pytest.raises(PriceFormatError, match=r"page 2 of .*Items\[0\]: 'unitPrice'"):
        _fetch(emulator, [vm_filter(region="eastus", arm_sku_names=[A100])])


def test_a_refused_filter_raises_price_api_error_without_retrying(emulator, control):
    with pytest.raises(PriceApiError) as caught:
        _fetch(emulator, ["contains(productName, 'Windows')"])

    assert caught.value.status == 400
    assert caught.value.code == "BadRequest"
    assert caught.value.message == "Invalid OData parameters supplied"
    assert len(_price_requests(control)) == 1


def test_an_unreachable_service_raises_price_api_error():
    with pytest.raises(PriceApiError) as caught:
        fetch_prices(endpoint="http://127.0.0.1:9", filters=["x"], retry_total=0, timeout=2)
    assert caught.value.status is None


def test_the_default_book_serves_the_catalog_snapshot(emulator, control):
    prices = _fetch(emulator, [vm_filter(region="eastus", arm_sku_names=[A100])])

    assert [(p.spot, p.unit_price) for p in prices] == [
        (False, Decimal("3.673")),
        (True, Decimal("0.444433")),
    ]
