"""/api/v1/workspaces: the list (the UI's filters, paged, with an ETag), one workspace (ETag),
the actions (stop, start, delete, retry, keep running), its history, telemetry and how to
connect. Requests (POST) are api/routers/workspace_requests.py.

Each route calls the service or selector the HTML page calls; what the caller may not see is
404 (workspace_visible_to), what they may not do 403 (the services' ActionNotAllowed), an
action the status refuses 409 (WorkspaceActionError; api/errors.py)."""

import functools
import hashlib
from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Count, Max, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from ninja import Router, Schema, Status

from api.auth import require_write
from api.errors import FieldErrors
from api.schemas import WorkspaceOut, envelope, page_bounds, utc, workspace_out
from apps_proxy.selectors import workspace_apps
from common.validation import validate_printable
from workspaces import actions, selectors
from workspaces.backends import backend_for
from workspaces.filters import workspace_ref_match
from workspaces.models import Workspace
from workspaces.withdrawals import workspace_withdraw

router = Router(tags=["workspaces"])


class WorkspacePageOut(Schema):
    items: list[WorkspaceOut]
    count: int
    page: int
    pages: int
    next: str | None
    previous: str | None


def _etag(*parts: object) -> str:
    """A weak ETag of ``parts`` (what the answer is computed from, not the answer)."""
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()[:32]
    return f'W/"{digest}"'


def _not_modified(request: HttpRequest, etag: str) -> HttpResponse | None:
    """304 when the caller's If-None-Match holds ``etag`` (or *), else None."""
    asked = request.headers.get("If-None-Match", "")
    tags = {t.strip() for t in asked.split(",")}
    if etag in tags or "*" in tags:
        response = HttpResponse(status=304)
        response["ETag"] = etag
        return response
    return None


@router.get("", response=WorkspacePageOut, summary="The workspaces the caller sees, paged")
def workspace_list(request: HttpRequest, response: HttpResponse) -> Any:
    """The list page's filters (status, kind, team slug, owner, gpu_model, region, q, sort,
    deleted=1), ``ref`` (what the CLI takes for a workspace: TEAM/NAME, NAME or an id prefix;
    workspaces.filters.workspace_ref_match), page and page_size (<= 200). 400 for a value a
    filter refuses. Queries: the filters' choices, one count with the newest change (the
    ETag), one page of rows."""
    page, size = page_bounds(request)
    filters, sort = selectors.workspace_filters(user=request.user, params=request.GET)
    if not filters.is_valid():
        raise FieldErrors(
            [
                {"loc": ["query", name], "msg": str(m)}
                for name, messages in filters.errors.items()
                for m in messages
            ]
        )
    rows = _ref_match(request, filters.qs)
    found = rows.aggregate(n=Count("pk"), newest=Max("updated_at"))
    etag = _etag(request.user.pk, sorted(request.GET.lists()), found["n"], found["newest"])
    unchanged = _not_modified(request, etag)
    if unchanged:
        return unchanged
    start = (page - 1) * size
    page_rows = list(rows.order_by(*sort.order_by)[start : start + size])
    response["ETag"] = etag
    items = [workspace_out(w) for w in page_rows]
    return envelope(request, items, count=found["n"], page=page, size=size)


def _ref_match(request: HttpRequest, rows: QuerySet[Workspace]) -> QuerySet[Workspace]:
    """``rows`` narrowed to the workspaces the ``ref`` parameter names, if it is given; a
    FieldErrors (400) for a ref that is empty, longer than 100 characters or not printable."""
    ref = request.GET.get("ref")
    if ref is None:
        return rows
    try:
        if not 1 <= len(ref) <= 100:
            raise DjangoValidationError("Give 1 to 100 characters.")
        validate_printable(ref)
    except DjangoValidationError as exc:
        raise FieldErrors([{"loc": ["query", "ref"], "msg": " ".join(exc.messages)}]) from None
    return workspace_ref_match(workspaces=rows, ref=ref)


def _visible(request: HttpRequest, workspace_id: UUID) -> Workspace:
    """The workspace if the caller may see it, with team and owner; Http404 otherwise."""
    visible = selectors.workspace_visible_to(user=request.user).select_related("team", "owner")
    return get_object_or_404(visible, pk=workspace_id)


def _workspace_etag(workspace: Workspace) -> str:
    # Every change of the row's status stamps updated_at (workspaces.states.transition).
    return _etag(workspace.pk, workspace.updated_at, workspace.status_changed_at)


@router.get("/{workspace_id}", response=WorkspaceOut, summary="One workspace (ETag)")
def workspace_get(request: HttpRequest, workspace_id: UUID, response: HttpResponse) -> Any:
    workspace = _visible(request, workspace_id)
    etag = _workspace_etag(workspace)
    unchanged = _not_modified(request, etag)
    if unchanged:
        return unchanged
    response["ETag"] = etag
    return workspace_out(workspace)


ACTIONS: dict[str, Callable[..., object]] = {
    "stop": actions.workspace_stop,
    "start": actions.workspace_start,
    "retry": actions.workspace_retry,
    "keep": actions.workspace_keep_running,
    "withdraw": workspace_withdraw,
}


