"""Azure's actual cost per workspace tag and UTC day, from Cost Management.

Source: the Cost Management Query API (POST {scope}/providers/Microsoft.CostManagement/query,
api-version 2022-10-01 through azure-mgmt-costmanagement), asked for ActualCost summed per day
and grouped by one tag key. The answer (examples in Azure/azure-rest-api-specs,
specification/cost-management/.../examples/ResourceGroupQueryGrouping.json) is a table:

    {"properties": {"nextLink": null | "<same URL>&$skiptoken=...",
                    "columns": [{"name": "Cost", "type": "Number"}, {"name": "UsageDate",
                                "type": "Number"}, {"name": "TagKey", "type": "String"},
                                {"name": "TagValue", "type": "String"},
                                {"name": "Currency", "type": "String"}],
                    "rows": [[12.5, 20261102, "workspace", "<tag value>", "USD"], ...]}}

Columns are found by name (Azure does not promise their order). UsageDate is the UTC day as the
number yyyymmdd. Cost of resources without the tag comes back, by design, with a null TagValue
(TagKey the tag asked for, or empty/null): it is reported as untagged, workspace_tag "", and the
caller counts it as unattributed cost. A page's nextLink is followed by POSTing
the same query again with the link's $skiptoken (the SDK has no pager for this operation).

Money: the SDK deserialises rows as Python floats, which cannot hold every cost Azure writes
(e.g. 0.009865586851323632). So each page's raw body is taken through the SDK's `cls` hook and
parsed again with json's parse_float=Decimal: costs are the exact decimals of the JSON text.

Errors: CloudError (cloud.errors) when Azure refuses or cannot be reached after retries (429s are
waited out as Cost Management asks, see clients.CostRetryPolicy); CostFormatError when any page is
malformed. Either way nothing comes back, so a caller storing the result is all-or-nothing.
Like the rest of this package it never imports Django.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from azure.core.exceptions import DecodeError, DeserializationError
from azure.mgmt.costmanagement.models import (
    QueryAggregation,
    QueryDataset,
    QueryDefinition,
    QueryGrouping,
    QueryTimePeriod,
)

from .clients import AzureSettings, cost_client
from .errors import azure_errors

TAG = "workspace"  # The tag the portal puts on each workspace's resources (its id).
# The tag the portal puts on what a team is billed for beside its workspaces (its storage
# account, its bookings' capacity reservations): the team's slug.
CHARGE_TAG = "chargeback"
COST_COLUMNS = ("Cost", "PreTaxCost")  # Cost Management's names for the summed cost.
MAX_DAYS_PER_QUERY = 31  # Daily rows over a longer period are truncated by the service.
UNTAGGED = ""


@dataclass(frozen=True)
class ActualCost:
    """What Azure charged for the resources carrying ``workspace_tag`` (UNTAGGED "" for those
    without the tag) on one UTC ``day``: ``cost`` in ``currency`` (Decimal, exact)."""

    day: date
    workspace_tag: str
    cost: Decimal
    currency: str

    @property
    def tagged(self) -> bool:
        return self.workspace_tag != UNTAGGED


class CostFormatError(ValueError):
    """A Cost Management answer is not the table we asked for; the message says where."""


# --- parsing ---------------------------------------------------------------------------------


def _columns(properties: dict[str, Any], where: str) -> dict[str, int]:
    """{lower-case column name: index}, each column checked to be {"name": str, "type": str}."""
    columns = properties.get("columns")
    if not isinstance(columns, list) or not columns:
        raise CostFormatError(f"{where}: 'columns' is missing or empty")
    index = {}
    for n, column in enumerate(columns):
        name = column.get("name") if isinstance(column, dict) else None
        if not isinstance(name, str) or not isinstance(column.get("type"), str):
            raise CostFormatError(f"{where}: column {n} is not a {{name, type}} object")
        index[name.lower()] = n
    return index


def _find(index: dict[str, int], names: tuple[str, ...], where: str) -> int:
    found = [index[name.lower()] for name in names if name.lower() in index]
    if len(found) != 1:
        raise CostFormatError(f"{where}: expected one column named {' or '.join(names)}")
    return found[0]


def _day(value: Any, where: str) -> date:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CostFormatError(f"{where}: UsageDate {value!r} is not a yyyymmdd number")
    try:
        return date(value // 10000, value // 100 % 100, value % 100)
    except ValueError:
        raise CostFormatError(f"{where}: UsageDate {value} is not a date") from None


def _cost(value: Any, where: str) -> Decimal:
    if isinstance(value, float):
        raise CostFormatError(f"{where}: the cost is a float; parse with parse_float=Decimal")
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise CostFormatError(f"{where}: the cost {value!r} is not a number")
    cost = Decimal(value)
    if not cost.is_finite():
        raise CostFormatError(f"{where}: the cost {value!r} is not finite")
    return cost  # Negative is legitimate: Azure books refunds and credits as negative cost.


def _tag(key: Any, value: Any, tag: str, where: str) -> str:
    if value in (None, "") and (key in (None, "") or _is_tag(key, tag)):
        return UNTAGGED  # Azure's row for the cost of resources without the tag.
    if not _is_tag(key, tag):
        raise CostFormatError(f"{where}: TagKey {key!r} is not the tag asked for, {tag!r}")
    if not isinstance(value, str) or not value:
        raise CostFormatError(f"{where}: TagValue {value!r} is not a tag value")
    return value


def _is_tag(key: Any, tag: str) -> bool:
    return isinstance(key, str) and key.lower() == tag.lower()  # Tag names ignore case.


def parse_page(page: Any, *, tag: str = TAG, where: str = "page") -> tuple[list[ActualCost], str]:
    """(costs, nextLink or "") of one Query answer parsed with parse_float=Decimal.

    Raises CostFormatError when the body is not an object with properties.columns and .rows,
    a cost, UsageDate, TagKey, TagValue or Currency column is missing, a row has the wrong
    length or a bad value, or nextLink is neither a string nor null. One bad row fails the page.
    """
    properties = page.get("properties") if isinstance(page, dict) else None
    if not isinstance(properties, dict):
        raise CostFormatError(f"{where}: 'properties' is missing or not an object")
    index = _columns(properties, where)
    cost_at = _find(index, COST_COLUMNS, where)
    day_at, currency_at = _find(index, ("UsageDate",), where), _find(index, ("Currency",), where)
    key_at, value_at = _find(index, ("TagKey",), where), _find(index, ("TagValue",), where)
    rows = properties.get("rows")
    if not isinstance(rows, list):
        raise CostFormatError(f"{where}: 'rows' is missing or not a list")
    costs = []
    for n, row in enumerate(rows):
        here = f"{where}: row {n}"
        if not isinstance(row, list) or len(row) != len(index):
            raise CostFormatError(f"{here}: not a list of {len(index)} values")
        currency = row[currency_at]
        if not isinstance(currency, str) or len(currency) != 3:
            raise CostFormatError(f"{here}: Currency {currency!r} is not a currency code")
        day, cost = _day(row[day_at], here), _cost(row[cost_at], here)
        costs.append(ActualCost(day, _tag(row[key_at], row[value_at], tag, here), cost, currency))
    return costs, _next_link(properties, where)


def _next_link(properties: dict[str, Any], where: str) -> str:
    link = properties.get("nextLink")
    if link is not None and not isinstance(link, str):
        raise CostFormatError(f"{where}: nextLink {link!r} is not a URL or null")
    return link or ""


# --- querying --------------------------------------------------------------------------------


def query_definition(*, first: date, last: date, tag: str = TAG) -> QueryDefinition:
    """ActualCost summed per UTC day from ``first`` 00:00 to ``last`` 23:59:59, grouped by
    ``tag``'s values."""
    return QueryDefinition(
        type="ActualCost",
        timeframe="Custom",
        time_period=QueryTimePeriod(
            from_property=datetime.combine(first, time(), tzinfo=UTC),
            to=datetime.combine(last, time(23, 59, 59), tzinfo=UTC),
        ),
        dataset=QueryDataset(
            granularity="Daily",
            aggregation={"totalCost": QueryAggregation(name="Cost", function="Sum")},
            grouping=[QueryGrouping(type="TagKey", name=tag)],
        ),
    )


