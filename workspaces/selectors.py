"""Reads of workspaces and the catalog. Every workspace query starts from workspace_visible_to."""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, TypedDict
from uuid import UUID

from django.contrib.auth.models import User
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.http import QueryDict

from common.listing import DEFAULT_PAGE_SIZE, KeysetPage, Sort, keyset_page, sort_from
from common.permissions import Actor
from teams.models import Team
from teams.selectors import team_visible_to
from workspaces import chains, hooks
from workspaces.budgets import Budget, budget_runs_out, team_budget
from workspaces.filters import WorkspaceFilter
from workspaces.models import SizeOffering, Workspace, WorkspaceEvent
from workspaces.quota import (
    QuotaCheck,
    QuotaLine,
    quota_check,
    quota_checks,
    team_gpu_usage,
    team_gpus_idle,
    team_gpus_in_use,
    team_quota_overview,
)
from workspaces.ssh_keys import ssh_public_key_or_blank
from workspaces.states import IN_PROGRESS, Status
from workspaces.telemetry_view import TelemetryView, workspace_telemetry

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

# Re-exported where callers have always found them; their homes are the modules named.
__all__ = [
    "Budget",  # workspaces.budgets
    "QuotaCheck",  # workspaces.quota
    "QuotaLine",
    "TelemetryView",  # workspaces.telemetry_view
    "budget_runs_out",
    "quota_check",
    "quota_checks",
    "team_budget",
    "team_gpu_usage",
    "team_gpus_idle",
    "team_gpus_in_use",
    "team_quota_overview",
    "workspace_telemetry",
]

# The prefilled SSH key is the newest good one among the user's newest workspaces.
SSH_KEYS_LOOKED_AT = 20


def workspace_visible_to(*, user: Actor) -> QuerySet[Workspace]:
    """Workspaces of the teams the user can see (all teams for a platform admin)."""
    return Workspace.objects.filter(team__in=team_visible_to(user=user))


def workspace_list(*, user: Actor, include_deleted: bool = False) -> QuerySet[Workspace]:
    """The user's visible workspaces, newest first, with team and owner loaded."""
    qs = workspace_visible_to(user=user).select_related("team", "owner")
    if not include_deleted:
        qs = qs.exclude(status=Status.DELETED)
    return qs


# The workspace list's sort keys (as in the URL) and the fields they order by.
WORKSPACE_SORTS = {
    "name": "name",
    "status": "status",
    "team": "team__name",
    "owner": "owner__username",
    "region": "region",
    "price": "price_per_hour",
    "created": "created_at",
}


@dataclass
class WorkspacePage:
    """One page of the workspace list: ``filters`` (the bound WorkspaceFilter, whose form
    shows the choices and errors), ``page`` (common.listing.KeysetPage of Workspace rows)."""

    filters: WorkspaceFilter
    page: KeysetPage


def workspace_page(
    *, user: Actor, params: QueryDict, size: int = DEFAULT_PAGE_SIZE
) -> WorkspacePage:
    """The page of the user's visible workspaces that the query string ``params`` (a
    QueryDict) asks for: filtered (workspaces.filters.WorkspaceFilter; a refused value is a
    form error and is left out), sorted by ``sort`` (a WORKSPACE_SORTS key, "-" for
    descending; newest first by default), after ``cursor``. Deleted ones only with
    ``deleted=1`` or when filtering by that status. One query for the rows, whatever their
    number, plus the filter form's choices."""
    filters, sort = workspace_filters(user=user, params=params)
    page = keyset_page(filters.qs, sort=sort, cursor=params.get("cursor"), size=size)
    return WorkspacePage(filters=filters, page=page)


def workspace_filters(*, user: Actor, params: QueryDict) -> tuple[WorkspaceFilter, Sort]:
    """The list's filters bound to ``params`` over the user's visible workspaces (deleted ones
    only with ``deleted=1`` or when filtering by that status), and the sort ``params`` asks
    for (WORKSPACE_SORTS; newest first by default). The list page and the API share them:
    the page leaves a refused value out, the API answers 400 (``filters.errors``)."""
    deleted = params.get("deleted") == "1" or params.get("status") == Status.DELETED
    filters = WorkspaceFilter(
        params,
        queryset=workspace_list(user=user, include_deleted=deleted),
        teams=team_visible_to(user=user),
    )
    return filters, sort_from(params.get("sort"), allowed=WORKSPACE_SORTS, default="-created")


