"""Reads of the approval queue: requests for workspaces above quota, with each team's GPUs
in use, quota and budget, and teams' pending requests for a permanent increase. Here rather
than in teams: they measure workspaces (team_gpus_in_use, team_budget); the requests
themselves are teams.models'."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from django.contrib.auth.models import User
from django.core.paginator import Page
from django.db.models import QuerySet
from django.http import QueryDict

from common.listing import number_page, sort_from
from teams.models import Decision, GpuQuota, QuotaRequest, TeamQuotaIncrease
from teams.quota_requests import cost_estimate
from teams.selectors import team_increases_pending
from workspaces.filters import QueueFilter
from workspaces.selectors import Budget, team_budget, team_gpus_in_use


@dataclass(frozen=True)
class QueueRow:
    """One pending request with what a platform admin needs to decide it."""

    request: QuotaRequest
    gpus_used: Fraction  # of the requested GPU model, held by the team now
    gpus_quota: int
    cost: dict[str, Decimal]  # USD: hour, day, month_end
    budget: Budget  # the team's month so far


def quota_request_queue(
    *, now: datetime, requests: list[QuotaRequest] | None = None
) -> list[QueueRow]:
    """Pending requests, oldest first (or ``requests``, a list of pending QuotaRequests with
    team, requester and workspace loaded: one page of them), with each team's usage, quota
    and budget. A constant number of queries whatever the number of requests (requests with
    their team, requester and workspace; the teams' quotas; the teams' usage; the teams'
    spend)."""
    if requests is None:
        requests = list(_pending_requests().order_by("created_at"))
    team_ids = {r.team_id for r in requests}
    quotas = {
        (q.team_id, q.gpu_model): q.gpus for q in GpuQuota.objects.filter(team_id__in=team_ids)
    }
    usage = team_gpus_in_use(team_ids=team_ids)
    budgets = team_budget(teams={r.team_id: r.team for r in requests}.values(), now=now)
    return [
        QueueRow(
            request=r,
            gpus_used=usage.get(r.team_id, {}).get(r.workspace.gpu_model, Fraction(0)),
            gpus_quota=quotas.get((r.team_id, r.workspace.gpu_model), 0),
            cost=cost_estimate(price_per_hour=r.price_per_hour, now=now),
            budget=budgets[r.team_id],
        )
        for r in requests
    ]


def _pending_requests() -> QuerySet[QuotaRequest]:
    return QuotaRequest.objects.filter(decision=Decision.PENDING).select_related(
        "team", "requester", "workspace"
    )


# How long the approvals page keeps a request its reader decided, with the outcome, after the
# decision (seconds): the live refresh would otherwise take the row away at once.
DECIDED_SHOWN_SECONDS = 60


def quota_requests_decided_recently(*, user: User, now: datetime) -> list[QuotaRequest]:
    """The workspace requests ``user`` decided in the last DECIDED_SHOWN_SECONDS, newest
    first, with their workspace, team and requester. One query."""
    since = now - timedelta(seconds=DECIDED_SHOWN_SECONDS)
    return list(
        QuotaRequest.objects.filter(decided_by=user, decided_at__gte=since)
        .exclude(decision=Decision.PENDING)
        .select_related("team", "requester", "workspace")
        .order_by("-decided_at", "-pk")
    )


# The approval queue's sort keys (as in the URL) and the fields they order by.
QUEUE_SORTS = {"asked": "created_at", "price": "price_per_hour", "team": "team__name"}
# Each row of the queue asks Azure for its quota left once loaded: a short page.
QUEUE_PAGE_SIZE = 20


@dataclass
class QueuePage:
    """One page of the approval queue: ``filters`` (bound workspaces.filters.QueueFilter),
    ``page`` (Django's Page of requests), ``rows`` (its QueueRows), ``sort`` (its key)."""

    filters: QueueFilter
    page: Page[QuotaRequest]
    rows: list[QueueRow]
    sort: str


def quota_request_page(
    *, params: QueryDict, now: datetime, size: int = QUEUE_PAGE_SIZE
) -> QueuePage:
    """One page of quota_request_queue, filtered (workspaces.filters.QueueFilter: team, GPU model,
    region, kind, search) and sorted (QUEUE_SORTS; oldest first by default) as the query
    string ``params`` asks. A constant number of queries whatever the queue's length."""
    filters = QueueFilter(params, queryset=_pending_requests())
    sort = sort_from(params.get("sort"), allowed=QUEUE_SORTS, default="asked")
    page = number_page(filters.qs, sort=sort, number=params.get("page"), size=size)
    rows = quota_request_queue(now=now, requests=list(page.object_list))
    return QueuePage(filters=filters, page=page, rows=rows, sort=sort.key)


@dataclass(frozen=True)
class IncreaseRow:
    """A pending increase request with the team's current limits (GPUs, USD/month)."""

    increase: TeamQuotaIncrease
    gpus_quota: int | None  # current quota of the asked model; None when no GPUs asked
    gpus_used: Fraction | None  # GPUs, MIG slices as sevenths


def team_increase_queue() -> list[IncreaseRow]:
    """Pending increase requests of all teams with current quota and usage of the asked GPU
    model. Three queries whatever the number of requests."""
    increases = team_increases_pending()
    team_ids = {i.team_id for i in increases}
    quotas = {
        (q.team_id, q.gpu_model): q.gpus for q in GpuQuota.objects.filter(team_id__in=team_ids)
    }
    usage = team_gpus_in_use(team_ids=team_ids) if team_ids else {}
    rows = []
    for i in increases:
        asked = bool(i.gpu_model)
        quota = quotas.get((i.team_id, i.gpu_model), 0) if asked else None
        used = usage.get(i.team_id, {}).get(i.gpu_model, Fraction(0)) if asked else None
        rows.append(IncreaseRow(i, quota, used))
    return rows
