"""Azure list prices: Linux pay-as-you-go VM sizes and managed-disk tiers, in USD.

Source: the Azure Retail Prices API,
https://learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices
(GET {endpoint}/api/retail/prices?api-version=2023-01-01-preview&$filter=..., no authentication;
pages of items linked by an absolute NextPageLink that is null on the last page).

Shapes: fetch_prices() and parse_items() return RetailPrice values. kind "vm": unit_price is USD
per hour of one VM of arm_sku_name (unit "1 Hour"); spot=True for the Spot meter. kind "disk":
unit_price is USD per month of one managed disk of the tier arm_sku_name, e.g. "P10 LRS"
(unit "1/Month"). kind "files": unit_price is USD per GiB a month of Azure Files premium
(provisioned v1), arm_sku_name its meterName: "Premium LRS Provisioned" (per provisioned GiB)
or "Premium LRS Snapshots" (per snapshot GiB); unit "1 GB/Month" (the API's label for GiB,
as azure.microsoft.com prices it "per GiB per month"). Money is Decimal, parsed from the JSON
text (never via float); times are aware UTC. One meter can appear more than once with
different effective_start: a price change. Pick the latest one that has started; nothing here
filters by date.

Errors: PriceApiError when the service answers an error (after retrying 429 and 5xx, honouring
Retry-After) or cannot be reached; PriceFormatError when any page is malformed or partial. Either
way no prices come back, so a sync that applies them can be all-or-nothing.

Like the rest of this package it never imports Django.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import quote, urlsplit

from azure.core import PipelineClient
from azure.core.exceptions import AzureError
from azure.core.pipeline.policies import HeadersPolicy, RetryPolicy, UserAgentPolicy
from azure.core.rest import HttpRequest, HttpResponse

from .locations import normalise_location

Client = PipelineClient[HttpRequest, HttpResponse]

DEFAULT_ENDPOINT = "https://prices.azure.com"
PRICES_PATH = "/api/retail/prices"
API_VERSION = "2023-01-01-preview"
CURRENCY = "USD"
# Users of the live API report 400 "Invalid OData parameters supplied" past about 20 comparisons
# in one $filter (and success at 15 names); vm_filter spends 3 on service, price type and region.
MAX_NAMES_PER_FILTER = 15
MAX_RETRY_WAIT = 60.0  # Seconds; a longer Retry-After is cut to this, so a sync cannot hang.

_TEXT_FIELDS = (
    "currencyCode",
    "armRegionName",
    "meterId",
    "meterName",
    "productName",
    "skuName",
    "serviceName",
    "unitOfMeasure",
    "type",
    "armSkuName",
)
_NUMBER_FIELDS = ("retailPrice", "unitPrice", "tierMinimumUnits")


@dataclass(frozen=True)
class RetailPrice:
    """One meter's list price from effective_start on.

    kind: "vm" or "disk". arm_sku_name: the VM size ("Standard_NC24ads_A100_v4") or the disk tier
    (its skuName, "P10 LRS"). region: armRegionName ("eastus"). unit_price: USD per `unit`
    ("1 Hour" for VMs, "1/Month" for disks), the item's retailPrice. effective_end: when the API
    says this price stops applying, else None. meter_id, product_name, sku_name, meter_name: as
    the API names them. currency: always "USD".
    """

    kind: str
    arm_sku_name: str
    region: str
    spot: bool
    unit_price: Decimal
    unit: str
    effective_start: datetime
    meter_id: str
    product_name: str
    sku_name: str
    meter_name: str
    currency: str = CURRENCY
    effective_end: datetime | None = None


class PriceFormatError(ValueError):
    """A page or item is not what the Retail Prices API documents; the message names which."""


class PriceApiError(Exception):
    """The Retail Prices API answered an error after retries, or could not be reached.

    status: the HTTP status, or None when no response came (connection failure, timeout).
    code and message: the service's error code and text when its body has them.
    """

    def __init__(self, status: int | None, code: str, message: str) -> None:
        super().__init__(f"Retail Prices API error ({status or 'no response'}) {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


# --- parsing ---------------------------------------------------------------------------------


def _text(item: dict[str, Any], name: str, where: str) -> str:
    value = item.get(name)
    if not isinstance(value, str):
        raise PriceFormatError(f"{where}: '{name}' is missing or not a string ({value!r})")
    return value


def _number(item: dict[str, Any], name: str, where: str) -> Decimal:
    value = item.get(name)
    if isinstance(value, float):
        # A float has already lost the exact JSON text (or is NaN/Infinity).
        raise PriceFormatError(f"{where}: '{name}' is a float; parse with parse_float=Decimal")
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise PriceFormatError(f"{where}: '{name}' is missing or not a number ({value!r})")
    number = Decimal(value)
    if not number.is_finite() or number < 0:
        raise PriceFormatError(f"{where}: '{name}' is not a price ({value!r})")
    return number


def _moment(value: Any, name: str, where: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise PriceFormatError(f"{where}: '{name}' is not an ISO 8601 time ({value!r})") from None
    # The API writes UTC with a "Z"; read a bare time the same way.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _fields(item: Any, where: str) -> dict[str, Any]:
    """The item's fields this module reads, checked and converted; PriceFormatError if not."""
    if not isinstance(item, dict):
        raise PriceFormatError(f"{where}: not a JSON object")
    fields: dict[str, Any] = {name: _text(item, name, where) for name in _TEXT_FIELDS}
    if fields["currencyCode"] != CURRENCY:
        raise PriceFormatError(f"{where}: currencyCode is {fields['currencyCode']!r}, not USD")
    fields.update({name: _number(item, name, where) for name in _NUMBER_FIELDS})
    fields["start"] = _moment(item.get("effectiveStartDate"), "effectiveStartDate", where)
    end = item.get("effectiveEndDate")
    fields["end"] = None if end is None else _moment(end, "effectiveEndDate", where)
    return fields


