"""What the workspace page, the API and the CLI show of a workspace's apps."""

import urllib.parse
from dataclasses import dataclass

from django.conf import settings
from django.urls import reverse

from apps_proxy.hosts import VSCODE, AppHost, app_origin
from apps_proxy.models import AdminAccess, PortShare, ShareLevel
from apps_proxy.services import app_may_open, app_target
from common.permissions import Actor
from workspaces.models import Workspace

LAB_PATH = "/lab"  # JupyterLab's own start page.
# The Terminal link's ``next``: the proxy opens a terminal in JupyterLab (apps_proxy.terminal).
TERMINAL_PATH = "/_portal/terminal"


def app_enter_url(app: AppHost, path: str = "/") -> str:
    """The portal URL that signs in, checks, and sends the browser into the app at ``path``."""
    query = urllib.parse.urlencode({"host": app.label, "next": path})
    return f"{settings.PORTAL_URL}{reverse('apps_proxy:enter')}?{query}"


@dataclass(frozen=True)
class SharedPort:
    port: int
    level: str
    level_label: str
    url: str  # Stable: the app's own origin, through the portal when not signed in there yet.


@dataclass(frozen=True)
class WorkspaceApps:
    """What ``user`` may open of a workspace: JupyterLab, JupyterLab with a new terminal
    (``terminal``) and VS Code (None when they may not or it runs none), its shared ports they
    may open, and for its owner the controls."""

    jupyterlab: str | None
    ports: list[SharedPort]
    manage: bool
    admin_access: bool
    vscode: str | None = None
    terminal: str | None = None


def workspace_apps(*, user: Actor, workspace: Workspace) -> WorkspaceApps:
    ide = AppHost(workspace.pk)
    can_ide = app_may_open(user=user, workspace=workspace, port=None)
    target = app_target(workspace=workspace, port=None) if can_ide else None
    running = target is not None
    vscode = app_enter_url(AppHost(workspace.pk, app=VSCODE)) if target and target.vscode else None
    shares = PortShare.objects.filter(workspace=workspace, stopped_at=None).order_by("port")
    labels = dict(ShareLevel.choices)
    ports = [
        SharedPort(
            s.port, s.level, str(labels[s.level]), app_origin(AppHost(workspace.pk, s.port)) + "/"
        )
        for s in shares
        if app_may_open(user=user, workspace=workspace, port=s.port)
    ]
    manage = bool(user.has_perm("apps_proxy.manage_apps", workspace))
    return WorkspaceApps(
        jupyterlab=app_enter_url(ide, LAB_PATH) if running else None,
        vscode=vscode,
        terminal=app_enter_url(ide, TERMINAL_PATH) if running else None,
        ports=ports,
        manage=manage,
        admin_access=manage
        and AdminAccess.objects.filter(workspace=workspace, revoked_at=None).exists(),
    )
