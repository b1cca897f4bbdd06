"""Reads of workspaces and the catalog. Every workspace query starts from workspace_visible_to."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, TypedDict
from uuid import UUID

from django.contrib.auth.models import User
from django.db.models import OuterRef, Q, QuerySet, Subquery, Sum
from django.http import QueryDict

from common.listing import DEFAULT_PAGE_SIZE, KeysetPage, Sort, keyset_page, sort_from
from common.months import month_bounds
from common.permissions import Actor
from common.words import counted, usd
from teams.models import GpuQuota, Team
from teams.selectors import team_visible_to
from workspaces import chains, hooks
from workspaces.filters import WorkspaceFilter
from workspaces.gpus import format_gpus, gpu_share
from workspaces.models import SizeOffering, Workspace, WorkspaceEvent
from workspaces.ssh_keys import ssh_public_key_or_blank
from workspaces.states import HELD, HOLDS_GPUS, IN_PROGRESS, Status
from workspaces.telemetry_view import TelemetryView, workspace_telemetry

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

__all__ = ["TelemetryView", "workspace_telemetry"]  # their home: workspaces.telemetry_view

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


def budget_runs_out(
    *, budget: Decimal, spent: Decimal, burn_per_hour: Decimal, now: datetime
) -> datetime | None:
    """When the budget (USD) is used up at ``burn_per_hour`` (USD/hour), or None if never."""
    left = budget - spent
    if left <= 0:
        return now
    if burn_per_hour <= 0:
        return None
    return now + timedelta(hours=float(left / burn_per_hour))


@dataclass(frozen=True)
class Budget:
    """A team's monthly budget against its spend, in USD; ``budget`` None means no limit."""

    budget: Decimal | None
    spent: Decimal
    burn_per_hour: Decimal  # USD/hour billable now
    now: datetime

    @property
    def left(self) -> Decimal | None:
        return None if self.budget is None else max(Decimal(0), self.budget - self.spent)

    def runs_out(self, extra_per_hour: Decimal = Decimal(0)) -> datetime | None:
        """When the budget is used up at the current burn plus ``extra_per_hour``; None if
        there is no budget or nothing burns."""
        if self.budget is None:
            return None
        return budget_runs_out(
            budget=self.budget,
            spent=self.spent,
            burn_per_hour=self.burn_per_hour + extra_per_hour,
            now=self.now,
        )

    def lasts_the_month(self, extra_per_hour: Decimal = Decimal(0)) -> bool:
        end = self.runs_out(extra_per_hour)
        return end is None or end >= month_bounds(self.now)[1]

    def runway_with(self, extra_per_hour: Decimal) -> str:
        """What the budget does with ``extra_per_hour`` USD/hour more burning from now: ""
        without a budget, else "lasts the month", "runs out 24 Nov" or "used up already"."""
        if self.budget is None:
            return ""
        if self.used_up:
            return "used up already"
        if self.lasts_the_month(extra_per_hour):
            return "lasts the month"
        return f"runs out {self.runs_out(extra_per_hour):%-d %b}"

    @property
    def used_up(self) -> bool:
        """Whether the month's spend has reached the budget (a budget of $0 from the start)."""
        return self.budget is not None and self.spent >= self.budget

    def sentence(self) -> str:
        """ "$1,930 of the $5,000 November budget is left; at the current rate that lasts until
        24 Nov" (or that it lasts the month, or that it is used up)."""
        if self.budget is None:
            return "No monthly budget is set."
        month = self.now.strftime("%B")
        if self.used_up:
            return f"The {usd(self.budget)} {month} budget is used up: {usd(self.spent)} spent."
        text = f"{usd(self.left)} of the {usd(self.budget)} {month} budget is left"
        end = self.runs_out()
        if self.lasts_the_month():
            return f"{text}; at the current rate that lasts the month."
        return f"{text}; at the current rate that lasts until {end:%-d %b}."