FILES_PRODUCT = "Premium Files"
FILES_METERS = ("Premium LRS Provisioned", "Premium LRS Snapshots")
FILES_UNITS = ("1 GB/Month", "1 GiB/Month")


def _kind(f: dict[str, Any]) -> str | None:
    if f["serviceName"] == "Virtual Machines" and f["unitOfMeasure"] == "1 Hour":
        return "vm"
    if (
        f["serviceName"] == "Storage"
        and f["productName"] == FILES_PRODUCT
        and f["meterName"] in FILES_METERS
        and f["unitOfMeasure"] in FILES_UNITS
    ):
        return "files"
    disk_meter = f["meterName"].endswith((" Disk", " Disks"))  # Not "Disk Operations"/"Mount".
    if (
        f["serviceName"] == "Storage"
        and f["productName"].endswith(" Managed Disks")
        and disk_meter
        and f["unitOfMeasure"] == "1/Month"
    ):
        return "disk"
    return None


def _pay_as_you_go(f: dict[str, Any], kind: str) -> bool:
    """Linux pay-as-you-go: not DevTest or reserved, not a volume tier, no Windows licence,
    not retired Low Priority, and not a dedicated host (a host price is no VM's price)."""
    if f["type"] != "Consumption" or f["tierMinimumUnits"] != 0:
        return False
    if kind in ("disk", "files"):
        return True
    names = (f["skuName"], f["meterName"])
    return not (
        f["productName"].endswith((" Windows", " Dedicated Host"))
        or any(name.endswith(" Low Priority") for name in names)
    )


def _to_price(f: dict[str, Any], kind: str, where: str) -> RetailPrice:
    sku = {"vm": f["armSkuName"], "files": f["meterName"]}.get(kind, f["skuName"])
    if not sku or not f["armRegionName"]:
        raise PriceFormatError(f"{where}: a {kind} price without a size or region")
    return RetailPrice(
        kind=kind,
        arm_sku_name=sku,
        region=normalise_location(f["armRegionName"]),
        spot=kind == "vm" and (f["skuName"].endswith(" Spot") or f["meterName"].endswith(" Spot")),
        unit_price=f["retailPrice"],
        unit=f["unitOfMeasure"],
        effective_start=f["start"],
        meter_id=f["meterId"],
        product_name=f["productName"],
        sku_name=f["skuName"],
        meter_name=f["meterName"],
        currency=f["currencyCode"],
        effective_end=f["end"],
    )


def parse_item(item: dict[str, Any], *, where: str = "item") -> RetailPrice:
    """One VM, managed-disk or Premium Files item as a RetailPrice, whatever its price type or
    OS: no filtering (parse_items keeps only Linux pay-as-you-go). Raises PriceFormatError for
    a malformed item, ValueError for an item that prices no VM, managed disk or Premium Files
    meter."""
    fields = _fields(item, where)
    kind = _kind(fields)
    if kind is None:
        raise ValueError(f"{where}: {fields['serviceName']!r} is not a VM, disk or file share")
    return _to_price(fields, kind, where)


