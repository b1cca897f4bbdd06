"""Metering: Azure prices with their effective dates, when each workspace was billable on
which meter, and the daily rollups the spend pages read. Money is USD, Decimal."""

from decimal import Decimal

from django.db import models

from billing.metering import HOURLY_UNIT, monthly_to_hourly


class PriceKind(models.TextChoices):
    VM = "vm", "Virtual machine"
    DISK = "disk", "Managed disk"
    FILES = "files", "Azure Files premium (per GiB)"


class Price(models.Model):
    """One Azure meter's retail price from ``effective_start`` until the next row of the same
    (kind, sku, region, spot). Rows are only ever added: a price change is a new row, so
    past spend keeps the price it was incurred at. Source: Azure Retail Prices API
    (``manage.py sync_prices``) or the snapshot shipped in data/."""

    kind = models.CharField(max_length=8, choices=PriceKind.choices)
    sku = models.CharField(
        max_length=64,
        help_text="armSkuName (VM size), disk tier (P10 LRS) or Files meter (Premium LRS "
        "Provisioned)",
    )
    region = models.CharField(max_length=32, help_text="armRegionName, e.g. eastus")
    spot = models.BooleanField(default=False)
    unit_price = models.DecimalField(max_digits=16, decimal_places=6, help_text="USD per unit")
    unit = models.CharField(max_length=16, help_text="'1 Hour', '1/Month' or '1 GB/Month'")
    effective_start = models.DateTimeField()
    meter_id = models.CharField(max_length=64, blank=True)
    source = models.CharField(max_length=16, help_text="api or snapshot")
    synced_at = models.DateTimeField()

    class Meta:
        ordering = ["kind", "sku", "region", "spot", "effective_start"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "sku", "region", "spot", "effective_start"],
                name="price_unique_meter_start",
            )
        ]

    def __str__(self) -> str:
        spot = " Spot" if self.spot else ""
        since = f"{self.effective_start:%Y-%m-%d}"
        return f"{self.sku}{spot} {self.region}: ${self.unit_price}/{self.unit} from {since}"

    @property
    def hourly(self) -> Decimal:
        """USD per hour (a monthly price over Azure's 730-hour month, see monthly_to_hourly)."""
        return self.unit_price if self.unit == HOURLY_UNIT else monthly_to_hourly(self.unit_price)


class Meter(models.TextChoices):
    COMPUTE = "compute", "Compute"
    DISK = "disk", "OS disk"


class UsageInterval(models.Model):
    """A stretch of time in which a workspace used one priced meter: its VM size while
    allocated (compute), or its OS disk while the disk exists.

    Opened and closed by workspaces.states.transition only; ``ended_at`` is None while open.
    Cost = hours x the Price in effect at each moment x share_num / share_den (a MIG slice is
    a share of its node's price). ``price_per_hour`` is the price when it opened, for show.
    """

    workspace = models.ForeignKey(
        "workspaces.Workspace", on_delete=models.CASCADE, related_name="usage_intervals"
    )
    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="+")
    # The workspace's kind, copied when opened (a workspace never changes kind), so that the
    # spend pages group by kind without joining every workspace.
    kind = models.CharField(max_length=16, help_text="Workspace kind: vm, mig or namespace")
    meter = models.CharField(max_length=8, choices=Meter.choices, default=Meter.COMPUTE)
    price_kind = models.CharField(max_length=8, choices=PriceKind.choices, default=PriceKind.VM)
    sku = models.CharField(max_length=64, blank=True)
    region = models.CharField(max_length=32, blank=True)
    spot = models.BooleanField(default=False)
    share_num = models.PositiveIntegerField(default=1)
    share_den = models.PositiveIntegerField(default=1)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    price_per_hour = models.DecimalField(max_digits=10, decimal_places=4, help_text="USD/hour")

    class Meta:
        ordering = ["started_at"]
        indexes = [
            models.Index(fields=["team", "started_at"]),
            models.Index(fields=["team", "ended_at"]),
        ]
        constraints = [
            # At most one open interval per workspace and meter.
            models.UniqueConstraint(
                fields=["workspace", "meter"],
                condition=models.Q(ended_at__isnull=True),
                name="usageinterval_one_open_per_meter",
            )
        ]

    def __str__(self) -> str:
        end = self.ended_at or "now"
        return f"{self.workspace_id} {self.meter} {self.started_at:%Y-%m-%d %H:%M} - {end}"


