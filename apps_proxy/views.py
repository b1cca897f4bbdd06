"""The portal's side of workspace apps: the way in (a one-use ticket to the apps host) and the
owner's controls (admins' access, shared ports). Outsiders get 404 everywhere."""

import urllib.parse

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from apps_proxy import services
from apps_proxy.hosts import app_origin, label_parse
from apps_proxy.models import ShareLevel
from apps_proxy.selectors import LAB_PATH, TERMINAL_PATH
from common.permissions import access_require
from workspaces.models import Workspace
from workspaces.requests import WorkspaceActionError
from workspaces.selectors import workspace_visible_to

# Fetch Metadata (Sec-Fetch-Site) of a navigation another site's page (or an apps host's, same
# site as the portal) started; "same-origin" is the portal's own button, "none" the user's
# (address bar, bookmark, the CLI's browser). Without the header (an old browser) it is let be.
_OTHER_SITES = frozenset({"cross-site", "same-site"})


@login_required
@require_GET
def app_enter(request: HttpRequest) -> HttpResponse:
    """``?host=<label>&next=<path>``: a ticket for the signed-in user, if they may open that
    app now, and off to the app's host to redeem it; else 404 (not theirs, not shared with
    them, not running: nobody learns which)."""
    app = label_parse(request.GET.get("host", ""))
    path = request.GET.get("next", "/")
    if app is None or not path.startswith("/") or path.startswith("//"):
        raise Http404
    if path == TERMINAL_PATH and request.headers.get("Sec-Fetch-Site") in _OTHER_SITES:
        # A link on another site (or a workspace's page) opens JupyterLab, never a terminal in
        # it: only the user's own navigation (the portal's button, the CLI, a bookmark) does.
        path = LAB_PATH
    # A port shared with every signed-in user opens for people outside its team, who cannot
    # see the workspace: the rules of app_ticket_issue decide, not the visible list.
    workspace = Workspace.objects.select_related("team").filter(pk=app.workspace_id).first()
    if workspace is None:
        raise Http404
    try:
        ticket = services.app_ticket_issue(
            user=_user(request),
            workspace=workspace,
            port=app.port,
            now=timezone.now(),
            app=app.app,
        )
    except WorkspaceActionError:
        raise Http404 from None
    query = urllib.parse.urlencode({"ticket": ticket, "next": path})
    response = redirect(f"{app_origin(app)}/_portal/auth?{query}")
    response["Referrer-Policy"] = "no-referrer"
    response["Cache-Control"] = "no-store"
    return response


def _user(request: HttpRequest) -> User:
    """The signed-in user (every view here is login_required)."""
    user = request.user
    if not isinstance(user, User):
        raise Http404
    return user


def _own_workspace(request: HttpRequest, pk: str) -> Workspace:
    workspace = get_object_or_404(workspace_visible_to(user=request.user), pk=pk)
    if not request.user.has_perm("apps_proxy.manage_apps", workspace):
        raise Http404  # Only the owner has these controls; nobody else sees them.
    return workspace


@login_required
@require_POST
def admin_access(request: HttpRequest, pk: str) -> HttpResponse:
    """POST grant=1 lets platform admins into the JupyterLab; grant=0 ends it."""
    workspace = _own_workspace(request, pk)
    access_require(user=request.user, perm="apps_proxy.manage_apps", obj=workspace)
    if request.POST.get("grant") == "1":
        services.admin_access_grant(user=_user(request), workspace=workspace, now=timezone.now())
        messages.success(request, "Platform admins may open this workspace's JupyterLab.")
    else:
        services.admin_access_revoke(user=_user(request), workspace=workspace, now=timezone.now())
        messages.success(request, "Platform admins no longer open this workspace's JupyterLab.")
    return redirect("workspaces:detail", pk=workspace.pk)


class ShareForm(forms.Form):
    port = forms.IntegerField(
        min_value=services.MIN_SHARED_PORT, max_value=services.MAX_SHARED_PORT, label="Port"
    )
    level = forms.ChoiceField(choices=ShareLevel.choices, label="Share with")


@login_required
@require_POST
def port_share(request: HttpRequest, pk: str) -> HttpResponse:
    workspace = _own_workspace(request, pk)
    form = ShareForm(request.POST)
    if not form.is_valid():
        messages.error(
            request, "; ".join(str(e) for errors in form.errors.values() for e in errors)
        )
        return redirect("workspaces:detail", pk=workspace.pk)
    try:
        services.port_share_create(
            user=_user(request),
            workspace=workspace,
            port=form.cleaned_data["port"],
            level=form.cleaned_data["level"],
            now=timezone.now(),
        )
    except WorkspaceActionError as error:
        messages.error(request, str(error))
    return redirect("workspaces:detail", pk=workspace.pk)


@login_required
@require_POST
def port_stop(request: HttpRequest, pk: str, port: int) -> HttpResponse:
    workspace = _own_workspace(request, pk)
    services.port_share_stop(
        user=_user(request), workspace=workspace, port=port, now=timezone.now()
    )
    return redirect("workspaces:detail", pk=workspace.pk)
