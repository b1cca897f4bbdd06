"""The rules of workspace apps: tickets and sessions the app proxy authorises by, admins'
access, shared ports. Every secret is random (secrets.token_urlsafe) and stored only as its
SHA-256, so a database read gives no way in.

A ticket is what the portal hands the browser on its way to an apps host: one use, within
TICKET_SECONDS, for one user, one workspace and one app. The proxy redeems it on that host for
a session cookie that only that host is sent (host-only, HttpOnly, SameSite=Lax). Each request
on the host is authorised again (app_session_route): the workspace still running, the user
still allowed. The proxy keeps a yes for ROUTE_CACHE_SECONDS but trusts it only while the
workspace's stamp (app_stamp: its status, its owner, and a counter that revoking admins'
access and stopping or changing a share bump) is unchanged, one primary-key read per request,
so a revoked grant, a stopped share or a stopped workspace ends access at the next request.
"""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import F

from apps_proxy.hosts import VSCODE, AppHost
from apps_proxy.models import AdminAccess, AppSession, AppStamp, PortShare, ShareLevel
from common.permissions import Actor, access_require
from teams.audit import audit_record
from teams.rules import is_member_of
from workspaces.backends import IdeTarget, backend_for
from workspaces.models import Workspace
from workspaces.requests import WorkspaceActionError
from workspaces.states import Status

TICKET_SECONDS = 60
SESSION_SECONDS = 12 * 3600  # A working day: then the browser passes through the portal again.
MIN_SHARED_PORT, MAX_SHARED_PORT = 1024, 65535  # Not JupyterLab's own: it is opened as the IDE.


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class Route:
    """Where an authorised request on an apps host goes: ``host``:``port`` (before the route
    resolver), JupyterLab's ``token`` to add (None for a shared port and VS Code), and who
    asks; ``cookie`` ("name=value") to add, code-server's session for VS Code, else None."""

    host: str
    port: int
    token: str | None
    user_id: int
    cookie: str | None = None


def app_share_open(*, workspace: Workspace, port: int) -> PortShare | None:
    return PortShare.objects.filter(workspace=workspace, port=port, stopped_at=None).first()


def app_may_open(*, user: Actor, workspace: Workspace, port: int | None) -> bool:
    """Whether ``user`` may open the app: the IDE (JupyterLab, VS Code) by its rule
    (apps_proxy.rules), a shared port by its share's level (its owner at every level)."""
    if not user.is_authenticated or not user.is_active:
        return False
    if port is None:
        return bool(user.has_perm("apps_proxy.open_ide", workspace))
    share = app_share_open(workspace=workspace, port=port)
    if share is None:
        return False
    if workspace.owner_id == user.pk or share.level == ShareLevel.AUTHENTICATED:
        return True
    return share.level == ShareLevel.TEAM and bool(is_member_of(user, workspace.team))


def app_target(*, workspace: Workspace, port: int | None, app: str = "") -> IdeTarget | None:
    """Where the app listens while the workspace runs; None when it is not running or runs
    no such IDE. A shared port is on the JupyterLab's host, without its token; ``app``
    VSCODE is its VS Code (IdeTarget.vscode)."""
    if workspace.status != Status.RUNNING:
        return None
    target = backend_for(workspace.kind).ide_target(workspace)
    if target is None or (port is None and not app):
        return target
    if port is None:
        return target.vscode if app == VSCODE else None
    return IdeTarget(target.host, port, "")


def app_ticket_issue(
    *, user: User, workspace: Workspace, port: int | None, now: datetime, app: str = ""
) -> str:
    """A one-use ticket into the app (``port``, or the IDE ``app``: "" JupyterLab, VSCODE)
    for ``user``. Raises WorkspaceActionError when the user may not open it or it is not
    running (views answer 404: nobody learns it exists)."""
    if not app_may_open(user=user, workspace=workspace, port=port):
        raise WorkspaceActionError("You may not open this.")
    if app_target(workspace=workspace, port=port, app=app) is None:
        raise WorkspaceActionError("It is not running that now.")
    ticket = secrets.token_urlsafe(32)
    AppSession.objects.create(
        workspace=workspace,
        user=user,
        port=port,
        app=app if port is None else "",
        ticket_hash=secret_hash(ticket),
        ticket_expires_at=now + timedelta(seconds=TICKET_SECONDS),
        created_at=now,
    )
    return ticket


def app_ticket_redeem(*, ticket: str, app: AppHost, now: datetime) -> str | None:
    """The session secret for the ticket's app (once: a second redeem gets None), or None for
    a ticket unknown, used, expired or for another app."""
    session = secrets.token_urlsafe(32)
    redeemed = AppSession.objects.filter(
        ticket_hash=secret_hash(ticket),
        workspace_id=app.workspace_id,
        port=app.port,
        app=app.app,
        redeemed_at=None,
        ticket_expires_at__gt=now,
    ).update(
        redeemed_at=now,
        session_hash=secret_hash(session),
        expires_at=now + timedelta(seconds=SESSION_SECONDS),
    )
    return session if redeemed else None