class DailySpend(models.Model):
    """Cost per team, workspace, workspace kind and meter for one day in the team's time
    zone (USD, rounded to the cent as the chargeback CSV charges it, so sums in SQL equal the
    CSV's). Rebuilt idempotently from UsageInterval and Price by
    billing.rollups.rollup_rebuild; the spend pages read these rows, not intervals."""

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="+")
    workspace = models.ForeignKey(
        "workspaces.Workspace", on_delete=models.CASCADE, related_name="daily_spend"
    )
    day = models.DateField()
    kind = models.CharField(max_length=16, help_text="Workspace kind: vm, mig or namespace")
    meter = models.CharField(max_length=8, choices=Meter.choices)
    cost = models.DecimalField(
        max_digits=14, decimal_places=2, help_text="USD, rounded to the cent as charged"
    )
    hours = models.DecimalField(max_digits=10, decimal_places=4)

    class Meta:
        ordering = ["day"]
        indexes = [models.Index(fields=["team", "day"])]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "day", "meter"], name="dailyspend_unique_day_meter"
            )
        ]

    def __str__(self) -> str:
        return f"{self.workspace_id} {self.day} {self.meter}: ${self.cost}"


class DaySpend(models.Model):
    """A team's DailySpend summed per day and workspace kind (USD, cents): the spend chart and
    month totals read these few rows. Kept equal to the sum of the team's DailySpend rows up to
    its rollup mark by billing.rollups (rebuilt with them, trimmed when the mark moves back)."""

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    kind = models.CharField(max_length=16, help_text="Workspace kind: vm, mig or namespace")
    cost = models.DecimalField(max_digits=14, decimal_places=2, help_text="USD")

    class Meta:
        ordering = ["day"]
        constraints = [
            models.UniqueConstraint(fields=["team", "day", "kind"], name="dayspend_unique")
        ]

    def __str__(self) -> str:
        return f"{self.team_id} {self.day} {self.kind}: ${self.cost}"


class MonthSpend(models.Model):
    """One workspace's DailySpend summed over a calendar month of its team's time zone, up to
    the team's rollup mark (USD, cents; compute hours): the spend page's table by workspace
    reads these rows. Maintained like DaySpend."""

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="+")
    workspace = models.ForeignKey(
        "workspaces.Workspace", on_delete=models.CASCADE, related_name="+"
    )
    month = models.DateField(help_text="The month's first day")
    kind = models.CharField(max_length=16)
    hours = models.DecimalField(max_digits=12, decimal_places=4, help_text="Compute hours")
    cost = models.DecimalField(max_digits=14, decimal_places=2, help_text="USD")

    class Meta:
        ordering = ["month"]
        indexes = [models.Index(fields=["team", "month"])]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "month"], name="monthspend_unique")
        ]

    def __str__(self) -> str:
        return f"{self.workspace_id} {self.month:%Y-%m}: ${self.cost}"


class SpendRollup(models.Model):
    """How far a team's DailySpend rows are complete: every day up to ``rolled_through`` (its
    time zone). Later days are computed live from intervals; a late correction (a price
    effective in the past) moves the mark back."""

    team = models.OneToOneField(
        "teams.Team", on_delete=models.CASCADE, primary_key=True, related_name="spend_rollup"
    )
    rolled_through = models.DateField()
    rebuilt_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.team_id} rolled through {self.rolled_through}"


class ActualCost(models.Model):
    """What Azure charged (Cost Management, ActualCost) for the resources tagged with one
    ``workspace`` tag value on one UTC day. ``workspace_tag`` is "" for resources without the
    tag; ``workspace`` and ``team`` are the portal's workspace of that tag value, when there is
    one. Replaced day by day by billing.actual_costs.actual_costs_sync; never edited by hand."""

    team = models.ForeignKey(
        "teams.Team", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    workspace = models.ForeignKey(
        "workspaces.Workspace",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="actual_costs",
    )
    workspace_tag = models.CharField(
        max_length=256, blank=True, help_text="'' = untagged; 'chargeback:<team>' for charges"
    )
    # The team's storage and capacity reservations (tag cloud.costs.CHARGE_TAG, billing.charges)
    # rather than a workspace's resources; those are then left out of the untagged row.
    charges = models.BooleanField(default=False)
    day = models.DateField(help_text="UTC day (Azure's UsageDate)")
    cost = models.DecimalField(max_digits=18, decimal_places=8, help_text="USD, as Azure wrote it")
    currency = models.CharField(max_length=3, default="USD")
    fetched_at = models.DateTimeField()

    class Meta:
        ordering = ["day", "workspace_tag"]
        indexes = [models.Index(fields=["team", "day"])]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace_tag", "day"], name="actualcost_unique_tag_day"
            )
        ]

    def __str__(self) -> str:
        return f"{self.workspace_tag or 'untagged'} {self.day}: {self.cost} {self.currency}"


class ActualCostDay(models.Model):
    """A UTC day whose Azure actual costs were last fetched at ``fetched_at``. A day fetched
    after it ended is complete enough to reconcile (Azure may still add late charges for up to
    48 hours; the nightly sync fetches the last days again)."""

    day = models.DateField(primary_key=True)
    fetched_at = models.DateTimeField()

    class Meta:
        ordering = ["day"]

    def __str__(self) -> str:
        return f"{self.day} fetched at {self.fetched_at:%Y-%m-%d %H:%M}"


