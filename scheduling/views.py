"""The queue's pages: a workspace's place in the queue (a partial of its page), the owner's
claim and "start when there is room", and the whole queue for platform admins with their
moves. Views only call the services and selectors."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from common.htmx import HtmxRequest
from common.permissions import access_require
from common.validation import is_slug
from scheduling import board, claims, moves, queue, selectors
from scheduling.autostart import autostart_set, quiet_hours_set
from scheduling.forms import AutostartForm, QuietHoursForm
from scheduling.models import AutostartSchedule, TeamQuietHours
from teams import selectors as team_selectors
from teams.models import Team
from workspaces import selectors as workspace_selectors
from workspaces.requests import WorkspaceActionError
from workspaces.states import Status


def _user(request: HttpRequest) -> User:
    """The signed-in user (every view here is login_required)."""
    assert isinstance(request.user, User)
    return request.user


@login_required
@require_GET
def queue_panel(request: HttpRequest, pk: str) -> HttpResponse:
    """The queue's part of a workspace's page (htmx partial): its place and estimate while
    queued, the claim button while its claim window is open, "start when there is room"
    while stopped. 404 for a workspace the user may not see."""
    workspace = get_object_or_404(
        workspace_selectors.workspace_visible_to(user=request.user), pk=pk
    )
    now = timezone.now()
    context = {
        "workspace": workspace,
        "place": selectors.queue_place(workspace=workspace, now=now)
        if workspace.status == Status.QUEUED
        else None,
        "claim": claims.claim_pending(workspace=workspace)
        if workspace.status == Status.RUNNING
        else None,
        "can_act": request.user.has_perm("workspaces.act_on_workspace", workspace),
        "claim_minutes": claims.claim_window().total_seconds() // 60,
        "schedule": AutostartSchedule.objects.filter(workspace=workspace).first(),
        "autostart_form": AutostartForm(),
    }
    return render(request, "scheduling/_queue_panel.html", context)


@login_required
@require_POST
def queue_action(request: HttpRequest, pk: str, queue_action: str) -> HttpResponse:
    """The owner's queue actions: ``claim`` a workspace the queue started, ``join`` the
    queue to start a stopped one."""
    workspace = get_object_or_404(
        workspace_selectors.workspace_visible_to(user=request.user), pk=pk
    )
    acts = {"claim": claims.queue_claim, "join": queue.queue_start}
    if queue_action not in acts:
        raise Http404
    act = acts[queue_action]
    try:
        act(user=_user(request), workspace=workspace, now=timezone.now())
    except WorkspaceActionError as exc:
        messages.error(request, str(exc))
    return redirect("workspaces:detail", pk=workspace.pk)


@login_required
@require_GET
def queue_page(request: HttpRequest) -> HttpResponse:
    """The whole queue in the order it is served (platform admins)."""
    access_require(user=request.user, perm="scheduling.view_queue")
    rows = selectors.queue_rows(now=timezone.now())
    moves_ = [("front", "To front"), ("back", "To back"), ("fair", "Fair place")]
    return render(request, "scheduling/queue.html", {"rows": rows, "moves": moves_})


@login_required
@require_POST
def queue_move(request: HttpRequest, pk: str, where: str) -> HttpResponse:
    """Move a queued workspace (platform admins; audited)."""
    access_require(user=request.user, perm="scheduling.move_in_queue")
    workspace = get_object_or_404(
        workspace_selectors.workspace_visible_to(user=request.user), pk=pk
    )
    target = next((w for w in moves.WHERE if w == where), None)
    if target is None:
        raise Http404
    try:
        moves.queue_move(
            actor=_user(request), workspace=workspace, where=target, now=timezone.now()
        )
    except moves.QueueChangeRefused as exc:
        messages.error(request, str(exc))
    return redirect("scheduling:queue")


@login_required
def team_queue(request: HttpRequest, slug: str) -> HttpResponse:
    """A team's part of the queue: its queued workspaces with their places, its decayed
    GPU-hours and priority; a POST sets the priority (team admins) or its limits (platform
    admins). 404 for a team the user may not see."""
    try:
        team = team_selectors.team_get(user=request.user, slug=slug)
    except Team.DoesNotExist:
        raise Http404 from None
    if request.method == "POST":
        if "start" in request.POST:
            _quiet_hours_post(request, team)
        else:
            _team_priority_post(request, team)
        return redirect("scheduling:team", slug=slug)
    quiet = TeamQuietHours.objects.filter(team=team).first()
    context = {
        "team": team,
        "quiet": quiet,
        "quiet_form": QuietHoursForm(
            initial={"start": quiet.start, "end": quiet.end, "timezone": quiet.timezone}
            if quiet
            else None
        ),
        **selectors.team_queue_summary(team=team, now=timezone.now()),
    }
    return render(request, "scheduling/team.html", context)


def _quiet_hours_post(request: HttpRequest, team: Team) -> None:
    form = QuietHoursForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give a start, an end, a time zone and the weekdays.")
        return
    data = form.cleaned_data
    try:
        quiet_hours_set(
            user=_user(request),
            team=team,
            start=data["start"],
            end=data["end"],
            timezone=data["timezone"],
            weekdays=",".join(data["weekdays"]),
            now=timezone.now(),
        )
    except WorkspaceActionError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Quiet hours saved.")


def _team_priority_post(request: HttpRequest, team: Team) -> None:
    now, data = timezone.now(), request.POST
    try:
        if "lowest" in data:
            lowest, highest = int(data["lowest"]), int(data.get("highest", ""))
            moves.team_priority_limits_set(
                actor=_user(request), team=team, lowest=lowest, highest=highest, now=now
            )
        else:
            priority = int(data.get("priority", ""))
            moves.team_priority_set(actor=_user(request), team=team, priority=priority, now=now)
    except ValueError:
        messages.error(request, "The priority and its limits are whole numbers.")
    except moves.QueueChangeRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Saved.")


@login_required
@require_GET
def free_now(request: HtmxRequest) -> HttpResponse:
    """What the team (``?team=<slug or id>``, else the user's first) can start now, per GPU model
    and region (scheduling.board); the partial for htmx (the request form loads it). 404 for
    a team the user may not see."""
    teams = team_selectors.team_visible_to(user=request.user).order_by("name")
    asked = request.GET.get("team", "")
    if asked and not is_slug(asked):
        raise Http404  # no team is named so (and PostgreSQL refuses a NUL in a query)
    # The request form sends its team field's value (the id); links send the slug.
    by_id = asked.isdecimal() and len(asked) < 10
    chosen = teams.filter(pk=int(asked)) if by_id else teams.filter(slug=asked)
    team = chosen.first() if asked else teams.first()
    if team is None and asked:
        raise Http404
    rows = board.free_now(team=team, now=timezone.now()) if team else []
    context = {"team": team, "teams": teams, "rows": rows}
    if request.htmx:
        return render(request, "scheduling/_free_now.html", context)
    return render(request, "scheduling/free_now.html", context)


@login_required
@require_POST
def autostart(request: HttpRequest, pk: str) -> HttpResponse:
    """Set a workspace's autostart schedule (its owner or an admin)."""
    workspace = get_object_or_404(
        workspace_selectors.workspace_visible_to(user=request.user), pk=pk
    )
    form = AutostartForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give the weekdays, a time and a time zone.")
        return redirect("workspaces:detail", pk=workspace.pk)
    data = form.cleaned_data
    try:
        autostart_set(
            user=_user(request),
            workspace=workspace,
            weekdays=",".join(data["weekdays"]),
            at=data["at"],
            timezone=data["timezone"],
            enabled=data["enabled"],
            now=timezone.now(),
        )
    except WorkspaceActionError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Autostart saved.")
    return redirect("workspaces:detail", pk=workspace.pk)
