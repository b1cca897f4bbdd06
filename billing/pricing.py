"""Price lookup and the reference pricing: what a UsageInterval costs, in pure Python.

``price_book`` reads the Price rows (Azure Retail Prices API, synced by sync_prices) once;
``spend_reference`` prices interval records against it piece by piece (cut at each local
midnight and each price change, billing.metering.pieces), in Decimal. It is the one
definition of what usage costs: billing.live_spend uses it wherever a window spans midnights
or a price changes, and the fast paths (sums priced in SQL on PostgreSQL, billing.live_sql,
or clipped in SQL and priced in Python on SQLite) are tested against it on the same data.
Money in USD (Decimal, unrounded until a caller rounds to the cent).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import NamedTuple, Protocol
from uuid import UUID
from zoneinfo import ZoneInfo

from billing import metering
from billing.models import Price

BEGINNING = datetime(1970, 1, 1, tzinfo=UTC)

BookKey = tuple[str, str, str, bool]  # a price book key: (price kind, sku, region, spot)
PriceBook = dict[BookKey, list[metering.PricePoint]]
Window = tuple[datetime, datetime]  # aware (start, end)
Windows = dict[int, Window]  # per team id
Zones = dict[int, ZoneInfo]  # per team id


def day_start(day: date, tz: ZoneInfo) -> datetime:
    """The aware start of the local ``day`` in ``tz``."""
    return datetime.combine(day, time(), tzinfo=tz)


class SpendLine(NamedTuple):
    """Cost of one workspace's meter on one day of its team's time zone (USD, unrounded). A
    tuple: pages build thousands of them per request."""

    team_id: int
    workspace_id: UUID
    kind: str  # the workspace's: vm, mig or namespace
    day: date
    meter: str
    hours: Decimal
    cost: Decimal


class Priced(Protocol):
    """What a price is looked up by: a UsageInterval's meter price and its quoted price."""

    @property
    def price_kind(self) -> str: ...
    @property
    def sku(self) -> str: ...
    @property
    def region(self) -> str: ...
    @property
    def spot(self) -> bool: ...
    @property
    def price_per_hour(self) -> Decimal: ...


@dataclass(frozen=True, slots=True)
class IntervalRecord:
    """A UsageInterval row as the pricing reads it: the workspace's ``kind``, its ``meter``,
    the meter's price book key, the share (num/den) of the meter billed, ``started_at`` and
    ``ended_at`` (aware; None: still open) and ``price_per_hour`` quoted when it opened (USD)."""

    team_id: int
    workspace_id: UUID
    kind: str
    meter: str
    price_kind: str
    sku: str
    region: str
    spot: bool
    share_num: int
    share_den: int
    started_at: datetime
    ended_at: datetime | None
    price_per_hour: Decimal


INTERVAL_FIELDS = tuple(IntervalRecord.__dataclass_fields__)


def book_key(row: Priced) -> BookKey:
    return (row.price_kind, row.sku, row.region, row.spot)


def price_book(keys: Iterable[BookKey]) -> PriceBook:
    """Price points (USD/hour, sorted by start) per price book key for the given keys, in one
    query; none without keys."""
    keys = set(keys)
    if not keys:
        return {}
    rows = Price.objects.filter(
        kind__in={k[0] for k in keys}, sku__in={k[1] for k in keys}, region__in={k[2] for k in keys}
    ).order_by("effective_start")
    book: PriceBook = defaultdict(list)
    for p in rows:
        book[(p.kind, p.sku, p.region, p.spot)].append(
            metering.PricePoint(p.effective_start, p.hourly)
        )
    return book


def points(book: PriceBook, row: Priced) -> list[metering.PricePoint]:
    """The row's price points; before the first (or with none) the price quoted when it
    opened applies, so spend never goes unpriced."""
    quoted = metering.PricePoint(BEGINNING, row.price_per_hour)
    return [quoted, *book.get(book_key(row), [])]


def changing(book: PriceBook, windows: Iterable[Window]) -> set[BookKey]:
    """Price book keys with a price change strictly inside one of the windows."""
    bounds = list(windows)
    return {
        key
        for key, prices in book.items()
        if any(start < p.start < end for p in prices for start, end in bounds)
    }


@dataclass(slots=True)
class Total:
    """Running sum of a spend line: hours and USD (unrounded)."""

    hours: Decimal
    cost: Decimal


LineKey = tuple[int, UUID, str, date, str]  # team, workspace, kind, local day, meter


def add_priced(
    totals: dict[LineKey, Total],
    intervals: Iterable[IntervalRecord],
    book: PriceBook,
    windows: Windows,
    zones: Zones,
) -> None:
    """Add each interval's spend within its team's window to ``totals``, per local day and
    meter: the reference pricing (see the module docstring)."""
    cache: dict[tuple[str, str, str, bool, Decimal], list[metering.PricePoint]] = {}
    midnights = {t: metering.local_midnights(*w, zones[t]) for t, w in windows.items()}
    for i in intervals:
        key = (*book_key(i), i.price_per_hour)
        if key not in cache:
            cache[key] = points(book, i)
        for piece in metering.pieces(
            started_at=i.started_at,
            ended_at=i.ended_at,
            prices=cache[key],
            window=windows[i.team_id],
            tz=zones[i.team_id],
            share=(i.share_num, i.share_den),
            midnights=midnights[i.team_id],
        ):
            line = (i.team_id, i.workspace_id, i.kind, piece.day, i.meter)
            if line in totals:
                totals[line].hours += piece.hours
                totals[line].cost += piece.cost
            else:
                totals[line] = Total(piece.hours, piece.cost)


def as_lines(totals: dict[LineKey, Total]) -> list[SpendLine]:
    return [SpendLine(*key, total.hours, total.cost) for key, total in totals.items()]


def spend_reference(
    *, intervals: Iterable[IntervalRecord], book: PriceBook, windows: Windows, zones: Zones
) -> list[SpendLine]:
    """Spend per team, workspace, local day and meter of ``intervals`` within each team's
    window ``{team_id: (start, end)}`` (end at most now), priced by ``book`` (price_book).
    Pure: no query, no clock. Intervals of teams without a window are left out."""
    totals: dict[LineKey, Total] = {}
    add_priced(totals, (i for i in intervals if i.team_id in windows), book, windows, zones)
    return as_lines(totals)
