"""/api/v1/approvals: the platform admins' queue of workspace requests above quota, and the
decisions, through the approvals page's selector and teams' services. Anyone else gets 403
(teams.decide_requests), as on the page."""

from typing import Any

from django.http import Http404, HttpRequest
from django.shortcuts import get_object_or_404
from django.utils import timezone
from ninja import Field, Router, Schema

from api.auth import require_write
from api.schemas import (
    PrintableLines,
    WorkspaceOut,
    caller,
    envelope,
    money,
    page_bounds,
    utc,
    workspace_out,
)
from common.permissions import access_require
from teams import quota_requests
from teams import selectors as team_selectors
from teams.models import QuotaRequest
from workspaces import approval_selectors

router = Router(tags=["approvals"])

ONLY_ADMINS = "Only platform admins decide requests."


class ApprovalOut(Schema):
    id: int
    team: str
    requester: str
    workspace: WorkspaceOut | None
    summary: str
    justification: str
    price_per_hour: str
    over: list[str]
    created_at: str
    expires_at: str


class ApprovalsOut(Schema):
    items: list[ApprovalOut]
    count: int
    page: int
    pages: int
    next: str | None
    previous: str | None


@router.get("", response=ApprovalsOut, summary="Pending requests above quota (admins)")
def approval_list(request: HttpRequest) -> Any:
    """The approvals page's queue (approval_selectors.quota_request_page: its filters team,
    gpu_model, region, kind, q, sort), oldest first, paged by page and page_size."""
    access_require(user=request.user, perm="teams.decide_requests", message=ONLY_ADMINS)
    page, size = page_bounds(request)
    params = request.GET.copy()
    params["page"] = str(page)
    queue = approval_selectors.quota_request_page(params=params, now=timezone.now(), size=size)
    # The page past the last shows the last (Django's Paginator); the API answers it empty.
    past = queue.page.number != page
    items = [] if past else [_item(row.request) for row in queue.rows]
    count = queue.page.paginator.count
    return envelope(request, items, count=count, page=page, size=size)


def _item(r: QuotaRequest) -> dict[str, Any]:
    return {
        "id": r.pk,
        "team": r.team.slug,
        "requester": r.requester.username,
        "workspace": workspace_out(r.workspace) if r.workspace else None,
        "summary": r.summary,
        "justification": r.justification,
        "price_per_hour": money(r.price_per_hour),
        "over": [str(o) for o in r.over_quota],
        "created_at": utc(r.created_at),
        "expires_at": utc(r.expires_at),
    }


class DecisionIn(Schema):
    reason: PrintableLines = Field("", max_length=2000)


class DecisionOut(Schema):
    id: int
    decision: str


DECISIONS = {
    "approve": quota_requests.quota_request_approve,
    "reject": quota_requests.quota_request_reject,
}


def _decide(request: HttpRequest, approval_id: int, body: DecisionIn, decision: str) -> Any:
    """The approvals page's decision: 404 for a request of a team the caller does not see,
    403 unless a platform admin, 409 when already decided (DecisionError)."""
    require_write(request)
    if not 1 <= approval_id < 2**31:  # Beyond any id; the database would refuse to compare.
        raise Http404("No such request.")
    visible = QuotaRequest.objects.filter(
        team__in=team_selectors.team_visible_to(user=request.user)
    )
    pending = get_object_or_404(visible.select_related("team"), pk=approval_id)
    access_require(
        user=request.user, perm="teams.decide_requests", obj=pending.team, message=ONLY_ADMINS
    )
    decided = DECISIONS[decision](
        quota_request_id=pending.pk, actor=caller(request), comment=body.reason, now=timezone.now()
    )
    return {"id": decided.pk, "decision": decided.decision}


@router.post("/{approval_id}/approve", response=DecisionOut, summary="Approve (admins)")
def approval_approve(request: HttpRequest, approval_id: int, body: DecisionIn | None = None) -> Any:
    return _decide(request, approval_id, body or DecisionIn(reason=""), "approve")


@router.post("/{approval_id}/reject", response=DecisionOut, summary="Reject (admins)")
def approval_reject(request: HttpRequest, approval_id: int, body: DecisionIn | None = None) -> Any:
    return _decide(request, approval_id, body or DecisionIn(reason=""), "reject")