def parse_items(items: list[dict[str, Any]], *, where: str = "Items") -> list[RetailPrice]:
    """The Linux pay-as-you-go VM prices and managed-disk prices among API items, in order.

    Every item is checked, kept or not (a schema change anywhere fails the whole page). Kept: VM
    items of type Consumption, first tier, not Windows, Low Priority or dedicated host (Spot
    flagged); managed-disk tiers per month. Raises PriceFormatError naming the item and field.
    """
    if not isinstance(items, list):
        raise PriceFormatError(f"{where}: not a list")
    prices = []
    for index, item in enumerate(items):
        here = f"{where}[{index}]"
        fields = _fields(item, here)
        kind = _kind(fields)
        if kind is not None and _pay_as_you_go(fields, kind):
            prices.append(_to_price(fields, kind, here))
    return prices


def parse_page(page: Any, *, where: str = "page") -> tuple[list[RetailPrice], str | None]:
    """(kept prices, NextPageLink) of one response body parsed with parse_float=Decimal.

    Raises PriceFormatError when the body is not an object, BillingCurrency is not USD, Items is
    missing or not a list, NextPageLink is absent or neither a URL string nor null, Count
    disagrees with the items (a cut-off page), or any item is malformed (see parse_items).
    """
    if not isinstance(page, dict):
        raise PriceFormatError(f"{where}: not a JSON object")
    if page.get("BillingCurrency") != CURRENCY:
        raise PriceFormatError(f"{where}: BillingCurrency is {page.get('BillingCurrency')!r}")
    items = page.get("Items")
    if not isinstance(items, list):
        raise PriceFormatError(f"{where}: 'Items' is missing or not a list")
    count = page.get("Count")
    if count is not None and (isinstance(count, bool) or count != len(items)):
        raise PriceFormatError(f"{where}: Count is {count!r} but {len(items)} items came")
    if "NextPageLink" not in page:
        raise PriceFormatError(f"{where}: 'NextPageLink' is missing")
    next_link = page["NextPageLink"]
    if next_link is not None and (not isinstance(next_link, str) or not next_link):
        raise PriceFormatError(f"{where}: NextPageLink is {next_link!r}, not a URL or null")
    return parse_items(items, where=f"{where}: Items"), next_link


# --- filters ---------------------------------------------------------------------------------


def odata_string(value: str) -> str:
    """An OData string literal: quoted, with each ' doubled ("O'Neil" -> "'O''Neil'")."""
    return "'" + value.replace("'", "''") + "'"


def _filter(service: str, region: str, field: str, names: Sequence[str]) -> str:
    unique = list(dict.fromkeys(names))
    if not unique or len(unique) > MAX_NAMES_PER_FILTER:
        raise ValueError(f"give 1 to {MAX_NAMES_PER_FILTER} names per filter, not {len(unique)}")
    alternatives = " or ".join(f"{field} eq {odata_string(name)}" for name in unique)
    return (
        f"serviceName eq {odata_string(service)} and priceType eq 'Consumption' "
        f"and armRegionName eq {odata_string(region)} and ({alternatives})"
    )


def vm_filter(*, region: str, arm_sku_names: Sequence[str]) -> str:
    """$filter for pay-as-you-go prices of these VM sizes in one region (Spot, Windows and Low
    Priority meters come too; parse_items sorts them). Raises ValueError for no names or more
    than MAX_NAMES_PER_FILTER; vm_filters() splits longer lists."""
    return _filter("Virtual Machines", region, "armSkuName", arm_sku_names)


def disk_filter(*, region: str, sku_names: Sequence[str]) -> str:
    """$filter for pay-as-you-go prices of these disk tiers ("P10 LRS") in one region.
    Raises ValueError like vm_filter; disk_filters() splits longer lists."""
    return _filter("Storage", region, "skuName", sku_names)


def files_filter(*, region: str) -> str:
    """$filter for the Premium Files meters (FILES_METERS) in one region."""
    return _filter("Storage", region, "meterName", FILES_METERS)


def _chunks(names: Sequence[str]) -> list[list[str]]:
    unique = list(dict.fromkeys(names))
    step = MAX_NAMES_PER_FILTER
    return [unique[i : i + step] for i in range(0, len(unique), step)]


def vm_filters(*, region: str, arm_sku_names: Sequence[str]) -> list[str]:
    """vm_filter over any number of sizes: one filter per MAX_NAMES_PER_FILTER names."""
    return [vm_filter(region=region, arm_sku_names=c) for c in _chunks(arm_sku_names)]


def disk_filters(*, region: str, sku_names: Sequence[str]) -> list[str]:
    """disk_filter over any number of tiers: one filter per MAX_NAMES_PER_FILTER names."""
    return [disk_filter(region=region, sku_names=c) for c in _chunks(sku_names)]


