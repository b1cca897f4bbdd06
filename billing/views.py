"""The spend pages: a team's month (HTML, chart data as JSON, CSV export), and all teams' for
platform admins. Every team query starts from the teams visible to the user; a stranger gets
404, and anyone but a platform admin gets 403 on the all-teams pages."""

from datetime import UTC, date, timedelta

from django.contrib.auth.decorators import login_required
from django.http import Http404, JsonResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from billing import csv_export
from billing.forecast import FORECAST_METHOD
from billing.forms import ExportForm, MonthForm
from billing.month_spend import spend_days, spend_kinds, spend_month, spend_series
from billing.overview import spend_overview, spend_overview_chart, team_month_page
from billing.reconciliation import cost_reconciliation
from common.listing import bootstrap_form
from common.permissions import access_require
from teams.models import Team
from teams.selectors import budget_alert_list, team_get
from workspaces.backends import backends


def _team(request, slug: str) -> Team:
    try:
        team = team_get(user=request.user, slug=slug)
    except Team.DoesNotExist:
        raise Http404("No such team.") from None
    if not request.user.has_perm("teams.view_team", team):
        raise Http404("No such team.")
    return team


def _month(request, now) -> tuple[date | None, MonthForm]:
    """The month asked for (this month in the user's time zone by default), or None with the
    form's error."""
    asked = request.GET.get("month") or timezone.localtime(now).strftime("%Y-%m")
    form = MonthForm({"month": asked})
    return (form.cleaned_data["month"] if form.is_valid() else None), form


@login_required
@require_GET
def team_spend(request, slug):
    """Month-to-date spend, budget, forecast, chart, the workspaces' table, and the estimate
    against Azure's actual cost (Cost Management) where Azure has reported."""
    return _team_spend_page(request, _team(request, slug))


def _team_spend_page(request, team: Team, export: ExportForm | None = None):
    """The team's spend page for the month asked for; ``export`` is a bound export form
    whose errors the page shows (answered 400), else a fresh one for the month."""
    now = timezone.now()
    month, month_form = _month(request, now)
    if month is None:
        return render(
            request, "billing/team_spend.html", {"team": team, "month_form": month_form}, status=400
        )
    spend = spend_month(team=team, month=month, now=now)
    export = export or ExportForm(initial={"start": spend.first, "end": spend.last})
    context = {"team": team, "spend": spend, "month_form": month_form, "export": export}
    # The per-day table's columns, as in _by_day: the workspace kinds, then the charges.
    context["kind_columns"] = [(k, v["label"]) for k, v in spend_series().items()]
    context["price_notes"] = [b.price_note for b in backends() if b.price_note]
    context["method"] = FORECAST_METHOD
    context["budget_alerts"] = budget_alert_list(team=team, month=month)
    return render(request, "billing/team_spend.html", context, status=400 if export.errors else 200)


@login_required
@require_GET
def team_spend_reconciliation(request, slug):
    """The team's estimate against Azure's actual cost over the month's days: the spend
    page's panel, loaded by htmx after the page (a partial), or a page of its own."""
    team, now = _team(request, slug), timezone.now()
    month, form = _month(request, now)
    if month is None:
        return JsonResponse({"error": form.errors["month"][0]}, status=400)
    last = (month + timedelta(days=32)).replace(day=1) - timedelta(days=1)
    # Azure counts UTC days: the month's days are compared as UTC days (see the selector).
    reconciliation = cost_reconciliation(team_ids=[team.pk], first=month, last=last)
    return _reconciliation(request, reconciliation, team.name, reverse("team-spend", args=[slug]))


def _reconciliation(request, reconciliation, title: str, back: str):
    context = {"reconciliation": reconciliation, "title": title, "back": back}
    if request.htmx:
        return render(request, "billing/_reconciliation.html", context)
    return render(request, "billing/reconciliation.html", context)