def scope_of(settings: AzureSettings, *, resource_group: str | None) -> str:
    """The query's scope: the resource group, or the whole subscription when None."""
    scope = f"subscriptions/{settings.subscription_id}"
    return f"{scope}/resourceGroups/{resource_group}" if resource_group else scope


def _raw(pipeline_response: Any, deserialized: Any, headers: Any) -> Any:
    # The SDK's `cls` hook: keep the HTTP response, whose body we parse ourselves (Decimal).
    return pipeline_response.http_response


def _page(
    client: Any, scope: str, query: QueryDefinition, params: dict[str, Any], where: str
) -> Any:
    """One page's JSON (numbers as Decimal), or None for a 204 (no cost data at all).
    Raises CloudError, CostFormatError."""
    try:
        with azure_errors():
            response = client.query.usage(scope, query, params=params, cls=_raw)
    except (DecodeError, DeserializationError) as exc:
        raise CostFormatError(f"{where}: the response is not the JSON asked for ({exc})") from None
    if response.status_code == 204:
        return None
    try:
        return json.loads(response.body(), parse_float=Decimal)
    except ValueError as exc:
        raise CostFormatError(f"{where}: the response is not JSON ({exc})") from None


def _follow(link: str, scope: str, seen: set[str], where: str) -> dict[str, str]:
    """The query parameters (other than api-version) of a nextLink that stays on this scope's
    query endpoint; CostFormatError for one that leaves, loops or has no $skiptoken."""
    parts = urlsplit(link)
    expected = f"/{scope}/providers/microsoft.costmanagement/query".lower()
    params = {k: v for k, v in parse_qsl(parts.query) if k.lower() != "api-version"}
    if parts.path.rstrip("/").lower() != expected or "$skiptoken" not in params or link in seen:
        raise CostFormatError(f"{where}: nextLink {link!r} leaves the query, loops or has no token")
    seen.add(link)
    return params


