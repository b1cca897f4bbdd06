"""The Cost Management Query API, emulated from the emulator's own billing ledger.

POST /subscriptions/{sub}[/resourceGroups/{rg}]/providers/Microsoft.CostManagement/query
     ?api-version=...[&$skiptoken=...]

The body is a QueryDefinition as azure-mgmt-costmanagement sends it (REST shape in
Azure/azure-rest-api-specs, specification/cost-management, examples *QueryGrouping.json):
type ActualCost (or AmortizedCost/Usage: the same numbers here), timeframe Custom with
timePeriod from/to, dataset.granularity Daily, one Sum aggregation of Cost or PreTaxCost, and
at most one grouping, {"type": "TagKey", "name": <tag>}. Anything else answers 400 BadRequest.

The answer is a table of the days from..to (UTC), clipped to now:
    {"id", "name", "type": "Microsoft.CostManagement/query", "location": null, "sku": null,
     "eTag": null, "properties": {"nextLink": null | "<this URL>&$skiptoken=...",
     "columns": [{<cost name>, Number}, {UsageDate, Number}, {TagKey, String},
                 {TagValue, String}, {Currency, String}],
     "rows": [[cost, yyyymmdd, "workspace", "<value>" | null, "USD"], ...]}}
Each row is what the ledger's usages (ledger.py) cost that UTC day under one tag value: VM
compute at the book's hourly Linux price for its size and region (its Spot price when the VM's
priority is Spot), managed disks at their tier's monthly price / 730 per hour, each at the
price in effect at each moment (the Retail Prices book, prices.py); premium file shares at
"Premium LRS Provisioned" / 730 per provisioned GiB an hour; capacity reservations at their
size's hourly price times their instances (ledger.py says what each bills and when).
Resources without the tag are one untagged row a day: TagKey the tag asked for and TagValue
null, as Azure answers (the null is by design). Rows are at most Cloud.cost_page_size a page;
nextLink repeats the query with a $skiptoken (POST the same body again).

Knobs (control_api.py): per tag value, a multiplier and an extra charge per day with usage,
so tests can make Azure disagree with the portal. Faults for op "cost.query": throttle (429 with
Cost Management's x-ms-ratelimit-microsoft.costmanagement-*-retry-after headers and no
Retry-After), server_error (500), unavailable (503 + Retry-After), authorization_failed (403).
"""

import base64
import struct
import time as clock
import urllib.parse
import uuid
from collections import defaultdict
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from . import errors
from .cloud import Cloud
from .errors import ArmError
from .protocol import Request, Response, dig

FAULT_OP = "cost.query"
FAULT_KINDS = frozenset({"throttle", "server_error", "unavailable", "authorization_failed"})
HOURS_PER_MONTH = Decimal(730)  # Azure prorates monthly meters over a 730-hour month.
COST_NAMES = {"cost": "Cost", "pretaxcost": "PreTaxCost"}
TYPES = frozenset({"actualcost", "amortizedcost", "usage"})
RATE_LIMIT_BUCKETS = ("qpu", "entity", "tenant")
WIRE_PLACES = Decimal("1e-8")  # Costs go out as JSON numbers this fine (exact as floats).


def _bad(message: str) -> ArmError:
    return ArmError(400, "BadRequest", f"Invalid query definition: {message}")


# --- the query -------------------------------------------------------------------------------


def _moment(value, name: str) -> datetime:
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise _bad(f"timePeriod.{name} {value!r} is not a date-time.") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _aggregation(dataset: dict) -> tuple[str, str]:
    """(alias, cost column name) of the one Sum aggregation."""
    aggregation = dataset.get("aggregation")
    if not isinstance(aggregation, dict) or len(aggregation) != 1:
        raise _bad("give exactly one aggregation.")
    ((alias, spec),) = aggregation.items()
    name = str(dig(spec, "name") or "").lower()
    if name not in COST_NAMES or str(dig(spec, "function") or "").lower() != "sum":
        raise _bad("the emulator sums Cost or PreTaxCost only.")
    return alias, COST_NAMES[name]


def _tag(dataset: dict) -> str | None:
    grouping = dataset.get("grouping") or []
    if not isinstance(grouping, list) or len(grouping) > 1:
        raise _bad("the emulator groups by at most one tag.")
    if not grouping:
        return None
    group = grouping[0]
    if str(dig(group, "type") or "").lower() != "tagkey" or not dig(group, "name"):
        raise _bad("the emulator groups by TagKey only.")
    return str(group["name"])


