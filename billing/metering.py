"""Pure cost arithmetic: a usage interval priced at the price in effect at each moment, split
by day in a time zone. No database, no clock: callers pass prices and ``now``.

Money is USD as Decimal, exact until the caller rounds to cents for show; hours are Decimal.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import ROUND_HALF_UP, Context, Decimal
from zoneinfo import ZoneInfo

MICROSECONDS_PER_HOUR = Decimal(3_600_000_000)
_MICROSECOND = timedelta(microseconds=1)
CENT = Decimal("0.01")


@dataclass(frozen=True)
class PricePoint:
    """A price (USD/hour) in effect from ``start`` (aware) until the next point's start."""

    start: datetime
    hourly: Decimal


@dataclass(frozen=True)
class Piece:
    """Part of an interval within one local day and one price: ``hours`` at ``hourly`` USD/hour
    times the share; ``cost`` in USD. ``hourly`` is None where no price was in effect."""

    day: date
    start: datetime
    end: datetime
    hours: Decimal
    hourly: Decimal | None
    cost: Decimal


def hours_between(start: datetime, end: datetime) -> Decimal:
    """Exact hours from ``start`` to ``end`` (to the microsecond)."""
    return Decimal((end - start) // _MICROSECOND) / MICROSECONDS_PER_HOUR


_EXACT = Context(prec=80)  # enough for microseconds x a 28-digit price x a share, exactly


def cost_of(microseconds: int, hourly: Decimal, share: tuple[int, int] = (1, 1)) -> Decimal:
    """USD for ``microseconds`` at ``hourly`` USD/hour times the share (num, den). The product
    is exact and divided once, at 80 digits, so a cost that is exactly half a cent stays so
    and rounds up (dividing the hours first would leave 0.00499...9), as in SQL's exact
    numeric (billing.live_sql)."""
    num, den = share
    product = _EXACT.multiply(_EXACT.multiply(Decimal(microseconds), hourly), num)
    return _EXACT.divide(product, den * MICROSECONDS_PER_HOUR)


HOURS_PER_MONTH = Decimal(730)  # Azure prorates monthly meters (managed disks) over 730 hours
HOURLY_PLACES = 20
HOURLY_UNIT = "1 Hour"  # the Retail Prices API's unitOfMeasure of an hourly meter


def monthly_to_hourly(monthly: Decimal) -> Decimal:
    """USD/hour of a monthly price: over Azure's 730-hour month, to 20 decimal places (half
    up), a fixed scale that PostgreSQL computes alike (billing.live_sql)."""
    return _EXACT.divide(monthly, HOURS_PER_MONTH).quantize(
        Decimal(1).scaleb(-HOURLY_PLACES), rounding=ROUND_HALF_UP
    )


def price_at(prices: list[PricePoint], moment: datetime) -> PricePoint | None:
    """The point in effect at ``moment`` in ``prices`` (sorted by start), or None."""
    index = bisect.bisect_right([p.start for p in prices], moment) - 1
    return prices[index] if index >= 0 else None


def local_midnights(start: datetime, end: datetime, tz: ZoneInfo) -> list[datetime]:
    """The local midnights in ``tz`` strictly after ``start`` and before ``end``, as aware
    datetimes. A day is 23 or 25 hours long across a DST change."""
    day = start.astimezone(tz).date() + timedelta(days=1)
    midnights = []
    while (moment := datetime.combine(day, time(), tzinfo=tz)) < end:
        midnights.append(moment)
        day += timedelta(days=1)
    return midnights


def pieces(
    *,
    started_at: datetime,
    ended_at: datetime | None,
    prices: list[PricePoint],
    window: tuple[datetime, datetime],
    tz: ZoneInfo,
    share: tuple[int, int] = (1, 1),
    midnights: list[datetime] | None = None,
) -> Iterator[Piece]:
    """The interval ``[started_at, ended_at)`` (open intervals end at ``window``'s end, which
    callers set to ``now`` at most) clipped to ``window``, cut at every local midnight in
    ``tz`` and every price change, each piece priced at the price in effect at its start.
    ``midnights`` (sorted, from local_midnights over the window) saves computing them per
    interval when many share one window."""
    start, end = max(started_at, window[0]), min(ended_at or window[1], window[1])
    if start >= end:
        return
    cuts = {p.start for p in prices if start < p.start < end}
    if midnights is None:
        cuts.update(local_midnights(start, end, tz))
    else:
        lo, hi = bisect.bisect_right(midnights, start), bisect.bisect_left(midnights, end)
        cuts.update(midnights[lo:hi])
    bounds = [start, *sorted(cuts), end]
    for a, b in zip(bounds, bounds[1:], strict=False):
        point = price_at(prices, a)
        micro = (b - a) // _MICROSECOND
        hours = Decimal(micro) / MICROSECONDS_PER_HOUR
        cost = cost_of(micro, point.hourly, share) if point else Decimal(0)
        yield Piece(a.astimezone(tz).date(), a, b, hours, point.hourly if point else None, cost)


def to_cents(amount: Decimal) -> Decimal:
    """USD rounded half-up to the cent, for show and for CSV."""
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)