def workspace_events(*, workspace: Workspace) -> QuerySet[WorkspaceEvent]:
    """The workspace's history, oldest first, with the actor loaded."""
    return workspace.events.select_related("actor")


def workspace_stale_in_progress(*, stale_before: datetime) -> list[UUID]:
    """Ids of workspaces owed an Azure operation whose chain of tasks is lost (its next run was
    due before ``stale_before``, a datetime; see workspaces.chains.lost), e.g. with a broker
    that dropped it or a worker that died."""
    return list(
        Workspace.objects.filter(
            chains.lost(stale_before=stale_before), status__in=IN_PROGRESS
        ).values_list("pk", flat=True)
    )


def workspace_running_begun_by(*, cutoffs: dict[int, datetime]) -> list[dict[str, object]]:
    """Running workspaces of the teams in ``cutoffs`` ({team_id: aware datetime}) whose
    current run began (their last move to provisioning or starting) at or before their
    team's cutoff, or whose history does not say: [{"pk", "team_id", "name"}]. One query."""
    if not cutoffs:
        return []
    began = (
        WorkspaceEvent.objects.filter(
            workspace=OuterRef("pk"), to_status__in=[Status.PROVISIONING, Status.STARTING]
        )
        .order_by("-at")
        .values("at")[:1]
    )
    query = Q(pk__in=[])
    for team_id, cutoff in cutoffs.items():
        query |= Q(team_id=team_id) & (Q(run_began__lte=cutoff) | Q(run_began__isnull=True))
    return list(
        Workspace.objects.filter(status=Status.RUNNING, team_id__in=list(cutoffs))
        .annotate(run_began=Subquery(began))
        .filter(query)
        .order_by("name")
        .values("pk", "team_id", "name")
    )


def offering_list(
    *, region: str | None = None, now: datetime | None = None
) -> QuerySet[SizeOffering]:
    """Sizes the platform admin offers, optionally in one region, cheapest GPU first. With
    ``now``, each carries ``spot_hourly``: the Azure Spot price in effect then (USD/hour,
    Decimal; see _with_spot_price), None where there is none. One query."""
    qs = SizeOffering.objects.filter(offered=True)
    if region:
        qs = qs.filter(region=region)
    if now is not None:
        qs = _with_spot_price(qs, now)
    return qs.order_by("region", "gpu_model", "price_per_hour")


class _Spot(TypedDict):
    spot_hourly: Decimal | None


def _with_spot_price(
    qs: QuerySet[SizeOffering], now: datetime
) -> "QuerySet[WithAnnotations[SizeOffering, _Spot]]":
    """``qs`` annotated with ``spot_hourly``: the hourly Spot price of the offering's size and
    region in effect at ``now``, as billing answers it (hooks.spot_price: billing's Price rows,
    Azure Retail Prices API, synced by sync_prices). Azure sells no Spot VM of a size where it
    has no Spot price."""
    return qs.annotate(spot_hourly=hooks.spot_price(now=now))


def offering_spot_price(*, offering: SizeOffering, now: datetime) -> Decimal | None:
    """The offering's Spot price in effect at ``now`` (USD/hour), or None if Azure has none."""
    qs = _with_spot_price(SizeOffering.objects.filter(pk=offering.pk), now)
    return qs.values_list("spot_hourly", flat=True).first()


def offering_regions() -> list[str]:
    """Regions with at least one offered size, sorted."""
    return list(
        SizeOffering.objects.filter(offered=True)
        .order_by("region")
        .values_list("region", flat=True)
        .distinct()
    )


def user_ssh_key_last_used(*, user: User) -> str:
    """The newest SSH public key of the user's workspaces that Azure takes (see
    workspaces.ssh_keys), in its normal form, to prefill the next request; "" if none. A key
    stored before the rules held (a private key, a junk blob) is never offered again."""
    keys = (
        Workspace.objects.filter(owner=user)
        .exclude(ssh_public_key="")
        .order_by("-created_at")
        .values_list("ssh_public_key", flat=True)[:SSH_KEYS_LOOKED_AT]
    )
    return next(filter(None, map(ssh_public_key_or_blank, keys)), "")


def workspace_of_team(*, team: Team, id_or_name: str) -> Workspace | None:
    """The workspace of ``team`` whose id is ``id_or_name``, or else its one not deleted of
    that name; None when there is none."""
    found = Workspace.objects.filter(team=team).exclude(status=Status.DELETED)
    try:
        by_id = found.filter(pk=UUID(id_or_name)).first()
    except ValueError:
        by_id = None
    return by_id or found.filter(name=id_or_name).first()