@login_required
@require_GET
def team_spend_data(request, slug):
    """JSON for the chart: {"month", "currency", "days": [ISO dates], "series": {kind:
    [USD as strings, one per day]}, "kinds": {kind: {"label", "colour"}}, "total"}; 400
    {"error"} for a bad month."""
    team, now = _team(request, slug), timezone.now()
    month, form = _month(request, now)
    if month is None:
        return JsonResponse({"error": form.errors["month"][0]}, status=400)
    days, total = spend_days(team=team, month=month, now=now)
    kinds = spend_kinds()
    return JsonResponse(
        {
            "month": month.strftime("%Y-%m"),
            "currency": "USD",
            "days": [day.isoformat() for day, _ in days],
            "series": {kind: [f"{costs[kind]:.2f}" for _, costs in days] for kind in kinds},
            # Each series' legend and colour, as its kind's backend (or the charge) gives them.
            "kinds": spend_series(),
            "total": f"{total:.2f}",
        }
    )


@login_required
@require_GET
def team_spend_csv(request, slug):
    """The team's spend for a period as chargeback CSV; a bad period is the spend page with
    the export form's errors (400)."""
    team = _team(request, slug)
    form = ExportForm(request.GET)
    if not form.is_valid():
        return _team_spend_page(request, team, export=form)
    return _csv(form, [team], team.slug)


def _csv(form: ExportForm, teams, label: str) -> StreamingHttpResponse:
    """Chargeback CSV of ``teams`` over the valid ``form``'s period (start, end)."""
    start, end = form.cleaned_data["start"], form.cleaned_data["end"]
    table = csv_export.spend_export(teams=teams, first=start, last=end, now=timezone.now())
    response = StreamingHttpResponse(
        csv_export.lines(table), content_type="text/csv; charset=utf-8"
    )
    name = f"spend-{label}-{start:%Y%m%d}-{end:%Y%m%d}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def _platform_admin(request) -> None:
    access_require(
        user=request.user,
        perm="billing.view_all_spend",
        message="Only platform admins see all teams' spend.",
    )


@login_required
@require_GET
def platform_spend(request):
    """Every team's month so far (spend, budget use, forecast, runway) and the top
    workspaces across teams, for platform admins (403 for others)."""
    _platform_admin(request)
    return _platform_spend_page(request)


def _platform_spend_page(request, export: ExportForm | None = None):
    """All teams' spend page; ``export`` is a bound export form whose errors it shows (400)."""
    now = timezone.now()
    overview = spend_overview(teams=Team.objects.order_by("name"), now=now)
    today = timezone.localdate(now)
    table = team_month_page(overview=overview, params=request.GET)
    context = {
        "overview": overview,
        "chart": spend_overview_chart(overview=overview),
        "filters": table.filters,
        "form": bootstrap_form(table.filters.form),
        "page": table.page,
        "sort": table.sort,
        "method": FORECAST_METHOD,
        "export": export or ExportForm(initial={"start": today.replace(day=1), "end": today}),
    }
    status = 400 if context["export"].errors else 200
    if request.htmx and request.htmx.target == "team-months":  # a filter, sort or page change
        return render(request, "billing/_team_months.html", context)
    return render(request, "billing/platform_spend.html", context, status=status)


@login_required
@require_GET
def platform_spend_reconciliation(request):
    """All teams' estimate against Azure's actual cost over this UTC month, with what Azure
    could not attribute: the platform spend page's panel (htmx partial) or a page of its own;
    403 for anyone but a platform admin."""
    _platform_admin(request)
    utc_today = timezone.now().astimezone(UTC).date()
    reconciliation = cost_reconciliation(
        team_ids=list(Team.objects.values_list("pk", flat=True)),
        first=utc_today.replace(day=1),
        last=utc_today,
        include_unattributed=True,
    )
    return _reconciliation(request, reconciliation, "All teams", reverse("platform-spend"))


@login_required
@require_GET
def platform_spend_csv(request):
    """Chargeback CSV for all teams: one row per team, workspace and day; a bad period is the
    all-teams spend page with the export form's errors (400); 403 for anyone but a platform
    admin."""
    _platform_admin(request)
    form = ExportForm(request.GET)
    if not form.is_valid():
        return _platform_spend_page(request, export=form)
    return _csv(form, list(Team.objects.order_by("name")), "all-teams")
