"""The team's Environments page: every member sees what the team is offered (the catalog and
the team's own) and what is inside; team admins and platform admins hide catalog entries from
the team or offer them again. Strangers get 404, as every team page."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from common.permissions import access_require
from environments.models import Environment, HiddenEnvironment
from environments.services import environment_hide, environment_unhide
from teams.models import Team
from teams.selectors import team_get

MANAGE = "teams.manage_team"


def _team(request: HttpRequest, slug: str, perm: str) -> Team:
    try:
        team = team_get(user=request.user, slug=slug)
    except Team.DoesNotExist:
        raise Http404("No such team.") from None
    access_require(user=request.user, perm=perm, obj=team)
    return team


@login_required
@require_GET
def team_environments(request: HttpRequest, slug: str) -> HttpResponse:
    """The catalog (hidden ones marked) and the team's own, by rank then name."""
    team = _team(request, slug, "teams.view_team")
    hidden = set(
        HiddenEnvironment.objects.filter(team=team).values_list("environment_id", flat=True)
    )
    rows = [
        {"environment": e, "hidden": e.pk in hidden}
        for e in Environment.objects.filter(team__isnull=True)
    ] + [{"environment": e, "hidden": False} for e in Environment.objects.filter(team=team)]
    context = {
        "team": team,
        "rows": rows,
        "can_manage": request.user.has_perm(MANAGE, team),
    }
    return render(request, "environments/team_environments.html", context)


@login_required
@require_POST
def team_environment_visibility(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """Hide (``hide=1``) or offer again a catalog environment in the team (its admins)."""
    team = _team(request, slug, MANAGE)
    environment = Environment.objects.filter(pk=pk, team__isnull=True).first()
    if environment is None:
        raise Http404("No such catalog environment.")
    change = environment_hide if request.POST.get("hide") == "1" else environment_unhide
    change(actor=request.user, team=team, environment=environment, now=timezone.now())  # type: ignore[arg-type]
    shown = "hidden from" if change is environment_hide else "offered again in"
    messages.success(request, f"{environment.name} is {shown} {team.name}.")
    return redirect("team-environments", slug=team.slug)
