"""The Cost Management client: real answer shapes parsed to exact decimals, malformed pages
refused whole, and fetching over HTTP from cloudsim with paging and throttling.

Real bodies are kept in tests/data/cost_management (see its SOURCE.md).
"""

import copy
import json
import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from cloud.costs import (
    UNTAGGED,
    ActualCost,
    CostFormatError,
    fetch_actual_costs,
    parse_page,
    periods,
)
from cloud.errors import CloudError
from cloudsim.ledger import Usage

from .support import RESOURCE_GROUP, SUBSCRIPTION, arm_requests

DATA = Path(__file__).resolve().parents[1] / "data" / "cost_management"
A100 = "Standard_NC24ads_A100_v4"
DAY = date(2025, 11, 2)
QUERY = "/providers/Microsoft.CostManagement/query"


def _example(name: str) -> dict:
    """The 200 body of a real example, numbers as Decimal."""
    text = (DATA / name).read_text()
    return json.loads(text, parse_float=Decimal)["responses"]["200"]["body"]


def _tag_grouped(body: dict, grouping: str) -> dict:
    """The body with its grouping column swapped for the TagKey/TagValue pair a tag grouping
    returns (the old values become the tag's values); everything else as Azure wrote it."""
    body = copy.deepcopy(body)
    props = body["properties"]
    at = [c["name"] for c in props["columns"]].index(grouping)
    props["columns"][at : at + 1] = [
        {"name": "TagKey", "type": "String"},
        {"name": "TagValue", "type": "String"},
    ]
    props["rows"] = [row[:at] + ["workspace", row[at]] + row[at + 1 :] for row in props["rows"]]
    return body


# --- real answers ------------------------------------------------------------------------------


def test_a_real_daily_answer_grouped_by_the_tag_parses_to_exact_decimals():
    body = _tag_grouped(_example("ResourceGroupQueryGrouping_2023-11-01.json"), "ResourceType")

    costs, next_link = parse_page(body)

    assert costs == [
        ActualCost(date(2018, 4, 17), "Microsoft.SqlServer", Decimal("2.10333307059661"), "USD"),
        ActualCost(date(2018, 4, 18), "Microsoft.Compute", Decimal("20.10333307059661"), "USD"),
    ]
    assert next_link == ""


def test_the_real_answer_as_written_is_refused_for_it_is_not_grouped_by_the_tag():
    with pytest.raises(CostFormatError, match="one column named TagKey"):
        parse_page(_example("ResourceGroupQueryGrouping_2023-11-01.json"))


def test_costs_keep_every_digit_azure_wrote_where_floats_would_not():
    body = _example("SubscriptionQueryGrouping_2022-10-01.json")
    props = body["properties"]
    props["columns"].insert(1, {"name": "UsageDate", "type": "Number"})
    props["rows"] = [[row[0], 20221001, *row[1:]] for row in props["rows"]]

    costs, _ = parse_page(_tag_grouped(body, "ResourceGroup"))

    assert [str(c.cost) for c in costs][:2] == ["0.009865586851323632", "218.68795741935486"]
    assert sum(c.cost for c in costs) == Decimal("220.945005212619364152")
    floats = sum(float(c.cost) for c in costs)
    assert Decimal(floats) != Decimal("220.945005212619364152")  # floats lose the last digits


def _page(*rows, columns=("Cost", "UsageDate", "TagKey", "TagValue", "Currency"), **props):
    types = {"Cost": "Number", "PreTaxCost": "Number", "UsageDate": "Number"}
    body = {
        "nextLink": None,
        "columns": [{"name": n, "type": types.get(n, "String")} for n in columns],
        "rows": [list(r) for r in rows],
    }
    body.update(props)
    return {"id": "q", "name": "q", "type": "Microsoft.CostManagement/query", "properties": body}


GOOD = (Decimal("12.5"), 20251102, "workspace", "ws-1", "USD")


def test_resources_without_the_tag_come_back_as_untagged_and_refunds_as_negative():
    costs, _ = parse_page(
        _page(GOOD, (Decimal("0.43"), 20251102, "", "", "USD"), (-1, 20251103, None, None, "USD"))
    )

    assert [(c.workspace_tag, c.cost, c.tagged) for c in costs] == [
        ("ws-1", Decimal("12.5"), True),
        (UNTAGGED, Decimal("0.43"), False),
        (UNTAGGED, Decimal("-1"), False),
    ]