def app_session_route(*, session: str, app: AppHost, now: datetime) -> Route | None:
    """Where a request with this session cookie on this app's host goes, or None: no such
    session for this app, expired, the user no longer allowed, the workspace not running."""
    found = (
        AppSession.objects.select_related("workspace__team", "user")
        .filter(
            session_hash=secret_hash(session),
            workspace_id=app.workspace_id,
            port=app.port,
            app=app.app,
            expires_at__gt=now,
        )
        .first()
    )
    if found is None or not app_may_open(user=found.user, workspace=found.workspace, port=app.port):
        return None
    target = app_target(workspace=found.workspace, port=app.port, app=app.app)
    if target is None:
        return None
    return Route(
        target.host, target.port, target.token or None, found.user_id, target.cookie or None
    )


Stamp = tuple[str, int, int]  # (workspace status, owner id, AppStamp.generation)


def app_stamp(*, workspace_id: UUID) -> Stamp | None:
    """What an answer of app_session_route for the workspace depends on that can end access at
    once: its status and owner, and the counter app_stamp_bump raises. One query by primary
    key. None for a workspace that no longer exists."""
    return app_stamps(workspace_ids={workspace_id}).get(workspace_id)


def app_stamps(*, workspace_ids: set[UUID]) -> dict[UUID, Stamp]:
    """app_stamp of each workspace that exists, in one query (the open WebSockets' check)."""
    rows = Workspace.objects.filter(pk__in=workspace_ids).values_list(
        "pk", "status", "owner_id", "app_stamp__generation"
    )
    return {pk: (str(status), int(owner), int(gen or 0)) for pk, status, owner, gen in rows}


def app_stamp_bump(*, workspace: Workspace) -> None:
    """Make every answer the proxy keeps for the workspace stale (call inside the change's
    transaction, so the proxy never sees the new stamp before the change)."""
    stamp, _ = AppStamp.objects.get_or_create(workspace=workspace)
    AppStamp.objects.filter(pk=stamp.pk).update(generation=F("generation") + 1)


# --- the owner's controls: admins' access, shared ports ---------------------------------------


def admin_access_grant(*, user: User, workspace: Workspace, now: datetime) -> AdminAccess:
    """Let platform admins open the workspace's JupyterLab until revoked (audited)."""
    access_require(user=user, perm="apps_proxy.manage_apps", obj=workspace)
    with transaction.atomic():
        grant = AdminAccess.objects.filter(workspace=workspace, revoked_at=None).first()
        if grant is not None:
            return grant
        grant = AdminAccess.objects.create(workspace=workspace, granted_by=user, granted_at=now)
        audit_record(
            actor=user,
            team=workspace.team,
            action="apps.admin_access.grant",
            obj=workspace,
            before={"admin_access": False},
            after={"admin_access": True},
            now=now,
        )
    return grant


def admin_access_revoke(*, user: User, workspace: Workspace, now: datetime) -> None:
    """End platform admins' access (audited); their open sessions end with it."""
    access_require(user=user, perm="apps_proxy.manage_apps", obj=workspace)
    with transaction.atomic():
        ended = AdminAccess.objects.filter(workspace=workspace, revoked_at=None).update(
            revoked_at=now
        )
        if ended:
            app_stamp_bump(workspace=workspace)
            audit_record(
                actor=user,
                team=workspace.team,
                action="apps.admin_access.revoke",
                obj=workspace,
                before={"admin_access": True},
                after={"admin_access": False},
                now=now,
            )


def port_share_create(
    *, user: User, workspace: Workspace, port: int, level: str, now: datetime
) -> PortShare:
    """Share ``port`` at ``level`` (audited); a port shared already changes level."""
    access_require(user=user, perm="apps_proxy.manage_apps", obj=workspace)
    if not MIN_SHARED_PORT <= port <= MAX_SHARED_PORT:
        raise WorkspaceActionError(f"A port from {MIN_SHARED_PORT} to {MAX_SHARED_PORT}.")
    if level not in ShareLevel.values:
        raise WorkspaceActionError("Share with: only me, my team, or every signed-in user.")
    with transaction.atomic():
        share = app_share_open(workspace=workspace, port=port)
        before = {"port": port, "level": share.level if share else None}
        if share is None:
            try:
                share = PortShare.objects.create(
                    workspace=workspace, port=port, level=level, created_by=user, created_at=now
                )
            except IntegrityError:
                raise WorkspaceActionError("That port was shared at the same time.") from None
        else:
            share.level = level
            share.save(update_fields=["level"])
            app_stamp_bump(workspace=workspace)  # A narrower level ends others' access now.
        audit_record(
            actor=user,
            team=workspace.team,
            action="apps.port_share.set",
            obj=workspace,
            before=before,
            after={"port": port, "level": level},
            now=now,
        )
    return share


def port_share_stop(*, user: User, workspace: Workspace, port: int, now: datetime) -> None:
    """Stop sharing ``port`` (audited); whoever had it open loses it at their next request."""
    access_require(user=user, perm="apps_proxy.manage_apps", obj=workspace)
    with transaction.atomic():
        share = app_share_open(workspace=workspace, port=port)
        if share is None:
            return
        share.stopped_at = now
        share.save(update_fields=["stopped_at"])
        app_stamp_bump(workspace=workspace)
        audit_record(
            actor=user,
            team=workspace.team,
            action="apps.port_share.stop",
            obj=workspace,
            before={"port": port, "level": share.level},
            after={"port": port, "level": None},
            now=now,
        )
