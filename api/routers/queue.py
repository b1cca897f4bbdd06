"""/api/v1: the fair queue (docs/scarce-gpus.md): a workspace's place and estimate, claiming a
workspace the queue started, queueing a stopped one to start, and for platform admins the
whole queue and moving an item. Each route calls what the pages call; what the caller may not
see is 404, may not do 403, what the status refuses 409."""

from typing import Any
from uuid import UUID

from django.http import Http404, HttpRequest
from django.shortcuts import get_object_or_404
from django.utils import timezone
from ninja import Router, Schema, Status

from api.auth import require_write
from api.schemas import WorkspaceOut, utc, workspace_out
from common.permissions import access_require
from common.validation import is_slug
from scheduling import board, claims, moves, queue, selectors
from teams import selectors as team_selectors
from workspaces import selectors as workspace_selectors
from workspaces.models import Workspace

router = Router(tags=["queue"])


class QueuePlaceOut(Schema):
    queued: bool
    position: int | None
    queued_total: int | None
    ahead_in_team: int | None
    starts_by: str | None
    basis: str
    waiting_reason: str
    claim_by: str | None


class QueueRowOut(Schema):
    position: int
    workspace: WorkspaceOut
    gpus: str
    team_gpu_hours: float
    priority: int
    moved: str


def _visible(request: HttpRequest, workspace_id: UUID) -> Workspace:
    visible = workspace_selectors.workspace_visible_to(user=request.user)
    return get_object_or_404(visible.select_related("team", "owner"), pk=workspace_id)


@router.get(
    "/workspaces/{workspace_id}/queue",
    response=QueuePlaceOut,
    summary="A workspace's place in the queue and when it is expected to start",
)
def queue_place(request: HttpRequest, workspace_id: UUID) -> Any:
    workspace = _visible(request, workspace_id)
    place = selectors.queue_place(workspace=workspace, now=timezone.now())
    claim = claims.claim_pending(workspace=workspace)
    return {
        "queued": place is not None,
        "position": place.position if place else None,
        "queued_total": place.queued_total if place else None,
        "ahead_in_team": place.ahead_in_team if place else None,
        "starts_by": utc(place.starts_by) if place else None,
        "basis": place.basis if place else "",
        "waiting_reason": workspace.waiting_reason,
        "claim_by": utc(claim.claim_by) if claim else None,
    }


@router.post(
    "/workspaces/{workspace_id}/claim",
    response={202: WorkspaceOut},
    summary="Claim a workspace the queue started, within its claim window",
)
def queue_claim(request: HttpRequest, workspace_id: UUID) -> Any:
    require_write(request)
    workspace = _visible(request, workspace_id)
    claims.queue_claim(user=request.user, workspace=workspace, now=timezone.now())  # type: ignore[arg-type]
    return Status(202, workspace_out(_visible(request, workspace_id)))


@router.post(
    "/workspaces/{workspace_id}/queue",
    response={202: WorkspaceOut},
    summary="Queue a stopped workspace to start when there is room",
)
def queue_join(request: HttpRequest, workspace_id: UUID) -> Any:
    require_write(request)
    workspace = _visible(request, workspace_id)
    queue.queue_start(user=request.user, workspace=workspace, now=timezone.now())  # type: ignore[arg-type]
    return Status(202, workspace_out(_visible(request, workspace_id)))


@router.get("/queue", response=list[QueueRowOut], summary="The whole queue (platform admins)")
def queue_list(request: HttpRequest) -> Any:
    access_require(user=request.user, perm="scheduling.view_queue")
    return [
        {
            "position": row.position,
            "workspace": workspace_out(row.workspace),
            "gpus": str(row.gpus),
            "team_gpu_hours": round(row.team_gpu_hours, 3),
            "priority": row.priority,
            "moved": "front" if row.pinned else "back" if row.held_back else "",
        }
        for row in selectors.queue_rows(now=timezone.now())
    ]


@router.post(
    "/queue/{workspace_id}/move/{where}",
    response={202: WorkspaceOut},
    summary="Move a queued workspace to the front, the back or its fair place (audited)",
)
def queue_move(request: HttpRequest, workspace_id: UUID, where: moves.Where) -> Any:
    require_write(request)
    access_require(user=request.user, perm="scheduling.move_in_queue")
    workspace = _visible(request, workspace_id)
    moves.queue_move(actor=request.user, workspace=workspace, where=where, now=timezone.now())  # type: ignore[arg-type]
    return Status(202, workspace_out(_visible(request, workspace_id)))


class SizeRoomOut(Schema):
    vm_size: str
    gpus: str
    azure_vms_left: int | None
    azure_problem: str
    can_start: int


class PoolRoomOut(Schema):
    pool: str
    unit: str
    free: int
    total: int


class FreeNowOut(Schema):
    gpu_model: str
    region: str
    team_quota: int
    team_gpus_left: str
    queued: int
    sizes: list[SizeRoomOut]
    pools: list[PoolRoomOut]
    next_bookings: list[str]


@router.get(
    "/free-now",
    response=list[FreeNowOut],
    summary="What the team can start now, per GPU model and region",
)
def free_now(request: HttpRequest, team: str) -> Any:
    """``team``: the team's slug (404 for a team the caller may not see)."""
    if not is_slug(team):
        raise Http404  # no team is named so (and PostgreSQL refuses a NUL in a query)
    found = get_object_or_404(team_selectors.team_visible_to(user=request.user), slug=team)
    return [
        {
            "gpu_model": row.gpu_model,
            "region": row.region,
            "team_quota": row.team_quota,
            "team_gpus_left": str(row.team_gpus_left),
            "queued": row.queued,
            "sizes": [{**vars(s), "gpus": str(s.gpus)} for s in row.sizes],
            "pools": [
                {"pool": p.pool.name, "unit": p.unit, "free": p.free, "total": p.total}
                for p in row.pools
            ],
            "next_bookings": [
                f"{b.instances} x {b.vm_size} for {b.team.slug}, {utc(b.starts_at)} to "
                f"{utc(b.ends_at)}"
                for b in row.bookings
            ],
        }
        for row in board.free_now(team=found, now=timezone.now())
    ]
