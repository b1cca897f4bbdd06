"""Workspace pages. Views only parse input, call services/selectors, and render.

htmx requests get partials; the status panel polls itself and is answered with 286 (htmx's
"stop polling") once the workspace is in a steady state.
"""

import uuid
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.module_loading import import_string
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseStopPolling

from cloud.errors import CloudError
from common.listing import bootstrap_form
from common.permissions import access_require
from teams.selectors import team_list_for_requests
from workspaces import actions, hooks, requests, resizes, selectors
from workspaces.backends import UnknownKind, backend_for
from workspaces.forms import ResizeForm, mount_choice
from workspaces.models import Workspace
from workspaces.states import STEADY, Status
from workspaces.withdrawals import workspace_withdraw


@login_required
@require_GET
def workspace_list(request):
    """The visible workspaces, filtered, sorted and paged by the query string (see
    selectors.workspace_page); htmx gets only the table, for a filter or a page change."""
    listing = selectors.workspace_page(user=request.user, params=request.GET)
    context = {
        "filters": listing.filters,
        "form": bootstrap_form(listing.filters.form),
        "page": listing.page,
        "sort": listing.page.sort.key,
        "keep": [("deleted", "1")] if request.GET.get("deleted") == "1" else [],
    }
    if not listing.page.rows and not request.GET:  # a new user's first page: say what next
        context["in_a_team"] = team_list_for_requests(user=request.user).exists()
    template = "workspaces/_list_table.html" if request.htmx else "workspaces/list.html"
    return render(request, template, context)


def request_quota_lines(user: User) -> list[tuple[Any, ...]]:
    """Per team of the user: (team, GPUs in use and quota per model, budget), for the request
    pages of every kind."""
    teams = list(team_list_for_requests(user=user))
    budgets = selectors.team_budget(teams=teams, now=timezone.now())
    overview = selectors.team_quota_overview(teams=teams)
    return [(team, lines, budgets[team.pk]) for team, lines in overview]


def _chosen_team(request):
    """The user's teams, and the one the form is for: the team asked for (POST or htmx GET),
    else the first."""
    teams = team_list_for_requests(user=request.user)
    asked = (request.POST or request.GET).get("team", "")
    team = teams.filter(pk=asked).first() if asked.isdigit() else None
    return teams, team or teams.first()


def _kind_form_kwargs(request, form_class, teams, team) -> dict:
    """The kind form's data, initial values and teams. A field of the form named in the query
    string comes chosen (the GPU memory estimate's link names a MIG slice's ``profile``)."""
    fields = getattr(form_class, "base_fields", {})
    asked = {
        k: v for k, v in request.GET.items() if k in fields and k not in ("team", "request_key")
    }
    return {
        "data": request.POST if request.method == "POST" else None,
        "initial": {"request_key": uuid.uuid4(), "team": team, **asked},
        "teams": teams,
        "user": request.user,
    }


@login_required
def workspace_request_kind(request, kind):
    """Request a workspace of a kind with its own page (a MIG slice: the profiles the team's
    node pools serve, with free instances and price per hour; an AKS namespace: a GPU quota on
    one of the team's whole-GPU pools). The kind's backend gives the form, its choices and the
    service (workspaces.backends.KindForm); workspaces.urls routes one page per kind, and
    /workspaces/new/<kind>/ for a kind registered later. A kind with a page view of its own
    (KindForm.view) gets that one; an unknown kind is a 404."""
    try:
        page = backend_for(kind).form
    except UnknownKind:
        raise Http404("No such workspace kind.") from None
    if page.view:
        return import_string(page.view)(request, kind=kind)
    teams, team = _chosen_team(request)
    kwargs = _kind_form_kwargs(request, page.form_class, teams, team)
    form = page.form_class(**page.choices(team), **kwargs)
    if request.method == "POST" and form.is_valid():
        workspace = kind_form_submit(request, form, page.request)
        if workspace is not None:
            return redirect("workspaces:detail", pk=workspace.pk)
    context = {"form": form, "team": team, "quota": request_quota_lines(request.user), "kind": kind}
    context["label"] = backend_for(kind).label
    return render(request, page.template, context)


def kind_form_submit(
    request: HttpRequest, form: forms.Form, request_service: Callable[..., Workspace]
) -> Workspace | None:
    """The workspace ``request_service`` (a KindForm's ``request``) made of the valid ``form``,
    or None with the refusal on the form's field it is about."""
    data = form.cleaned_data
    try:
        return request_service(
            user=request.user,
            team=data["team"],
            name=data["name"],
            request_key=data["request_key"],
            justification=data["justification"],
            now=timezone.now(),
            data=data,
            mounts=mount_choice(data),
        )
    except requests.WorkspaceActionError as exc:
        form.add_error(requests.refusal_field(exc), str(exc))
    return None


@login_required
@require_GET
def workspace_kubeconfig(request, pk):
    """The cluster's user kubeconfig of a MIG or namespace workspace, as a download (Entra
    ID login through kubelogin; it holds no secret; the kind's backend's connect_download).
    404 for a kind without one (a VM); back to the page with Azure's words when it refuses."""
    workspace = get_object_or_404(selectors.workspace_visible_to(user=request.user), pk=pk)
    try:
        download = backend_for(workspace.kind).connect_download(workspace)
    except CloudError as exc:
        messages.error(request, f"Azure did not give the kubeconfig: {exc.code}: {exc.message}")
        return redirect("workspaces:detail", pk=workspace.pk)
    if download is None:
        raise Http404("This workspace has no kubeconfig.")
    filename, body = download
    response = HttpResponse(body, content_type="application/yaml")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
