"""The team list (/teams/): each team's members, GPUs in use against its quota, and its month's
spend and burn rate. Billing composes it (billing.team_selectors), so the page is billing's;
a team's own pages are teams', and read their row through teams.hooks."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from billing.team_selectors import team_overview_page
from common.listing import bootstrap_form
from common.permissions import access_require


@login_required
@require_GET
def team_list(request: HttpRequest) -> HttpResponse:
    access_require(user=request.user, perm="teams.list_teams")
    listing = team_overview_page(user=request.user, params=request.GET, now=timezone.now())
    form = bootstrap_form(listing.filters.form)  # type: ignore[no-untyped-call]
    context = {
        "filters": listing.filters,
        "form": form,
        "page": listing.page,
        "rows": listing.rows,
        "sort": listing.sort,
        "can_set_quota": request.user.has_perm("teams.set_quota"),
    }
    htmx = request.htmx  # type: ignore[attr-defined]  # set by django-htmx's middleware
    template = "teams/_list_table.html" if htmx else "teams/list.html"
    return render(request, template, context)
