"""GPUs in use against each team's GPU quota, and a request measured against the quota, the
per-member cap and the budget: the one definition every page, form, approval, API answer and
service reads."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from fractions import Fraction

from django.contrib.auth.models import User
from django.db.models import Q, QuerySet, Sum

from common.words import counted, usd
from teams.models import GpuQuota, Team
from workspaces.budgets import Budget, team_budget
from workspaces.gpus import format_gpus, gpu_share
from workspaces.models import Workspace
from workspaces.states import HELD, HOLDS_GPUS, Status


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


def holding_gpus() -> Q:
    """Workspaces that hold their GPUs against the quota: states.HOLDS_GPUS, and a failed
    delete (Azure may still run the VM; held until a delete is confirmed)."""
    return Q(status__in=HOLDS_GPUS) | Q(status=Status.FAILED, failed_operation="delete")


def team_gpus_in_use(*, team_ids: Iterable[int]) -> dict[int, dict[str, Fraction]]:
    """GPUs in use: what each team holds against its GPU quota now, the one definition every
    page, form and approval shows ({team_id: {"A100": Fraction(22, 7)}}; a MIG slice counts as
    its sevenths, a fractional (vGPU) VM as gpu_count / gpu_partition, e.g. 1/6 of an A10, a
    namespace as its GPU quota). One query whatever the number of teams; summed per partition
    in SQL and added up as exact fractions here.

    What counts: workspaces in states.HOLDS_GPUS, requested (approved or within quota, waiting
    for Azure or a free slice), provisioning, running, stopping, starting, and deleting until
    Azure confirms the delete (a failed delete too: holding_gpus). A workspace waiting for
    Azure holds its quota but burns nothing (billing.live_spend.team_burn_rate). Pending
    approval, stopped (deallocated), failed creates and deleted workspaces hold none.

    A resize that starts the workspace again holds the larger of its size and its target from
    the moment it is accepted until it ends (Workspace.resize_target; the target's model too
    when it changes model), so no request or other resize takes the GPUs it grows into. Two
    queries."""
    usage = _gpus_per_team(Workspace.objects.filter(holding_gpus(), team_id__in=team_ids))
    for team_id, gpu_model, more in _resize_growth(team_ids):
        models = usage.setdefault(team_id, {})
        models[gpu_model] = models.get(gpu_model, Fraction(0)) + more
    return usage


def _resizes_in_flight(team_ids: Iterable[int]) -> "QuerySet[Workspace]":
    """Resizes accepted and not yet ended that start the workspace again at the target."""
    return (
        Workspace.objects.filter(team_id__in=team_ids, status__in=HOLDS_GPUS, resize_restart=True)
        .exclude(resize_to="")
        .exclude(resize_target={})
    )


def _resize_growth(team_ids: Iterable[int]) -> list[tuple[int, str, Fraction]]:
    """(team_id, gpu_model, GPUs) each resize in flight holds beyond its current size: the
    target's GPUs less its own of the same model (never below 0). One query."""
    rows = _resizes_in_flight(team_ids).values(
        "team_id", "gpu_model", "gpu_count", "gpu_slices", "gpu_partition", "resize_target"
    )
    growth = []
    for row in rows:
        target = row["resize_target"]
        wanted = Fraction(target["gpus"])
        if target["gpu_model"] == row["gpu_model"]:
            own = gpu_share(
                gpus=row["gpu_count"], slices=row["gpu_slices"], partition=row["gpu_partition"]
            )
            wanted = max(Fraction(0), wanted - own)
        growth.append((row["team_id"], target["gpu_model"], wanted))
    return growth


def _resize_burn(team: Team) -> Decimal:
    """USD/hour the team's resizes in flight will burn beyond what their meters show now: the
    target's price less the current one while still stopping (its meter runs at the old price),
    the whole target's once deallocated (Resizing; nothing runs). Never below 0 each."""
    burn = Decimal(0)
    for status, price, target in _resizes_in_flight([team.pk]).values_list(
        "status", "price_per_hour", "resize_target"
    ):
        now_burning = price if status == Status.STOPPING else Decimal(0)
        burn += max(Decimal(0), Decimal(target["price_per_hour"]) - now_burning)
    return burn


# The old name, kept for callers written before it became the figure's one selector.
team_gpu_usage = team_gpus_in_use


def team_gpus_idle(*, quiet_since: datetime) -> dict[int, dict[str, Fraction]]:
    """GPUs running but idle, per team and model ({team_id: {"A100": Fraction(1, 7)}}),
    counted as team_gpus_in_use counts them: running workspaces whose agent saw no GPU or
    interactive use since ``quiet_since`` (WorkspaceAgent.active_at; never active counts as
    idle). What /metrics' portal_team_gpus_idle shows; one query."""
    quiet = Q(agent__active_at__lt=quiet_since) | Q(agent__active_at__isnull=True)
    return _gpus_per_team(Workspace.objects.filter(quiet, status=Status.RUNNING))


def _gpus_per_team(workspaces: "QuerySet[Workspace]") -> dict[int, dict[str, Fraction]]:
    """GPUs ``workspaces`` hold per team and model, summed per partition in SQL (one query)
    and added up here as exact fractions of whole GPUs."""
    rows = (
        workspaces.values("team_id", "gpu_model", "gpu_partition")
        .annotate(gpus=Sum("gpu_count"), slices=Sum("gpu_slices"))
        .order_by()
    )
    per_team: dict[int, dict[str, Fraction]] = {}
    for row in rows:
        share = gpu_share(
            gpus=row["gpus"] or 0, slices=row["slices"] or 0, partition=row["gpu_partition"]
        )
        models = per_team.setdefault(row["team_id"], {})
        models[row["gpu_model"]] = models.get(row["gpu_model"], Fraction(0)) + share
    return per_team


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
    instead of its own, so what it holds now is left out. Seven queries."""
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
    ``replacing`` holds (see quota_check). Requested workspaces and resizes in flight count
    toward the budget at what they will burn. Seven queries whatever their number."""
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
    queued += _resize_burn(team)
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