def parse_query(body: dict) -> tuple[date, date, str, str | None]:
    """(first UTC day, last UTC day, cost column name, tag key or None); 400 when unsupported."""
    if str(body.get("type", "")).lower() not in TYPES:
        raise _bad(f"type {body.get('type')!r} is not ActualCost, AmortizedCost or Usage.")
    if str(body.get("timeframe", "")).lower() != "custom":
        raise _bad("the emulator answers timeframe Custom only.")
    start = _moment(dig(body, "timePeriod", "from"), "from")
    end = _moment(dig(body, "timePeriod", "to"), "to")
    if end < start:
        raise _bad("timePeriod.to is before timePeriod.from.")
    dataset = body.get("dataset") if isinstance(body.get("dataset"), dict) else {}
    if str(dataset.get("granularity", "")).lower() != "daily":
        raise _bad("the emulator answers granularity Daily only.")
    _, cost_name = _aggregation(dataset)
    return start.date(), end.date(), cost_name, _tag(dataset)


# --- prices ----------------------------------------------------------------------------------


def _start(item: dict) -> float | None:
    try:
        return _moment(item.get("effectiveStartDate"), "x").timestamp()
    except ArmError:
        return None


def _meter_key(item: dict) -> tuple | None:
    """(kind, sku lower, region, spot) an item of the book prices, or None for others."""
    unit, service = item.get("unitOfMeasure"), item.get("serviceName")
    if item.get("type") != "Consumption" or item.get("tierMinimumUnits") not in (0, 0.0):
        return None
    if service == "Virtual Machines" and unit == "1 Hour":
        names = (str(item.get("skuName", "")), str(item.get("meterName", "")))
        if str(item.get("productName", "")).endswith(" Windows") or any(
            n.endswith(" Low Priority") for n in names
        ):
            return None
        spot = any(n.endswith(" Spot") for n in names)
        return ("vm", str(item.get("armSkuName", "")).lower(), item.get("armRegionName"), spot)
    if service == "Storage" and unit == "1/Month" and str(item.get("meterName")).endswith(" Disk"):
        return ("disk", str(item.get("skuName", "")).lower(), item.get("armRegionName"), False)
    if (
        service == "Storage"
        and item.get("productName") == "Premium Files"
        and unit in ("1 GB/Month", "1 GiB/Month")
    ):  # Per GiB a month, keyed by meter: "Premium LRS Provisioned", "Premium LRS Snapshots".
        return ("files", str(item.get("meterName", "")).lower(), item.get("armRegionName"), False)
    return None


def price_book(items: list) -> dict[tuple, list[tuple[float, Decimal]]]:
    """{meter key: [(effective start, USD/hour)] sorted} from Retail Prices items; items the
    emulator cannot read are skipped (the book serves whatever tests put in it)."""
    book: dict[tuple, list] = defaultdict(list)
    for item in items:
        key = _meter_key(item) if isinstance(item, dict) else None
        price, start = (item.get("retailPrice"), _start(item)) if key else (None, None)
        if key is None or start is None or isinstance(price, bool):
            continue
        if not isinstance(price, int | float):
            continue
        hourly = Decimal(str(price)) / (HOURS_PER_MONTH if key[0] in ("disk", "files") else 1)
        book[key].append((start, hourly))
    return {key: sorted(points) for key, points in book.items()}


def _price_at(points: list[tuple[float, Decimal]], moment: float) -> Decimal:
    known = [hourly for start, hourly in points if start <= moment]
    return known[-1] if known else Decimal(0)  # Before any known price: not charged.


# --- costs -----------------------------------------------------------------------------------


def _ts(day: date) -> float:
    return datetime.combine(day, time(), tzinfo=UTC).timestamp()


def _seconds(start: float, end: float) -> Decimal:
    return Decimal(str(round(end - start, 6)))  # Emulator time to the microsecond.


def _tag_value(tags: dict, key: str | None) -> str:
    if key is None:
        return ""
    # Azure tag names are case-insensitive; their values are not.
    return next((str(v) for k, v in tags.items() if k.lower() == key.lower()), "")


def _in_scope(usage, subscription: str, resource_group: str | None) -> bool:
    if usage.subscription.lower() != subscription.lower():
        return False
    return resource_group is None or usage.resource_group.lower() == resource_group.lower()


def _pieces(start: float, end: float, points: list) -> list[tuple[float, float]]:
    """[start, end) cut at every UTC midnight and every price change inside it."""
    cuts = {s for s, _ in points if start < s < end}
    day = datetime.fromtimestamp(start, UTC).date() + timedelta(days=1)
    while _ts(day) < end:
        cuts.add(_ts(day))
        day += timedelta(days=1)
    bounds = [start, *sorted(cuts), end]
    return list(zip(bounds, bounds[1:], strict=False))


