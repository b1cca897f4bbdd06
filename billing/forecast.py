"""Month-end forecast and budget runway, from a month's spend so far and its burn rate. Pure
arithmetic: callers pass the month's bounds and ``now``. Money in USD (Decimal)."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from billing import metering

FORECAST_METHOD = (
    "Forecast: spend so far plus, for each hour left in the month, the average of the current "
    "burn rate (what runs now, at today's prices) and this month's average hourly spend."
)


def _rate(total: Decimal, burn: Decimal, start: datetime, now: datetime) -> Decimal:
    elapsed = metering.hours_between(start, now)
    trend = total / elapsed if elapsed > 0 else burn
    return (burn + trend) / 2


def forecast(
    total: Decimal, burn: Decimal, start: datetime, end: datetime, now: datetime
) -> Decimal:
    """USD at the month's ``end`` (to the cent), from ``total`` USD spent since ``start`` and
    the ``burn`` rate (USD/hour) at ``now`` (see FORECAST_METHOD)."""
    rate = _rate(total, burn, start, now)
    return metering.to_cents(total + rate * metering.hours_between(now, end))


def runs_out(
    budget: Decimal | None,
    total: Decimal,
    forecast: Decimal | None,
    end: datetime,
    now: datetime,
    tz: ZoneInfo,
) -> date | None:
    """The local day the budget is used up at the forecast's rate, if before the month ends."""
    if budget is None or forecast is None or forecast <= budget:
        return None
    if total >= budget:
        return now.astimezone(tz).date()
    rate = (forecast - total) / metering.hours_between(now, end)
    return (now + timedelta(hours=float((budget - total) / rate))).astimezone(tz).date()