# --- HTTP ------------------------------------------------------------------------------------


class _CappedRetryPolicy(RetryPolicy[HttpRequest, HttpResponse]):
    """azure-core's retry policy, with Retry-After waits cut to MAX_RETRY_WAIT seconds."""

    def get_retry_after(self, response: Any) -> float | None:
        wait = super().get_retry_after(response)
        return None if wait is None else min(wait, MAX_RETRY_WAIT)


def _client(endpoint: str, retry_total: int, retry_backoff: float) -> Client:
    # retry_total is the single knob: lift azure-core's separate caps (3 each) with it.
    retry = _CappedRetryPolicy(
        retry_total=retry_total,
        retry_connect=retry_total,
        retry_read=retry_total,
        retry_status=retry_total,
        retry_backoff_factor=retry_backoff,
        retry_backoff_max=MAX_RETRY_WAIT,
    )
    policies = [
        HeadersPolicy({"Accept": "application/json"}),
        UserAgentPolicy(user_agent="gpu-portal-prices"),
        retry,
    ]
    return PipelineClient(endpoint, policies=policies)


def _error_from(response: HttpResponse) -> PriceApiError:
    code, message = response.reason or "HttpError", response.text()[:500]
    try:
        body = json.loads(response.read())
    except ValueError:
        body = None
    error = body.get("Error", body.get("error")) if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = str(error.get("Code", error.get("code", code)))
        message = str(error.get("Message", error.get("message", message)))
    elif isinstance(error, str):
        message = error
    return PriceApiError(response.status_code, code, message)


def _get_page(client: Client, url: str, timeout: float) -> Any:
    """One page's JSON (numbers as Decimal). Raises PriceApiError, PriceFormatError."""
    request = HttpRequest("GET", url)
    try:
        response = client.send_request(request, connection_timeout=timeout, read_timeout=timeout)
    except AzureError as exc:
        raise PriceApiError(None, type(exc).__name__, exc.message) from exc
    if response.status_code != 200:
        raise _error_from(response)
    try:
        return json.loads(response.read(), parse_float=Decimal)
    except ValueError as exc:
        raise PriceFormatError(f"{url}: the response is not JSON ({exc})") from None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or default


def first_page_url(endpoint: str, odata_filter: str) -> str:
    """The URL of a filter's first page under `endpoint` (e.g. "https://prices.azure.com")."""
    query = f"api-version={API_VERSION}&$filter={quote(odata_filter, safe='')}"
    return f"{endpoint.rstrip('/')}{PRICES_PATH}?{query}"


def _fetch_filter(
    client: Client, endpoint: str, odata_filter: str, timeout: float, max_pages: int
) -> list[RetailPrice]:
    url, seen, prices = first_page_url(endpoint, odata_filter), set(), []
    for number in range(1, max_pages + 1):
        where = f"page {number} of {odata_filter!r}"
        page_prices, next_link = parse_page(_get_page(client, url, timeout), where=where)
        prices.extend(page_prices)
        if next_link is None:
            return prices
        # The link is followed blindly otherwise: keep it on the endpoint and out of loops.
        if _origin(next_link) != _origin(endpoint) or next_link in seen:
            raise PriceFormatError(f"{where}: NextPageLink {next_link!r} leaves or loops")
        seen.add(next_link)
        url = next_link
    raise PriceFormatError(f"{odata_filter!r}: more than {max_pages} pages")


def fetch_prices(
    *,
    endpoint: str = DEFAULT_ENDPOINT,
    filters: Sequence[str],
    retry_total: int = 4,
    retry_backoff: float = 0.8,
    timeout: float = 30.0,
    max_pages: int = 1000,
) -> list[RetailPrice]:
    """Every kept price (see parse_items) matching each OData filter, all pages followed.

    endpoint: base URL of the API (an emulator's in tests). filters: $filter strings, e.g. from
    vm_filters()/disk_filters(); prices come back filter by filter, in page order. retry_total,
    retry_backoff: azure-core retries of 429/5xx/connection errors and backoff factor (seconds);
    Retry-After is honoured, up to MAX_RETRY_WAIT. timeout: seconds to connect and per read.
    max_pages: per filter, past which the answer counts as malformed.

    Raises PriceApiError (error status after retries, or unreachable) or PriceFormatError (any
    malformed page); never returns part of an answer.
    """
    base = endpoint.rstrip("/")
    prices: list[RetailPrice] = []
    with _client(base, retry_total, retry_backoff) as client:
        for odata_filter in filters:
            prices.extend(_fetch_filter(client, base, odata_filter, timeout, max_pages))
    return prices