@dataclass(frozen=True)
class QuotaCheck:
    """A request measured against the team's quota: GPUs, workspaces per member, and the
    monthly budget (USD) at the request's price (USD/hour)."""

    team_name: str
    gpu_model: str
    gpus_asked: Fraction  # GPUs, a MIG slice as sevenths
    gpus_quota: int
    gpus_used: Fraction
    user_held: int
    user_cap: int
    price_per_hour: Decimal
    budget: Budget

    @property
    def gpus_left(self) -> Fraction:
        return max(Fraction(0), self.gpus_quota - self.gpus_used)

    @property
    def over(self) -> list[str]:
        """Why a new request needs approval, in words; empty when it fits."""
        return [r for r in (self.gpu_reason, self.cap_reason, self.budget_reason) if r]

    @property
    def over_to_start(self) -> list[str]:
        """Why a stopped workspace cannot start: GPUs or budget. It is already one of its
        owner's workspaces, so the per-member cap does not apply."""
        return [r for r in (self.gpu_reason, self.budget_reason) if r]

    @property
    def gpu_reason(self) -> str:
        if self.gpus_asked <= self.gpus_left:
            return ""
        return (
            f"It needs {counted(self.gpus_asked, self.gpu_model + ' GPU')}; {self.team_name}"
            f" has {format_gpus(self.gpus_left)} of its {self.gpus_quota} left."
        )

    @property
    def cap_reason(self) -> str:
        if self.user_held < self.user_cap:
            return ""
        return (
            f"You already hold {counted(self.user_held, 'workspace')}; the team allows "
            f"{self.user_cap} per member."
        )

    @property
    def budget_reason(self) -> str:
        if self.budget.used_up:
            return (
                f"{self.team_name} has used up its {usd(self.budget.budget)} "
                f"{self.budget.now:%B} budget ({usd(self.budget.spent)} spent)."
            )
        if self.budget.lasts_the_month(self.price_per_hour):
            return ""
        end = self.budget.runs_out(self.price_per_hour)
        return (
            f"At {usd(self.price_per_hour * 24)} per day on top of the current rate, the "
            f"{usd(self.budget.budget)} budget runs out on {end:%-d %b}."
        )

    @property
    def fits(self) -> bool:
        return not self.over


def team_gpus_in_use(*, team_ids: Iterable[int]) -> dict[int, dict[str, Fraction]]:
    """GPUs in use: what each team holds against its GPU quota now, the one definition every
    page, form and approval shows ({team_id: {"A100": Fraction(22, 7)}}; a MIG slice counts as
    its sevenths, a fractional (vGPU) VM as gpu_count / gpu_partition, e.g. 1/6 of an A10, a
    namespace as its GPU quota). One query whatever the number of teams; summed per partition
    in SQL and added up as exact fractions here.

    What counts: workspaces in states.HOLDS_GPUS, requested (approved or within quota, waiting
    for Azure or a free slice), provisioning, running, stopping and starting. A workspace
    waiting for Azure holds its quota but burns nothing (billing.live_spend.team_burn_rate).
    Pending approval, stopped (deallocated), failed and deleted workspaces hold none."""
    rows = (
        Workspace.objects.filter(team_id__in=team_ids, status__in=HOLDS_GPUS)
        .values("team_id", "gpu_model", "gpu_partition")
        .annotate(gpus=Sum("gpu_count"), slices=Sum("gpu_slices"))
        .order_by()
    )
    usage: dict[int, dict[str, Fraction]] = {}
    for row in rows:
        share = gpu_share(
            gpus=row["gpus"] or 0, slices=row["slices"] or 0, partition=row["gpu_partition"]
        )
        models = usage.setdefault(row["team_id"], {})
        models[row["gpu_model"]] = models.get(row["gpu_model"], Fraction(0)) + share
    return usage


# The old name, kept for callers written before it became the figure's one selector.
team_gpu_usage = team_gpus_in_use


def team_gpus_idle(*, quiet_since: datetime) -> dict[int, dict[str, Fraction]]:
    """GPUs running but idle, per team and model ({team_id: {"A100": Fraction(1, 7)}}),
    counted as team_gpus_in_use counts them: running workspaces whose agent saw no GPU or
    interactive use since ``quiet_since`` (WorkspaceAgent.active_at; never active counts as
    idle). What /metrics' portal_team_gpus_idle shows; one query."""
    quiet = Q(agent__active_at__lt=quiet_since) | Q(agent__active_at__isnull=True)
    rows = (
        Workspace.objects.filter(quiet, status=Status.RUNNING)
        .values("team_id", "gpu_model", "gpu_partition")
        .annotate(gpus=Sum("gpu_count"), slices=Sum("gpu_slices"))
        .order_by()
    )
    idle: dict[int, dict[str, Fraction]] = {}
    for row in rows:
        share = gpu_share(
            gpus=row["gpus"] or 0, slices=row["slices"] or 0, partition=row["gpu_partition"]
        )
        models = idle.setdefault(row["team_id"], {})
        models[row["gpu_model"]] = models.get(row["gpu_model"], Fraction(0)) + share
    return idle