def test_a_null_tag_value_under_the_tag_key_is_untagged_cost_not_a_malformed_page():
    # Azure groups the cost of resources without the tag under TagKey "workspace" with a null
    # TagValue, by design; one such row used to fail the whole nightly query.
    costs, _ = parse_page(_page(GOOD, (Decimal("0.43"), 20251102, "workspace", None, "USD")))

    assert [(c.workspace_tag, c.cost) for c in costs] == [
        ("ws-1", Decimal("12.5")),
        (UNTAGGED, Decimal("0.43")),
    ]


def test_columns_are_found_by_name_whatever_their_order_or_case():
    page = _page(
        ("USD", "ws-1", "WORKSPACE", 20251102, Decimal("1.25")),
        columns=("Currency", "TagValue", "tagkey", "usagedate", "PreTaxCost"),
    )

    assert parse_page(page)[0] == [ActualCost(DAY, "ws-1", Decimal("1.25"), "USD")]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ((Decimal("1"), 20251102, "workspace", "ws-2"), "row 1: not a list of 5 values"),
        ((Decimal("1"), "2025-11-02", "workspace", "ws-2", "USD"), "UsageDate '2025-11-02'"),
        ((Decimal("1"), 20251332, "workspace", "ws-2", "USD"), "UsageDate 20251332 is not a date"),
        (("1.0", 20251102, "workspace", "ws-2", "USD"), "the cost '1.0' is not a number"),
        ((1.0, 20251102, "workspace", "ws-2", "USD"), "the cost is a float"),
        ((Decimal("NaN"), 20251102, "workspace", "ws-2", "USD"), "not finite"),
        ((Decimal("1"), 20251102, "workspace", "ws-2", None), "Currency None"),
        ((Decimal("1"), 20251102, "team", "vision", "USD"), "TagKey 'team' is not the tag"),
        ((Decimal("1"), 20251102, "workspace", 7, "USD"), "TagValue 7 is not a tag value"),
        ("not a row", "row 1: not a list"),
    ],
)
def test_one_malformed_row_fails_the_whole_page(bad, message):
    with pytest.raises(CostFormatError, match=message):
        parse_page(_page(GOOD, bad))


@pytest.mark.parametrize(
    ("page", "message"),
    [
        ({"id": "q"}, "'properties' is missing"),
        (_page(GOOD, columns=()), "'columns' is missing or empty"),
        (_page(GOOD, rows=None), "'rows' is missing or not a list"),
        (_page(GOOD, nextLink=42), "nextLink 42 is not a URL or null"),
        (
            _page(columns=("Cost", "PreTaxCost", "UsageDate", "TagKey", "TagValue", "Currency")),
            "one column named Cost or PreTaxCost",
        ),
        (_page(columns=("Cost", "TagKey", "TagValue", "Currency")), "named UsageDate"),
    ],
)
def test_a_malformed_page_is_refused(page, message):
    with pytest.raises(CostFormatError, match=message):
        parse_page(page)


def test_long_periods_are_asked_for_in_pieces_of_at_most_31_days():
    assert periods(date(2026, 1, 1), date(2026, 2, 5)) == [
        (date(2026, 1, 1), date(2026, 1, 31)),
        (date(2026, 2, 1), date(2026, 2, 5)),
    ]
    with pytest.raises(ValueError):
        periods(date(2026, 1, 2), date(2026, 1, 1))


# --- over HTTP, against the emulator ------------------------------------------------------------


@pytest.fixture
def priced(control):
    """The emulator's price book: the A100 at $3.00/hour in eastus."""
    control.set_prices(
        [
            {
                "currencyCode": "USD",
                "tierMinimumUnits": 0.0,
                "retailPrice": 3.0,
                "unitPrice": 3.0,
                "armRegionName": "eastus",
                "effectiveStartDate": "2024-01-01T00:00:00Z",
                "meterId": "a100",
                "meterName": "NC24ads A100 v4",
                "productName": "Virtual Machines NCads A100 v4 Series",
                "skuName": "NC24ads A100 v4",
                "serviceName": "Virtual Machines",
                "unitOfMeasure": "1 Hour",
                "type": "Consumption",
                "armSkuName": A100,
            }
        ]
    )
    return control