class EstimatedCost(models.Model):
    """The portal's estimate of what one workspace cost on one UTC day (USD, unrounded): its
    UsageIntervals priced by Price, as they were at ``computed_at``; or, with ``charges``, what
    the team's shares, homes and held reservations cost that day (billing.charges). Written by
    billing.actual_costs.cost_estimates_store when Azure's actual costs of the day are fetched
    (actual_costs_sync, in the same transaction, so both are snapshots of one moment) and
    again after a price correction (rollup_invalidate); the reconciliation reads these rows."""

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="+")
    workspace = models.ForeignKey(
        "workspaces.Workspace",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="estimated_costs",
    )
    # The team's storage and capacity reservations (billing.charges; workspace None).
    charges = models.BooleanField(default=False)
    day = models.DateField(help_text="UTC day, as Azure's UsageDate")
    cost = models.DecimalField(max_digits=18, decimal_places=8, help_text="USD, unrounded")
    computed_at = models.DateTimeField()

    class Meta:
        ordering = ["day"]
        indexes = [models.Index(fields=["team", "day"])]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "day"], name="estimatedcost_unique_day"),
            models.UniqueConstraint(
                fields=["team", "day"],
                condition=models.Q(charges=True),
                name="estimatedcost_unique_charges_day",
            ),
            models.CheckConstraint(
                condition=models.Q(charges=True, workspace__isnull=True)
                | models.Q(charges=False, workspace__isnull=False),
                name="estimatedcost_workspace_or_charges",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workspace_id} {self.day}: {self.cost} USD estimated"


class Advice(models.TextChoices):
    """What right-sizing proposes for a workspace (billing.rightsizing)."""

    FINE = "fine", "Fine as is"
    SMALLER = "smaller", "A smaller size"
    MIG = "mig", "A MIG slice"
    FEWER_GPUS = "fewer_gpus", "Fewer GPUs"
    SPOT = "spot", "Spot"
    LARGER = "larger", "A larger size"


class Recommendation(models.Model):
    """The latest right-sizing advice for one workspace, rewritten by the beat task
    (billing.recommendations.recommendations_refresh) from its last RIGHTSIZING_WINDOW_DAYS of
    telemetry. Memory in MiB per GPU (or MIG device); money USD, Decimal; ``saving_usd_month``
    is negative when the advice costs more (a larger size)."""

    workspace = models.OneToOneField(
        "workspaces.Workspace",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="recommendation",
    )
    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="+")
    advice = models.CharField(max_length=16, choices=Advice.choices)
    target_kind = models.CharField(max_length=8, blank=True, help_text='"vm" or "mig"')
    target_vm_size = models.CharField(max_length=64, blank=True)
    target_mig_profile = models.CharField(max_length=16, blank=True)
    target_memory_mib = models.PositiveIntegerField(null=True, help_text="Per GPU")
    target_price_per_hour = models.DecimalField(max_digits=10, decimal_places=4, null=True)
    price_per_hour = models.DecimalField(max_digits=10, decimal_places=4, help_text="Now")
    saving_usd_month = models.DecimalField(max_digits=12, decimal_places=2)
    reason = models.TextField()
    hours = models.PositiveIntegerField(help_text="Hours with telemetry in the window")
    peak_mib = models.PositiveIntegerField()
    p95_mib = models.PositiveIntegerField()
    memory_mib = models.PositiveIntegerField(null=True, help_text="Its memory per GPU")
    gpus_in_use = models.PositiveSmallIntegerField()
    util_mean = models.DecimalField(max_digits=4, decimal_places=1, null=True)
    idle_hours = models.PositiveIntegerField()
    computed_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["team", "-saving_usd_month"], name="rec_team_saving")]

    def __str__(self) -> str:
        return f"{self.workspace_id}: {self.advice}"

    @property
    def target(self) -> str:
        """The size or MIG profile it proposes, "" when none."""
        return self.target_vm_size or self.target_mig_profile

    @property
    def gib(self) -> dict[str, Decimal | None]:
        """The memory figures in GiB to 0.1, for pages: peak, p95, memory, target."""
        figures = {
            "peak": self.peak_mib,
            "p95": self.p95_mib,
            "memory": self.memory_mib,
            "target": self.target_memory_mib,
        }
        return {
            k: None if v is None else (Decimal(v) / 1024).quantize(Decimal("0.1"))
            for k, v in figures.items()
        }

    @property
    def extra_cost(self) -> Decimal:
        """USD a month more it costs (a larger size): the saving's opposite, else 0."""
        return max(-self.saving_usd_month, Decimal(0))