def quota_check(
    *,
    team: Team,
    user: User,
    gpu_model: str,
    gpus: Fraction | int,
    price_per_hour: Decimal,
    now: datetime,
    replacing: Workspace | None = None,
) -> QuotaCheck:
    """Measure a request for ``gpus`` GPUs of ``gpu_model`` at ``price_per_hour`` (USD)
    against the team's GPU quota (0 where none is set), the per-member cap and the monthly
    budget (counting workspaces requested but not yet billing). ``replacing``: a requested VM
    workspace about to take another size (workspaces.equivalents) is measured as that size
    instead of its own, so what it holds now is left out. Five queries."""
    asks = [(gpu_model, gpus, price_per_hour)]
    return quota_checks(team=team, user=user, asks=asks, now=now, replacing=replacing)[0]


def quota_checks(
    *,
    team: Team,
    user: User,
    asks: Sequence[tuple[str, Fraction | int, Decimal]],
    now: datetime,
    replacing: Workspace | None = None,
) -> list[QuotaCheck]:
    """quota_check of each of ``asks`` ((gpu_model, gpus, USD/hour)), each measured alone
    against what the team holds now (right-sizing compares sizes this way), less what
    ``replacing`` holds (see quota_check). Five queries whatever their number."""
    models_ = {gpu_model for gpu_model, _gpus, _price in asks}
    quotas = dict(
        GpuQuota.objects.filter(team=team, gpu_model__in=models_).values_list("gpu_model", "gpus")
    )
    used = dict(team_gpus_in_use(team_ids=[team.pk]).get(team.pk, {}))
    others = Workspace.objects.exclude(pk=replacing.pk) if replacing else Workspace.objects.all()
    held = others.filter(team=team, owner=user, status__in=HELD).count()
    if replacing and replacing.status in HOLDS_GPUS:
        used[replacing.gpu_model] = used.get(replacing.gpu_model, Fraction(0)) - gpu_share(
            gpus=replacing.gpu_count,
            slices=replacing.gpu_slices,
            partition=replacing.gpu_partition,
        )
    # Requested but not yet billing: it will burn soon, so it counts like this request.
    queued = others.filter(team=team, status=Status.REQUESTED).aggregate(usd=Sum("price_per_hour"))[
        "usd"
    ] or Decimal(0)
    budget = team_budget(teams=[team], now=now)[team.pk]
    return [
        QuotaCheck(
            team_name=team.name,
            gpu_model=gpu_model,
            gpus_asked=Fraction(gpus),
            gpus_quota=quotas.get(gpu_model) or 0,
            gpus_used=used.get(gpu_model, Fraction(0)),
            user_held=held,
            user_cap=team.max_workspaces_per_user,
            price_per_hour=price_per_hour + queued,
            budget=budget,
        )
        for gpu_model, gpus, price_per_hour in asks
    ]


def team_budget(*, teams: Iterable[Team], now: datetime) -> dict[int, Budget]:
    """Each team's budget against its month-to-date spend and burn rate, in one query."""
    spend = hooks.team_spend(team_ids=[t.pk for t in teams], now=now)
    return {
        t.pk: Budget(t.monthly_budget, spend[t.pk].spent, spend[t.pk].burn_per_hour, now)
        for t in teams
    }


@dataclass(frozen=True)
class QuotaLine:
    gpu_model: str
    used: Fraction  # GPUs held now, MIG slices as sevenths
    quota: int  # GPUs

    @property
    def left(self) -> Fraction:
        return max(Fraction(0), self.quota - self.used)


def team_quota_overview(*, teams: Iterable[Team]) -> list[tuple[Team, list[QuotaLine]]]:
    """[(team, [QuotaLine, ...]), ...]: each team's GPUs in use against its quota, per GPU
    model with a quota or in use. Three queries whatever the number of teams."""
    team_list = list(teams)
    ids = [t.pk for t in team_list]
    quotas: dict[int, dict[str, int]] = {}
    for q in GpuQuota.objects.filter(team_id__in=ids):
        quotas.setdefault(q.team_id, {})[q.gpu_model] = q.gpus
    usage = team_gpus_in_use(team_ids=ids)
    overview = []
    for team in team_list:
        team_quota, team_usage = quotas.get(team.pk, {}), usage.get(team.pk, {})
        models_ = sorted(set(team_quota) | set(team_usage))
        lines = [
            QuotaLine(m, team_usage.get(m, Fraction(0)), team_quota.get(m, 0)) for m in models_
        ]
        overview.append((team, lines))
    return overview
