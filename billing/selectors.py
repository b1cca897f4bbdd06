"""Spend, burn rate and budget runway from UsageInterval rows. Money in USD (Decimal)."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import Q

from billing.models import UsageInterval

CENT = Decimal("0.01")
SECONDS_PER_HOUR = Decimal(3600)


def month_bounds(now: datetime) -> tuple[datetime, datetime]:
    """Start of ``now``'s calendar month and of the next one (UTC, aware)."""
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return start, (start + timedelta(days=32)).replace(day=1)


@dataclass(frozen=True)
class TeamSpend:
    """A team's month so far: ``spent`` USD since the 1st, ``burn_per_hour`` USD/hour of what
    is billable now."""

    spent: Decimal
    burn_per_hour: Decimal


def team_spend(*, team_ids, now: datetime) -> dict[int, TeamSpend]:
    """Month-to-date spend and current burn rate per team, in one query."""
    start, _ = month_bounds(now)
    rows = UsageInterval.objects.filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=start),
        team_id__in=team_ids,
        started_at__lt=now,
    ).values_list("team_id", "started_at", "ended_at", "price_per_hour")
    spent: dict[int, Decimal] = {}
    burn: dict[int, Decimal] = {}
    for team_id, started, ended, price in rows:
        seconds = Decimal((min(ended or now, now) - max(started, start)).total_seconds())
        spent[team_id] = spent.get(team_id, Decimal(0)) + seconds / SECONDS_PER_HOUR * price
        if ended is None:
            burn[team_id] = burn.get(team_id, Decimal(0)) + price
    return {
        t: TeamSpend(
            spent=spent.get(t, Decimal(0)).quantize(CENT),
            burn_per_hour=burn.get(t, Decimal(0)),
        )
        for t in team_ids
    }


def budget_runs_out(
    *, budget: Decimal, spent: Decimal, burn_per_hour: Decimal, now: datetime
) -> datetime | None:
    """When the budget (USD) is used up at ``burn_per_hour`` (USD/hour), or None if never."""
    left = budget - spent
    if left <= 0:
        return now
    if burn_per_hour <= 0:
        return None
    return now + timedelta(hours=float(left / burn_per_hour))