def _act(request: HttpRequest, workspace_id: UUID, action: Callable[..., object]) -> Any:
    """Run the page's action on the workspace; 202 with the workspace as it is now."""
    require_write(request)
    workspace = _visible(request, workspace_id)
    action(user=request.user, workspace=workspace, now=timezone.now())
    return Status(202, workspace_out(_visible(request, workspace_id)))


def _action_route(name: str, summary: str) -> None:
    def route(request: HttpRequest, workspace_id: UUID) -> Any:
        return _act(request, workspace_id, ACTIONS[name])

    route.__name__ = f"workspace_{name}"
    router.post(f"/{{workspace_id}}/{name}", response={202: WorkspaceOut}, summary=summary)(route)


_action_route("stop", "Stop (deallocate) a running workspace")
_action_route("start", "Start a stopped workspace (quota and budget checked)")
_action_route("retry", "Retry the operation that failed")
_action_route("keep", "Keep a running workspace past its idle stop (the team's hours)")
_action_route("withdraw", "Withdraw a request waiting for approval (owner or team admin)")


@router.delete("/{workspace_id}", response={202: WorkspaceOut}, summary="Delete a workspace")
def workspace_delete(request: HttpRequest, workspace_id: UUID, keep_snapshot: bool = False) -> Any:
    """``keep_snapshot=true``: snapshot its OS disk first (a VM; docs/storage.md)."""
    return _act(
        request,
        workspace_id,
        functools.partial(actions.workspace_delete, keep_snapshot=keep_snapshot),
    )


class EventOut(Schema):
    at: str
    from_status: str
    to_status: str
    actor: str | None
    reason: str


class EventsOut(Schema):
    items: list[EventOut]


@router.get("/{workspace_id}/events", response=EventsOut, summary="Its history, oldest first")
def workspace_events(request: HttpRequest, workspace_id: UUID) -> Any:
    workspace = _visible(request, workspace_id)
    items = [
        {
            "at": utc(e.at),
            "from_status": e.from_status,
            "to_status": e.to_status,
            "actor": e.actor.username if e.actor else None,
            "reason": e.reason,
        }
        for e in selectors.workspace_events(workspace=workspace)
    ]
    return {"items": items}


@router.get("/{workspace_id}/telemetry", summary="The telemetry card of its page")
def workspace_telemetry(request: HttpRequest, workspace_id: UUID) -> dict[str, Any]:
    """The detail page's telemetry (workspaces.telemetry_view.workspace_telemetry); see
    docs/api.md for the shape."""
    workspace = _visible(request, workspace_id)
    view = selectors.workspace_telemetry(workspace=workspace, now=timezone.now())
    agent, verdict = view.agent, view.verdict
    return {
        "heartbeat_at": utc(agent.last_at) if agent else None,
        "gpus": list(agent.gpus) if agent else [],
        "top_util": view.top_util,
        "cpu_percent": agent.cpu_percent if agent else None,
        "interactive": agent.interactive if agent else 0,
        "idle": _verdict(verdict),
        "kept_until": utc(agent.kept_until) if agent else None,
        "extension_hours": view.extension_hours,
        "extensions_left": view.extensions_left,
        "sparkline": view.sparkline,
        "bucket_minutes": 15,
    }


def _verdict(verdict: Any) -> dict[str, Any] | None:
    if verdict is None:
        return None
    times: dict[str, datetime] = {
        "since": verdict.since,
        "warn_at": verdict.warn_at,
        "stop_at": verdict.stop_at,
    }
    return {
        "state": str(verdict.state),
        **{k: utc(v) for k, v in times.items()},
        "stop_reason": str(verdict.stop_reason),
    }


class SharedPortOut(Schema):
    port: int
    level: str
    url: str


class ConnectOut(Schema):
    ssh_user: str | None
    host: str | None
    ssh_command: str | None
    kubeconfig: str | None
    # Through the portal's app proxy (docs/apps.md): JupyterLab for whoever may open it while
    # it runs (else null), and the shared ports the caller may open.
    jupyterlab_url: str | None
    # VS Code in the browser (code-server), where its environment runs one; else null.
    vscode_url: str | None = None
    # JupyterLab opened with a new terminal in it (its shell in the browser); null as
    # jupyterlab_url.
    terminal_url: str | None = None
    shared_ports: list[SharedPortOut]


@router.get("/{workspace_id}/connect", response=ConnectOut, summary="How to reach it")
def workspace_connect(request: HttpRequest, workspace_id: UUID) -> Any:
    """A VM's address once it has one, and its ssh user and command when its owner gave an SSH
    key (null without: the browser is the way in); a cluster kind's user
    kubeconfig (its backend's connect_download; 502 when Azure refuses it); the browser URLs of
    its JupyterLab and shared ports the caller may open (apps_proxy)."""
    workspace = _visible(request, workspace_id)
    download = backend_for(workspace.kind).connect_download(workspace)
    apps = workspace_apps(user=request.user, workspace=workspace)
    return {
        "jupyterlab_url": apps.jupyterlab,
        "vscode_url": apps.vscode,
        "terminal_url": apps.terminal,
        "shared_ports": [{"port": p.port, "level": p.level, "url": p.url} for p in apps.ports],
        "ssh_user": (workspace.ssh_user or None) if workspace.ssh_command else None,
        "host": workspace.private_ip or None,
        "ssh_command": workspace.ssh_command or None,
        "kubeconfig": download[1].decode() if download else None,
    }
