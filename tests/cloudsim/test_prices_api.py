"""The emulated Azure Retail Prices API: page shape, $filter, paging, errors, faults, controls."""

import json
import urllib.error
import urllib.parse
import urllib.request

import pytest

from cloudsim import SimControlError

A100, T4 = "Standard_NC24ads_A100_v4", "Standard_NC4as_T4_v3"
INVALID = {"Error": {"Code": "BadRequest", "Message": "Invalid OData parameters supplied"}}


def _item(size: str, region: str = "eastus", price: float = 1.5, **changes) -> dict:
    item = {
        "currencyCode": "USD",
        "tierMinimumUnits": 0.0,
        "retailPrice": price,
        "unitPrice": price,
        "armRegionName": region,
        "location": "US East",
        "effectiveStartDate": "2024-05-01T00:00:00Z",
        "meterId": f"{size}-{region}",
        "meterName": size.removeprefix("Standard_"),
        "productName": "Virtual Machines Series",
        "skuName": size.removeprefix("Standard_"),
        "serviceName": "Virtual Machines",
        "unitOfMeasure": "1 Hour",
        "type": "Consumption",
        "armSkuName": size,
    }
    item.update(changes)
    return item


def _get(url: str) -> tuple[int, dict, dict]:
    """(status, lower-case headers, JSON body) of a GET, without the Azure SDK."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, _headers(response), json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, _headers(err), json.loads(err.read())


def _headers(response) -> dict:
    return {k.lower(): v for k, v in response.headers.items()}


def _prices(sim, odata_filter: str | None = None, **query) -> tuple[int, dict, dict]:
    params = {"api-version": "2023-01-01-preview", **query}
    if odata_filter is not None:
        params["$filter"] = odata_filter
    encoded = urllib.parse.urlencode(params, quote_via=urllib.parse.quote)
    return _get(f"{sim.url}/api/retail/prices?{encoded}")


def _sizes(body: dict) -> list[str]:
    return [i["armSkuName"] for i in body["Items"]]


def test_a_page_has_the_real_api_shape(sim, ctl):
    ctl.set_prices([_item(A100)])

    status, headers, body = _prices(sim)

    assert status == 200
    assert headers["content-type"].startswith("application/json")
    assert list(body) == [
        "BillingCurrency",
        "CustomerEntityId",
        "CustomerEntityType",
        "Items",
        "NextPageLink",
        "Count",
    ]
    assert body == {
        "BillingCurrency": "USD",
        "CustomerEntityId": "Default",
        "CustomerEntityType": "Retail",
        "Items": [_item(A100)],
        "NextPageLink": None,
        "Count": 1,
    }


def test_no_api_version_and_no_credentials_are_needed(sim, ctl):
    ctl.set_prices([_item(A100)])

    status, _, body = _get(f"{sim.url}/api/retail/prices")

    assert (status, _sizes(body)) == (200, [A100])


def test_only_get_is_allowed(sim):
    request = urllib.request.Request(f"{sim.url}/api/retail/prices", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 405


def test_the_default_book_holds_the_catalog_prices(sim):
    status, _, body = _prices(sim, f"armSkuName eq '{A100}' and armRegionName eq 'eastus'")

    assert status == 200
    assert [(i["skuName"], i["retailPrice"], i["type"]) for i in body["Items"]] == [
        ("NC24ads A100 v4", 3.673, "Consumption"),  # data/azure_gpu_vms.csv: Price, SpotPrice
        ("NC24ads A100 v4 Spot", 0.444433, "Consumption"),
    ]
    assert body["Items"][0]["unitOfMeasure"] == "1 Hour"
    _, _, h100 = _prices(
        sim, "armSkuName eq 'Standard_ND96isr_H100_v5' and armRegionName eq 'eastus'"
    )
    assert [i["skuName"] for i in h100["Items"]] == [
        "ND96isr H100 v5"
    ]  # Its "spot" is no discount.


def test_filter_combines_and_or_and_parentheses(sim, ctl):
    ctl.set_prices(
        [
            _item(A100),
            _item(A100, "westus2"),
            _item(T4),
            _item(T4, type="DevTestConsumption"),
            _item("Standard_D4s_v5"),
            _item("P10 LRS", serviceName="Storage"),
        ]
    )
    odata = (
        "serviceName eq 'Virtual Machines' and priceType eq 'Consumption' and "
        f"armRegionName eq 'eastus' and (armSkuName eq '{A100}' or armSkuName eq '{T4}')"
    )

    _, _, body = _prices(sim, odata)

    assert [(i["armSkuName"], i["armRegionName"], i["type"]) for i in body["Items"]] == [
        (A100, "eastus", "Consumption"),
        (T4, "eastus", "Consumption"),
    ]
    _, _, either = _prices(sim, f"armSkuName eq '{T4}' or armRegionName eq 'westus2'")
    assert len(either["Items"]) == 3  # `and` binds tighter than `or`, as in OData.


def test_filter_values_are_case_sensitive_and_quotes_are_doubled(sim, ctl):
    ctl.set_prices([_item(A100), _item("Standard_O'Neil")])

    _, _, lower = _prices(sim, "serviceName eq 'virtual machines'")
    _, _, quoted = _prices(sim, "armSkuName eq 'Standard_O''Neil'")

    assert lower["Items"] == []
    assert _sizes(quoted) == ["Standard_O'Neil"]


def test_pages_link_to_the_next_with_skip_until_the_last(sim, ctl):
    ctl.set_prices([_item(f"Standard_S{n}") for n in range(5)], page_size=2)
    odata = "serviceName eq 'Virtual Machines'"

    status, _, body = _prices(sim, odata)
    pages = [body]
    while body["NextPageLink"]:
        status, _, body = _get(body["NextPageLink"])
        assert status == 200
        pages.append(body)

    assert [_sizes(p) for p in pages] == [
        ["Standard_S0", "Standard_S1"],
        ["Standard_S2", "Standard_S3"],
        ["Standard_S4"],
    ]
    assert [p["Count"] for p in pages] == [2, 2, 1]
    link = urllib.parse.urlsplit(pages[0]["NextPageLink"])
    assert f"{link.scheme}://{link.netloc}" == sim.url
    query = dict(urllib.parse.parse_qsl(link.query))
    assert query == {"api-version": "2023-01-01-preview", "$filter": odata, "$skip": "2"}


def test_the_default_page_size_is_the_real_apis_100(sim):
    _, _, body = _prices(sim)

    assert body["Count"] == 100
    assert "$skip=100" in body["NextPageLink"]


@pytest.mark.parametrize(
    "odata",
    [
        "armSkuName ne 'x'",
        "contains(productName, 'Windows')",
        "not(armSkuName eq 'x')",
        "armSkuName eq 'x",
        "(armSkuName eq 'x'",
        "armSkuName eq 'x')",
        "colour eq 'red'",
        "tierMinimumUnits eq 0",
        "armSkuName eq x",
        "armSkuName eq 'x' and",
        "armSkuName eq 'x' And armRegionName eq 'y'",
        " or ".join(f"armSkuName eq 'S{n}'" for n in range(21)),
    ],
)
def test_a_filter_outside_the_supported_odata_answers_400(sim, odata):
    status, _, body = _prices(sim, odata)

    assert (status, body) == (400, INVALID)


def test_twenty_comparisons_are_still_accepted(sim):
    status, _, _ = _prices(sim, " or ".join(f"armSkuName eq 'S{n}'" for n in range(20)))
    assert status == 200


@pytest.mark.parametrize("skip", ["-1", "two"])
def test_a_bad_skip_answers_400(sim, skip):
    assert _prices(sim, **{"$skip": skip})[::2] == (400, INVALID)


def test_items_are_served_exactly_as_stored(sim, ctl):
    odd = [{"retailPrice": "free", "armSkuName": A100}, "not an object", {"unitPrice": 1e-05}]
    ctl.set_prices(odd)

    _, _, everything = _prices(sim)
    _, _, filtered = _prices(sim, f"armSkuName eq '{A100}'")

    assert everything["Items"] == odd
    assert filtered["Items"] == [odd[0]]


def test_add_prices_appends_a_price_change(sim, ctl):
    ctl.set_prices([_item(A100, price=3.673)])

    answer = ctl.add_prices([_item(A100, price=3.9, effectiveStartDate="2025-01-01T00:00:00Z")])
    _, _, body = _prices(sim, f"armSkuName eq '{A100}'")

    assert answer == {"count": 2, "page_size": 100}
    assert [(i["meterId"], i["retailPrice"]) for i in body["Items"]] == [
        (f"{A100}-eastus", 3.673),
        (f"{A100}-eastus", 3.9),
    ]
    assert ctl.prices()["items"] == body["Items"]


def test_reset_restores_the_catalog_book(sim, ctl):
    catalog = len(sim.state.prices)
    ctl.set_prices([], page_size=3)

    ctl.reset()

    assert len(ctl.prices()["items"]) == catalog > 0
    assert ctl.prices()["page_size"] == 100


@pytest.mark.parametrize(
    ("items", "page_size"), [(None, None), ({"a": 1}, None), ([], 0), ([], "2")]
)
def test_set_prices_refuses_a_bad_body(ctl, items, page_size):
    with pytest.raises(SimControlError) as caught:
        ctl.set_prices(items, page_size=page_size)
    assert caught.value.status == 400


def test_throttle_faults_answer_429_with_retry_after_then_serve(sim, ctl):
    ctl.set_prices([_item(A100)])
    ctl.inject("price.list", "throttle", count=2, retry_after=1)

    replies = [_prices(sim) for _ in range(3)]

    assert [r[0] for r in replies] == [429, 429, 200]
    assert replies[0][1]["retry-after"] == "1"
    assert replies[0][2]["Error"]["Code"] == "TooManyRequests"
    assert [r["status"] for r in ctl.requests()] == [429, 429, 200]


def test_unavailable_and_server_error_faults(sim, ctl):
    ctl.inject("price.list", "unavailable", retry_after=2)
    ctl.inject("price.list", "server_error")

    first, second, third = _prices(sim), _prices(sim), _prices(sim)

    assert (first[0], first[1]["retry-after"]) == (503, "2")
    assert second[0] == 500
    assert third[0] == 200


@pytest.mark.parametrize("kind", ["conflict", "quota", "authorization_failed"])
def test_price_faults_are_limited_to_what_the_price_api_can_answer(ctl, kind):
    with pytest.raises(SimControlError) as caught:
        ctl.inject("price.list", kind)
    assert caught.value.status == 400


def test_price_faults_do_not_touch_arm(arm, ctl):
    ctl.inject("price.list", "throttle")

    assert arm.put_nic("nic1").status == 201