@require_GET
def workspace_detail(request, pk):
    workspace = get_object_or_404(selectors.workspace_visible_to(user=request.user), pk=pk)
    context = {
        "workspace": workspace,
        "events": selectors.workspace_events(workspace=workspace),
        "steady": workspace.status in STEADY,
    }
    context.update(backend_for(workspace.kind).detail_context(workspace, request.user))
    if not request.htmx:
        context.update(_telemetry_context(request, workspace))
        context["cost"] = hooks.workspace_cost(workspace=workspace, now=timezone.now())
        context["rightsizing"] = panel = hooks.workspace_recommendation(workspace=workspace)
        context["resize_url"] = _advice_resize_url(request, workspace, panel)
        # The team's shares and the owner's home, where it mounts them (storage, issue 33).
        context["mounts"] = hooks.workspace_mounts_planned(workspace=workspace)
    if request.htmx:
        response = render(request, "workspaces/_status_panel.html", context)
        if context["steady"]:
            response.status_code = HttpResponseStopPolling.status_code
        return response
    return render(request, "workspaces/detail.html", context)


def _advice_resize_url(request, workspace, panel) -> str:
    """Where the right-sizing panel's Resize button posts its target: the Resize action, when
    the advice names a size of the workspace's own kind (a VM to a VM size, a MIG slice to a
    profile) and the user may resize it now; "" hides the button."""
    advice = getattr(panel, "recommendation", None)
    if advice is None or not advice.target or advice.target_kind != workspace.kind:
        return ""
    if not (workspace.can_resize and workspace.backend.resizable):
        return ""
    if not request.user.has_perm("workspaces.resize_workspace", workspace):
        return ""
    return reverse("workspaces:resize", args=[workspace.pk])


@login_required
@require_GET
def workspace_telemetry(request, pk):
    """The stop warning and the live telemetry card (htmx partial); polls itself every 15 s
    until the workspace is deleted."""
    workspace = get_object_or_404(selectors.workspace_visible_to(user=request.user), pk=pk)
    context = _telemetry_context(request, workspace)
    response = render(request, "workspaces/_telemetry_partial.html", context)
    if not context["polling"]:
        response.status_code = HttpResponseStopPolling.status_code
    return response


def _telemetry_context(request, workspace) -> dict:
    return {
        "workspace": workspace,
        "t": selectors.workspace_telemetry(workspace=workspace, now=timezone.now()),
        # Polls until deleted: a workspace that is approved or started later starts reporting.
        "polling": workspace.status != Status.DELETED,
        "can_act": request.user.has_perm("workspaces.act_on_workspace", workspace),
    }


ACTIONS = {
    "keep": actions.workspace_keep_running,
    "stop": actions.workspace_stop,
    "start": actions.workspace_start,
    "delete": actions.workspace_delete,
    "retry": actions.workspace_retry,
    "withdraw": workspace_withdraw,
}


@login_required
@require_POST
def workspace_action(request, pk, action):
    workspace = get_object_or_404(selectors.workspace_visible_to(user=request.user), pk=pk)
    # The delete's confirmation may ask to keep a snapshot of the OS disk (docs/storage.md).
    extra = (
        {"keep_snapshot": request.POST.get("keep_snapshot") == "on"} if action == "delete" else {}
    )
    try:
        ACTIONS[action](user=request.user, workspace=workspace, now=timezone.now(), **extra)
    except requests.WorkspaceActionError as exc:
        messages.error(request, str(exc))
    return redirect("workspaces:detail", pk=workspace.pk)


@login_required
def workspace_resize(request, pk):
    """The Resize form (htmx: the partial, else the page): the sizes the workspace can move to
    with GPU memory and USD/hour, cheapest first; a POST resizes (workspaces.resizes) and
    goes back to the workspace's page, or shows why not on the form. 404 for a workspace
    the user may not see, 403 for one they may not resize."""
    workspace = get_object_or_404(selectors.workspace_visible_to(user=request.user), pk=pk)
    access_require(
        user=request.user,
        perm="workspaces.resize_workspace",
        obj=workspace,
        message=resizes.NOT_YOURS,
    )
    options = resizes.resize_options(workspace=workspace, now=timezone.now())
    choices = [option.choice for option in options]
    form = ResizeForm(request.POST or None, choices=choices)
    if request.method == "POST" and form.is_valid():
        try:
            started = resizes.workspace_resize(
                user=request.user,
                workspace=workspace,
                target=form.cleaned_data["target"],
                now=timezone.now(),
                justification=form.cleaned_data["justification"],
            )
        except requests.WorkspaceActionError as exc:
            form.add_error(None, str(exc))
        else:
            if not started:
                messages.info(request, "The resize waits for a platform admin's approval.")
            page = reverse("workspaces:detail", args=[workspace.pk])
            # htmx would swap a followed redirect's whole page into the form: it goes there.
            return HttpResponseClientRedirect(page) if request.htmx else redirect(page)
    context = {"workspace": workspace, "form": form, "choices": choices, "options": options}
    template = "workspaces/_resize_form.html" if request.htmx else "workspaces/resize.html"
    return render(request, template, context, status=400 if form.errors else 200)
