"""The Savings pages of right-sizing: a team's advice ranked by USD a month (its admins and
platform admins), and every team's total (platform admins). A stranger to the team gets 404,
a member who is not its admin 403 (billing/rules.py). Paged with Django's Paginator (small
tables, common.listing); htmx asks for the table alone."""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from billing.rightsizing import MIN_HOURS
from billing.savings import savings_by_team, savings_of_teams, team_savings_list
from common.htmx import HtmxRequest
from common.listing import number_page
from common.permissions import access_require
from teams.models import Team
from teams.selectors import team_get

PAGE_SIZE = 25


@login_required
@require_GET
def team_savings(request: HtmxRequest, slug: str) -> HttpResponse:
    """The team's right-sizing advice, largest monthly saving first, and its total."""
    try:
        team = team_get(user=request.user, slug=slug)
    except Team.DoesNotExist:
        raise Http404("No such team.") from None
    access_require(
        user=request.user,
        perm="billing.view_team_savings",
        obj=team,
        message="Only the team's admins see its savings.",
    )
    page = number_page(
        team_savings_list(team=team), sort=None, number=request.GET.get("page"), size=PAGE_SIZE
    )
    total = savings_of_teams(team_ids=[team.pk])[team.pk]
    context = {"team": team, "page": page, "total": total, "min_hours": MIN_HOURS}
    if request.htmx:
        return render(request, "billing/_team_savings_rows.html", context)
    return render(request, "billing/team_savings.html", context)


@login_required
@require_GET
def platform_savings(request: HtmxRequest) -> HttpResponse:
    """Every team's right-sizing saving, largest first, and the total across teams."""
    access_require(
        user=request.user,
        perm="billing.view_all_savings",
        message="Only platform admins see every team's savings.",
    )
    rows = savings_by_team()
    page = number_page(rows, sort=None, number=request.GET.get("page"), size=PAGE_SIZE)
    context = {
        "page": page,
        "total": sum((r.usd_month for r in rows), start=0),
        "workspaces": sum(r.workspaces for r in rows),
    }
    if request.htmx:
        return render(request, "billing/_platform_savings_rows.html", context)
    return render(request, "billing/platform_savings.html", context)
