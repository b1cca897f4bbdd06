"""/api/v1/teams: the caller's teams with their role; one team's GPU quota and use, budget,
month spend and forecast, from the selectors the teams and spend pages use."""

from datetime import date
from decimal import Decimal
from fractions import Fraction
from typing import Any

from django.http import Http404, HttpRequest
from django.utils import timezone
from ninja import Router, Schema

from api.schemas import caller, money
from billing.month_spend import spend_month
from billing.team_selectors import team_overview_one
from teams.models import Membership, Team
from teams.selectors import team_get, team_visible_to

router = Router(tags=["teams"])


class TeamItem(Schema):
    slug: str
    name: str
    role: str | None


class TeamsOut(Schema):
    items: list[TeamItem]


@router.get("", response=TeamsOut, summary="The teams the caller sees, with their role")
def team_list(request: HttpRequest) -> Any:
    """All teams for a platform admin (role null where not a member), else the caller's."""
    roles = dict(Membership.objects.filter(user=caller(request)).values_list("team_id", "role"))
    teams = team_visible_to(user=request.user).order_by("name")
    return {"items": [{"slug": t.slug, "name": t.name, "role": roles.get(t.pk)} for t in teams]}


class QuotaLineOut(Schema):
    gpu_model: str
    gpus: int
    in_use: str  # GPUs as a decimal string: "2", "0.1429" (a MIG slice is 1/7)


class ChargeOut(Schema):
    """A share, home or booking's cost this month (billing.charges): ``meter`` "storage" or
    "reservation", ``quantity`` GiB or VMs, ``hours`` held, ``cost_usd`` to the cent."""

    meter: str
    resource: str
    sku: str
    quantity: int
    hours: str
    cost_usd: str


class TeamOut(Schema):
    slug: str
    name: str
    quota: list[QuotaLineOut]
    budget_usd: str | None
    month_spend_usd: str
    forecast_usd: str | None
    charges: list[ChargeOut]


def _team(request: HttpRequest, slug: str) -> Team:
    """The team among those the caller sees and may view (the spend page's rule); 404."""
    try:
        team = team_get(user=request.user, slug=slug)
    except Team.DoesNotExist:
        raise Http404("No such team.") from None
    if not request.user.has_perm("teams.view_team", team):
        raise Http404("No such team.")
    return team


def gpus_decimal(gpus: Fraction | int) -> str:
    """GPUs as the API writes them: a decimal string, whole numbers without decimals ("2"),
    sevenths of a MIG slice to four places ("0.1429"), never a float."""
    share = Fraction(gpus)
    if share.denominator == 1:
        return str(share.numerator)
    value = Decimal(share.numerator) / Decimal(share.denominator)
    return f"{value.quantize(Decimal('0.0001')).normalize():f}"


@router.get("/{slug}", response=TeamOut, summary="Quota, use, budget, month spend, forecast")
def team_detail(request: HttpRequest, slug: str) -> Any:
    """GPUs in use against quota per model (team_overview_one, the teams page's), and this
    month's spend and forecast (spend_month, the spend page's)."""
    team = _team(request, slug)
    now = timezone.now()
    row = team_overview_one(user=request.user, team=team, now=now)
    local = timezone.localtime(now)  # The month the spend page shows by default.
    spend = spend_month(team=team, month=date(local.year, local.month, 1), now=now)
    return {
        "slug": team.slug,
        "name": team.name,
        "quota": [
            {"gpu_model": q.gpu_model, "gpus": q.quota, "in_use": gpus_decimal(q.used)}
            for q in row.lines
        ],
        "budget_usd": money(team.monthly_budget, "0.01"),
        "month_spend_usd": money(spend.total, "0.01"),
        "forecast_usd": money(spend.forecast, "0.01"),
        "charges": [
            {
                "meter": c.meter,
                "resource": c.resource,
                "sku": c.sku,
                "quantity": c.quantity,
                "hours": money(c.hours, "0.01"),
                "cost_usd": money(c.cost, "0.01"),
            }
            for c in spend.charges
        ],
    }
