"""A team's monthly budget against its month-to-date spend and burn rate (USD): the one
figure every page, email, API answer and quota check reads."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from common.months import month_bounds
from common.words import usd
from teams.models import Team
from workspaces import hooks


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


@dataclass(frozen=True)
class Budget:
    """A team's monthly budget against its spend, in USD; ``budget`` None means no limit."""

    budget: Decimal | None
    spent: Decimal
    burn_per_hour: Decimal  # USD/hour billable now
    now: datetime

    @property
    def left(self) -> Decimal | None:
        return None if self.budget is None else max(Decimal(0), self.budget - self.spent)

    def runs_out(self, extra_per_hour: Decimal = Decimal(0)) -> datetime | None:
        """When the budget is used up at the current burn plus ``extra_per_hour``; None if
        there is no budget or nothing burns."""
        if self.budget is None:
            return None
        return budget_runs_out(
            budget=self.budget,
            spent=self.spent,
            burn_per_hour=self.burn_per_hour + extra_per_hour,
            now=self.now,
        )

    def lasts_the_month(self, extra_per_hour: Decimal = Decimal(0)) -> bool:
        end = self.runs_out(extra_per_hour)
        return end is None or end >= month_bounds(self.now)[1]

    def runway_with(self, extra_per_hour: Decimal) -> str:
        """What the budget does with ``extra_per_hour`` USD/hour more burning from now: ""
        without a budget, else "lasts the month", "runs out 24 Nov" or "used up already"."""
        if self.budget is None:
            return ""
        if self.used_up:
            return "used up already"
        if self.lasts_the_month(extra_per_hour):
            return "lasts the month"
        return f"runs out {self.runs_out(extra_per_hour):%-d %b}"

    @property
    def used_up(self) -> bool:
        """Whether the month's spend has reached the budget (a budget of $0 from the start)."""
        return self.budget is not None and self.spent >= self.budget

    def sentence(self) -> str:
        """ "$1,930 of the $5,000 November budget is left; at the current rate that lasts until
        24 Nov" (or that it lasts the month, or that it is used up)."""
        if self.budget is None:
            return "No monthly budget is set."
        month = self.now.strftime("%B")
        if self.used_up:
            return f"The {usd(self.budget)} {month} budget is used up: {usd(self.spent)} spent."
        text = f"{usd(self.left)} of the {usd(self.budget)} {month} budget is left"
        end = self.runs_out()
        if self.lasts_the_month():
            return f"{text}; at the current rate that lasts the month."
        return f"{text}; at the current rate that lasts until {end:%-d %b}."


def team_budget(*, teams: Iterable[Team], now: datetime) -> dict[int, Budget]:
    """Each team's budget against its month-to-date spend and burn rate, in one query."""
    spend = hooks.team_spend(team_ids=[t.pk for t in teams], now=now)
    return {
        t.pk: Budget(t.monthly_budget, spend[t.pk].spent, spend[t.pk].burn_per_hour, now)
        for t in teams
    }