def _bill(emulator, tag: str, day: date, hours: int, group: str = RESOURCE_GROUP) -> None:
    """Record that a VM tagged `tag` ran `hours` from 08:00 UTC on `day`."""
    start = datetime.combine(day, datetime.min.time(), UTC).timestamp() + 8 * 3600
    vm = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{group}/providers/Microsoft.Compute/"
    usage = Usage(
        kind="vm",
        resource_id=f"{vm}virtualMachines/{tag or 'untagged'}",
        subscription=SUBSCRIPTION,
        resource_group=group,
        location="eastus",
        sku=A100,
        spot=False,
        start=start,
        tags={"workspace": tag} if tag else {"team": "vision"},
        end=start + hours * 3600,
    )
    with emulator.state.lock:
        emulator.state.usages.append(usage)


def _queries(control) -> list[dict]:
    return arm_requests(control, "POST", QUERY)


def test_fetch_follows_next_links_and_returns_every_row(emulator, priced, azure):
    for n, tag in enumerate(["ws-a", "ws-b", ""]):
        _bill(emulator, tag, DAY, hours=n + 1)
    _bill(emulator, "ws-a", DAY + timedelta(days=1), hours=4)
    priced.skew_costs(page_size=1)

    costs = fetch_actual_costs(azure, first=DAY, last=DAY + timedelta(days=1))

    assert sorted((c.day, c.workspace_tag, c.cost) for c in costs) == [
        (DAY, UNTAGGED, Decimal(9)),
        (DAY, "ws-a", Decimal(3)),
        (DAY, "ws-b", Decimal(6)),
        (DAY + timedelta(days=1), "ws-a", Decimal(12)),
    ]
    assert {c.currency for c in costs} == {"USD"}
    assert [r["status"] for r in _queries(priced)] == [200, 200, 200, 200]


def test_throttling_is_waited_out_as_the_rate_limit_headers_ask(emulator, priced, azure):
    _bill(emulator, "ws-a", DAY, hours=1)
    priced.inject("cost.query", "throttle", retry_after=1)  # no Retry-After header, see cloudsim

    started = time.monotonic()
    costs = fetch_actual_costs(azure, first=DAY, last=DAY)

    assert time.monotonic() - started >= 1.0
    assert [(c.workspace_tag, c.cost) for c in costs] == [("ws-a", Decimal(3))]
    assert [r["status"] for r in _queries(priced)] == [429, 200]


def test_throttling_past_the_retries_raises_a_transient_cloud_error(priced, azure):
    priced.inject("cost.query", "throttle", count=3)

    with pytest.raises(CloudError) as caught:
        fetch_actual_costs(azure, first=DAY, last=DAY)

    assert (caught.value.status, caught.value.transient) == (429, True)
    assert len(_queries(priced)) == 3  # one try and retry_total (2) retries


def test_a_server_error_is_retried(emulator, priced, azure):
    _bill(emulator, "ws-a", DAY, hours=1)
    priced.inject("cost.query", "server_error")

    assert len(fetch_actual_costs(azure, first=DAY, last=DAY)) == 1
    assert [r["status"] for r in _queries(priced)] == [500, 200]


def test_the_scope_is_the_resource_group_unless_asked_for_the_subscription(emulator, priced, azure):
    _bill(emulator, "ws-a", DAY, hours=1)
    _bill(emulator, "ws-elsewhere", DAY, hours=2, group="rg-other")

    in_group = fetch_actual_costs(azure, first=DAY, last=DAY)
    everywhere = fetch_actual_costs(azure, first=DAY, last=DAY, resource_group="")

    assert [c.workspace_tag for c in in_group] == ["ws-a"]
    assert sorted(c.workspace_tag for c in everywhere) == ["ws-a", "ws-elsewhere"]
    paths = [r["path"] for r in _queries(priced)]
    assert paths == [
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}{QUERY}",
        f"/subscriptions/{SUBSCRIPTION}{QUERY}",
    ]


def test_a_long_period_is_fetched_in_several_queries(emulator, priced, azure):
    _bill(emulator, "ws-a", DAY, hours=1)
    _bill(emulator, "ws-a", DAY + timedelta(days=35), hours=2)

    costs = fetch_actual_costs(azure, first=DAY, last=DAY + timedelta(days=40))

    assert [(c.day, c.cost) for c in costs] == [(DAY, 3), (DAY + timedelta(days=35), 6)]
    assert len(_queries(priced)) == 2


def test_a_refused_query_raises_a_permanent_cloud_error(azure, control):
    control.inject("cost.query", "authorization_failed")

    with pytest.raises(CloudError) as caught:
        fetch_actual_costs(azure, first=DAY, last=DAY)

    assert (caught.value.status, caught.value.transient) == (403, False)