def daily_costs(
    cloud: Cloud,
    *,
    subscription: str,
    resource_group: str | None,
    first: date,
    last: date,
    tag: str | None,
    now: float,
) -> dict[tuple[date, str], Decimal]:
    """USD per (UTC day, tag value) of the ledger's usages in scope over first..last (clipped
    to `now`), before any skew. Tag value "" is untagged."""
    book = price_book(cloud.prices)
    window = (_ts(first), min(_ts(last + timedelta(days=1)), now))
    costs: dict[tuple[date, str], Decimal] = defaultdict(Decimal)
    for usage in cloud.usages:
        start, end = max(usage.start, window[0]), min(usage.end or now, window[1])
        if start >= end or not _in_scope(usage, subscription, resource_group):
            continue
        # A reservation bills its instances at its size's VM price (billed as running VMs).
        kind = "vm" if usage.kind == "reservation" else usage.kind
        points = book.get((kind, usage.sku.lower(), usage.location, usage.spot), [])
        value = _tag_value(usage.tags, tag)
        for a, b in _pieces(start, end, points):
            day = datetime.fromtimestamp(a, UTC).date()
            costs[(day, value)] += _seconds(a, b) / 3600 * _price_at(points, a) * usage.quantity
    return dict(costs)


def skewed(costs: dict[tuple[date, str], Decimal], skew: dict[str, dict]) -> dict:
    """Costs after the control knobs: each tag value's multiplier, then its extra charge per
    day (skew["*"] applies to values without their own)."""
    result = {}
    for (day, value), cost in costs.items():
        knob = skew.get(value, skew.get("*", {}))
        result[(day, value)] = cost * knob.get("multiplier", Decimal(1)) + knob.get(
            "extra_per_day", Decimal(0)
        )
    return result


# --- the endpoint ----------------------------------------------------------------------------


def _throttled(retry_after: int) -> ArmError:
    headers = {
        f"x-ms-ratelimit-microsoft.costmanagement-{b}-retry-after": str(retry_after)
        for b in RATE_LIMIT_BUCKETS
    }
    return ArmError(429, "429", "Too many requests. Please retry.", headers)


def _raise_injected(cloud: Cloud, subscription: str) -> None:
    fault = cloud.take_fault(FAULT_OP, FAULT_KINDS)
    if fault is None:
        return
    if fault.kind == "authorization_failed":  # The identity lacks Cost Management Reader.
        raise errors.authorization_failed(FAULT_OP, subscription)
    if fault.kind == "throttle":
        raise _throttled(fault.retry_after)
    if fault.kind == "unavailable":
        message = "The service is temporarily unavailable. Please retry."
        raise ArmError(503, "ServiceUnavailable", message, {"Retry-After": str(fault.retry_after)})
    raise ArmError(500, "InternalServerError", "An internal error occurred. Please retry.")


def _skip(req: Request) -> int:
    token = req.query.get("$skiptoken")
    if token is None:
        return 0
    try:
        return struct.unpack("<I", base64.b64decode(token, validate=True))[0]
    except (ValueError, struct.error):
        raise ArmError(400, "BadRequest", "Invalid skiptoken.") from None


def _next_link(req: Request, offset: int) -> str:
    token = base64.b64encode(struct.pack("<I", offset)).decode()
    query = urllib.parse.urlencode({"api-version": req.api_version, "$skiptoken": token}, safe="$")
    return f"{req.base_url}{req.path}?{query}"


def _rows(costs: dict, cost_name: str, tag: str | None) -> tuple[list, list]:
    columns = [{"name": cost_name, "type": "Number"}, {"name": "UsageDate", "type": "Number"}]
    if tag is not None:
        columns += [{"name": "TagKey", "type": "String"}, {"name": "TagValue", "type": "String"}]
    columns.append({"name": "Currency", "type": "String"})
    rows = []
    for (day, value), cost in sorted(costs.items()):
        row = [float(cost.quantize(WIRE_PLACES)), int(day.strftime("%Y%m%d"))]
        if tag is not None:
            row += [tag, value or None]  # Azure sends null for cost without the tag.
        rows.append([*row, "USD"])
    return columns, rows


def query_usage(cloud: Cloud, req: Request) -> Response:
    """POST .../providers/Microsoft.CostManagement/query: one page of daily costs."""
    _raise_injected(cloud, req.params["sub"])
    first, last, cost_name, tag = parse_query(req.json())
    skip = _skip(req)
    costs = daily_costs(
        cloud,
        subscription=req.params["sub"],
        resource_group=req.params.get("rg"),
        first=first,
        last=last,
        tag=tag,
        now=clock.time(),
    )
    columns, rows = _rows(skewed(costs, cloud.cost_skew), cost_name, tag)
    page = rows[skip : skip + cloud.cost_page_size]
    following = skip + len(page)
    name = str(uuid.uuid4())
    scope = req.path.split("/providers/")[0].strip("/")
    properties = {
        "nextLink": _next_link(req, following) if following < len(rows) else None,
        "columns": columns,
        "rows": page,
    }
    body = {"id": f"{scope}/providers/Microsoft.CostManagement/query/{name}", "name": name}
    body.update(type="Microsoft.CostManagement/query", location=None, sku=None, eTag=None)
    return Response(200, {**body, "properties": properties})