def _fetch_period(
    client: Any, scope: str, query: QueryDefinition, tag: str, max_pages: int
) -> list[ActualCost]:
    params: dict[str, str] = {}
    seen: set[str] = set()
    costs: list[ActualCost] = []
    for number in range(1, max_pages + 1):
        where = f"page {number} of {scope}"
        page = _page(client, scope, query, params, where)
        if page is None:
            return costs
        page_costs, link = parse_page(page, tag=tag, where=where)
        costs.extend(page_costs)
        if not link:
            return costs
        params = _follow(link, scope, seen, where)
    raise CostFormatError(f"{scope}: more than {max_pages} pages")


def periods(first: date, last: date) -> list[tuple[date, date]]:
    """first..last cut into consecutive periods of at most MAX_DAYS_PER_QUERY days."""
    if last < first:
        raise ValueError(f"the period ends ({last}) before it starts ({first})")
    cuts, start = [], first
    while start <= last:
        end = min(last, start + timedelta(days=MAX_DAYS_PER_QUERY - 1))
        cuts.append((start, end))
        start = end + timedelta(days=1)
    return cuts


def fetch_actual_costs(
    settings: AzureSettings,
    *,
    first: date,
    last: date,
    resource_group: str | None = None,
    tag: str = TAG,
    max_pages: int = 100,
) -> list[ActualCost]:
    """Azure's actual cost per value of ``tag`` and UTC day, for the days first..last.

    resource_group: the scope (default: settings.resource_group, where the portal creates
    everything; "" for the whole subscription). Periods longer than MAX_DAYS_PER_QUERY days are
    asked for in several queries. Rows come back in Azure's order; a (day, tag) may appear more
    than once when Azure splits it (sum them). max_pages: per query, past which the answer
    counts as malformed.

    Raises ValueError when last < first, CloudError (Azure refused, throttled past the
    retries, unreachable) or CostFormatError (any malformed page); never returns a part.
    """
    group = settings.resource_group if resource_group is None else resource_group
    scope = scope_of(settings, resource_group=group or None)
    client = cost_client(settings)
    costs: list[ActualCost] = []
    for start, end in periods(first, last):
        query = query_definition(first=start, last=end, tag=tag)
        costs.extend(_fetch_period(client, scope, query, tag, max_pages))
    return costs
