"""The Azure Retail Prices API, emulated: GET /api/retail/prices answered from Cloud.prices.

As the real API (https://learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices):
no authentication, api-version optional; `$filter` takes `field eq 'value'` comparisons combined
with `and`, `or` and parentheses, values matched case-sensitively (as from api-version
2023-01-01-preview on); answers pages of at most `Cloud.price_page_size` items:

    {"BillingCurrency": "USD", "CustomerEntityId": "Default", "CustomerEntityType": "Retail",
     "Items": [...], "NextPageLink": "http://host:port/api/retail/prices?...&$skip=N" | null,
     "Count": <items on this page>}

A filter it cannot read, an unknown field, more than MAX_COMPARISONS comparisons (users of the live
API report that limit) or a bad $skip answer 400 with the real API's error body,
{"Error": {"Code": "BadRequest", "Message": "Invalid OData parameters supplied"}}.

The book holds items in the API's item shape and serves them exactly as stored, malformed or not.
Faults queued for op "price.list" (throttle, server_error, unavailable) answer 429/500/503 first.
"""

import copy
import json
import re
import urllib.parse
from pathlib import Path

from .cloud import Cloud
from .protocol import Request, Response

PRICES_PATH = "/api/retail/prices"
FAULT_OP = "price.list"
FAULT_KINDS = frozenset({"throttle", "server_error", "unavailable"})
MAX_COMPARISONS = 20
# Filter names -> item keys; `priceType` filters the item's `type`.
FILTER_FIELDS = {
    name: name
    for name in (
        "armRegionName",
        "location",
        "meterId",
        "meterName",
        "productId",
        "skuId",
        "productName",
        "skuName",
        "serviceName",
        "serviceId",
        "serviceFamily",
        "armSkuName",
    )
} | {"priceType": "type"}

# Display names the API gives the catalog's regions; others fall back to the ARM name.
LOCATIONS = {
    "centralus": "US Central",
    "eastus": "US East",
    "eastus2": "US East 2",
    "northcentralus": "US North Central",
    "southcentralus": "US South Central",
    "westus": "US West",
    "westus2": "US West 2",
    "westus3": "US West 3",
}
# The catalog snapshot does not say since when its prices apply; any fixed past date will do.


class FilterError(ValueError):
    """The $filter is outside what the emulator (and the subset the portal sends) understands."""


# --- $filter ---------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(\()|(\))|'((?:[^']|'')*)'|([A-Za-z_][A-Za-z0-9_]*))")


def _tokens(text: str) -> list[tuple[str, str]]:
    """[(kind, value)]: kind is "(", ")", "str" or "word"."""
    tokens, pos, text = [], 0, text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise FilterError(f"cannot read the filter at {text[pos : pos + 20]!r}")
        opening, closing, string, word = match.groups()
        if string is not None:
            tokens.append(("str", string.replace("''", "'")))
        elif word is not None:
            tokens.append(("word", word))
        else:
            tokens.append((opening or closing, ""))
        pos = match.end()
    return tokens


class _Parser:
    """Recursive descent: or_expr := and_expr ('or' and_expr)*; and_expr := atom ('and' atom)*;
    atom := '(' or_expr ')' | field 'eq' 'string'. Yields a tree of ("or"|"and", [...]) and
    ("eq", item key, value) nodes."""

    def __init__(self, text: str):
        self.tokens = _tokens(text)
        self.pos = 0
        self.comparisons = 0

    def parse(self) -> tuple:
        tree = self._joined("or", self._and)
        if self.pos != len(self.tokens):
            raise FilterError("unexpected text after the filter")
        if self.comparisons > MAX_COMPARISONS:
            raise FilterError(f"more than {MAX_COMPARISONS} comparisons")
        return tree

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _take(self) -> tuple[str, str]:
        token = self._peek()
        if token is None:
            raise FilterError("the filter ends too early")
        self.pos += 1
        return token

    def _joined(self, keyword: str, operand) -> tuple:
        parts = [operand()]
        while self._peek() == ("word", keyword):
            self.pos += 1
            parts.append(operand())
        return parts[0] if len(parts) == 1 else (keyword, parts)

    def _and(self) -> tuple:
        return self._joined("and", self._atom)

    def _atom(self) -> tuple:
        kind, value = self._take()
        if kind == "(":
            tree = self._joined("or", self._and)
            if self._take()[0] != ")":
                raise FilterError("a '(' is not closed")
            return tree
        if kind != "word" or value not in FILTER_FIELDS:
            raise FilterError(f"unknown field {value!r}")
        if self._take() != ("word", "eq"):
            raise FilterError("only 'eq' comparisons are supported")
        literal_kind, literal = self._take()
        if literal_kind != "str":
            raise FilterError("compare with a quoted string")
        self.comparisons += 1
        return ("eq", FILTER_FIELDS[value], literal)


def parse_filter(text: str) -> tuple | None:
    """The filter's tree (None for an empty filter). Raises FilterError."""
    return _Parser(text).parse() if text.strip() else None


def matches(tree: tuple | None, item: object) -> bool:
    """Whether an item satisfies a parsed filter; a non-object item matches only no filter."""
    if tree is None:
        return True
    if not isinstance(item, dict):
        return False
    if tree[0] == "eq":
        return item.get(tree[1]) == tree[2]
    results = (matches(part, item) for part in tree[1])
    return any(results) if tree[0] == "or" else all(results)


# --- the endpoint ----------------------------------------------------------------------------


def _error(status: int, code: str, message: str, headers: dict | None = None) -> Response:
    return Response(status, {"Error": {"Code": code, "Message": message}}, headers or {})


def _injected(cloud: Cloud) -> Response | None:
    """The response for the next fault queued for price.list, if any (the emulator's wording)."""
    fault = cloud.take_fault(FAULT_OP, FAULT_KINDS)
    if fault is None:
        return None
    retry = {"Retry-After": str(fault.retry_after)}
    if fault.kind == "throttle":
        return _error(429, "TooManyRequests", "Too many requests. Retry later.", retry)
    if fault.kind == "unavailable":
        return _error(503, "ServiceUnavailable", "The service is temporarily unavailable.", retry)
    return _error(500, "InternalServerError", "An internal error occurred. Retry later.")


def _page_link(req: Request, skip: int) -> str:
    query = [(k, req.query[k]) for k in ("api-version", "$filter") if k in req.query]
    query.append(("$skip", str(skip)))
    encoded = urllib.parse.urlencode(query, quote_via=urllib.parse.quote, safe="$")
    return f"{req.base_url}{PRICES_PATH}?{encoded}"


def _skip(text: str) -> int:
    skip = int(text)
    if skip < 0:
        raise ValueError("negative $skip")
    return skip


def list_prices(cloud: Cloud, req: Request) -> Response:
    """GET /api/retail/prices: one page of the book's items matching $filter, from $skip."""
    injected = _injected(cloud)
    if injected is not None:
        return injected
    try:
        tree = parse_filter(req.query.get("$filter", ""))
        skip = _skip(req.query.get("$skip", "0"))
    except ValueError:  # FilterError included.
        return _error(400, "BadRequest", "Invalid OData parameters supplied")
    matched = [item for item in cloud.prices if matches(tree, item)]
    page = copy.deepcopy(matched[skip : skip + cloud.price_page_size])
    following = skip + len(page)
    return Response(
        200,
        {
            "BillingCurrency": "USD",
            "CustomerEntityId": "Default",
            "CustomerEntityType": "Retail",
            "Items": page,
            "NextPageLink": _page_link(req, following) if following < len(matched) else None,
            "Count": len(page),
        },
    )


# --- the default book ------------------------------------------------------------------------


SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "retail_prices_snapshot.json"


def book_from_snapshot(path: str | Path = SNAPSHOT) -> list[dict]:
    """The items of the portal's offline price snapshot (scripts/build_price_snapshot.py, what
    `sync_prices --offline` loads), so the emulator starts with the same prices."""
    return json.loads(Path(path).read_text(encoding="utf-8"))["Items"]
