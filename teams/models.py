"""Teams and their members. A platform admin is a Django staff user, not a membership."""

from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models

from common.words import counted, usd

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class Role(models.TextChoices):
    RESEARCHER = "researcher", "Researcher"
    TEAM_ADMIN = "team_admin", "Team admin"


class GpuModel(models.TextChoices):
    """GPU models that team quotas count, as the catalog names them."""

    A100 = "A100", "NVIDIA A100"
    H100 = "H100", "NVIDIA H100"
    T4 = "T4", "NVIDIA T4"
    A10 = "A10", "NVIDIA A10"


class LeaverPolicy(models.TextChoices):
    """What happens to a member's workspaces in a team when they leave it (workspaces.leavers)."""

    STOP = "stop", "Stop them"
    KEEP = "keep", "Keep them as they are"
    HAND_OVER = "hand_over", "Hand them over to a team admin"


class Team(models.Model):
    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=50, unique=True)
    monthly_budget = models.DecimalField(
        max_digits=12,
        decimal_places=2,
        null=True,
        blank=True,
        help_text="USD per calendar month; empty means no budget limit",
    )
    max_workspaces_per_user = models.PositiveSmallIntegerField(
        default=3, help_text="Workspaces one member may hold at once (not deleted or failed)"
    )
    stop_at_budget = models.BooleanField(
        default=False,
        help_text="Stop its running workspaces when the month's spend reaches the budget",
    )
    leaver_policy = models.CharField(
        max_length=16,
        choices=LeaverPolicy.choices,
        default=LeaverPolicy.STOP,
        help_text="What happens to a member's workspaces when they leave the team",
    )
    # One field for both: who Entra ID sign-in makes a member, and the group the team's AKS
    # namespace RoleBindings name. Unique: two teams on one group would share every member.
    entra_group_id = models.UUIDField(
        null=True,
        blank=True,
        unique=True,
        help_text="Object id of the Entra ID security group linked to the team: its members "
        "sign in as the team's members and get edit in its AKS namespaces",
    )
    entra_group_name = models.CharField(
        max_length=256,  # Graph's limit for a group's displayName.
        blank=True,
        help_text="The group's displayName in Entra ID when it was linked (shown, never trusted)",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.RESEARCHER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="membership_unique_team_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class Profile(models.Model):
    """Who a portal user is in Microsoft Entra ID, which AKS knows them by: with Entra ID
    integration a Kubernetes user is the UPN of a member of the tenant and the object id of a
    guest (AKS docs, "Use Kubernetes RBAC with Microsoft Entra ID"). A MIG slice's owner gets
    port-forward to its pod under both (cloud.kube.mig_access); nobody else does.

    Today the user types them on their account page (the portal signs in with its own
    accounts); Entra ID sign-in (issue 16) is to write them from the ID token's ``oid`` and
    ``upn`` claims. A typed value is the user's word, not proof: it only grants rights on the
    user's own slices, so a wrong one locks them out of their own pod and lets nobody into
    another's, but sign-in must not find accounts by it (hence no unique constraint yet)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="profile"
    )
    entra_object_id = models.UUIDField(
        null=True, blank=True, help_text="Entra ID object id (the token's oid claim)"
    )
    entra_upn = models.CharField(
        max_length=113,  # Entra ID's limit for a user principal name.
        blank=True,
        help_text="User principal name, e.g. alice@contoso.com",
    )
    # The researcher's own setup, run on each new VM after its environment
    # (agent/environment_init.py, as Coder's dotfiles): checked by personal_problems on the
    # account page before it is stored.
    dotfiles_url = models.CharField(max_length=300, blank=True)
    setup_script = models.TextField(blank=True)
    # Written by Entra ID sign-in alone (teams/entra.py), from a validated ID token: the key
    # sign-in finds the account by. Never the typed entra_object_id above, which is the user's
    # word and would let anyone claim another's account.
    signin_object_id = models.UUIDField(
        null=True, blank=True, unique=True, editable=False, help_text="oid of Entra ID sign-in"
    )
    # Set when the Graph sync deactivated the account because Entra ID disabled or deleted the
    # user (teams.entra_sync): the next successful sign-in reactivates it. An account a portal
    # admin deactivated has no such mark and stays refused.
    entra_disabled_at = models.DateTimeField(null=True, blank=True, editable=False)
    # A service account (manage.py api_service_account): signin_object_id is then the object id
    # of a service principal or managed identity, which calls the API with Entra ID tokens
    # (teams.entra_access) and never signs in. The Graph sync leaves it alone (Graph has no
    # *user* of that id) and team admins manage its memberships as a local account's.
    service_account = models.BooleanField(default=False, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"Entra ID identity of {self.user}"

    @property
    def kubernetes_users(self) -> tuple[str, ...]:
        """The Kubernetes user names AKS may know this user by: UPN, then object id."""
        found = (self.entra_upn, str(self.entra_object_id) if self.entra_object_id else "")
        return tuple(name for name in found if name)


class GpuQuota(models.Model):
    """How many GPUs of one model a team may hold at once without approval. Stopped
    workspaces hold none; a MIG slice counts as its fraction of a GPU."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="gpu_quotas")
    gpu_model = models.CharField(max_length=16, choices=GpuModel.choices)
    gpus = models.PositiveIntegerField(help_text="GPUs")

    class Meta:
        ordering = ["gpu_model"]
        constraints = [
            models.UniqueConstraint(fields=["team", "gpu_model"], name="gpuquota_unique_model")
        ]

    def __str__(self) -> str:
        return f"{self.team}: {self.gpus} x {self.gpu_model}"


class Decision(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    EXPIRED = "expired", "Expired"
    # The requester or a team admin took the request back before anyone decided.
    WITHDRAWN = "withdrawn", "Withdrawn"


class Decided(models.Model):
    """What a request waiting for a platform admin's decision records of it (a QuotaRequest,
    a TeamQuotaIncrease): the decision, when, the comment; ``decided_by`` is each model's own
    (decided_by_field), so that its reverse name stays its own. teams.quota_requests.
    decision_record writes them."""

    decision = models.CharField(max_length=16, choices=Decision.choices, default=Decision.PENDING)
    decided_at = models.DateTimeField(null=True, blank=True)
    comment = models.TextField(blank=True)

    class Meta:
        abstract = True


def decided_by_field(related_name: str) -> "models.ForeignKey[User | None, User | None]":
    """The platform admin who decided (None while pending, or when the user is gone)."""
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name=related_name,
    )


class QuotaRequest(Decided):
    """A workspace request above the team's GPU quota, its budget or the per-user cap, or a
    resize of an existing workspace above its team's quota or budget (``resize_to``: the target
    size, "" for a request), waiting for a platform admin's decision. A workspace has at most
    one request of its own and one pending resize request."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quota_requests")
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="quota_requests"
    )
    workspace = models.ForeignKey(
        "workspaces.Workspace", on_delete=models.CASCADE, related_name="quota_requests"
    )
    resize_to = models.CharField(
        max_length=64, blank=True, help_text="A resize request: the target VM size or profile"
    )
    summary = models.CharField(max_length=200, help_text="What is asked, in words")
    over_quota = models.JSONField(default=list, help_text="Why approval is needed, in words")
    justification = models.TextField()
    price_per_hour = models.DecimalField(max_digits=10, decimal_places=4, help_text="USD/hour")
    decided_by = decided_by_field("quota_decisions")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["decision", "expires_at"])]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace"],
                condition=models.Q(resize_to=""),
                name="quota_request_one_per_workspace",
            ),
            models.UniqueConstraint(
                fields=["workspace"],
                condition=models.Q(decision="pending") & ~models.Q(resize_to=""),
                name="quota_request_one_pending_resize",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.requester}: {self.summary} ({self.decision})"


class AuditEntry(models.Model):
    """Append-only record of a decision or a change to a team: who, when, what, before, after."""

    at = models.DateTimeField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=64)
    object_type = models.CharField(max_length=64)
    object_id = models.CharField(max_length=64)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        # The log is paged by keyset on (at, id), newest first: one index scan per page.
        indexes = [models.Index(fields=["team", "at"]), models.Index(fields=["at", "id"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor}: {self.action} {self.object_type}"


class TeamQuotaIncrease(Decided):
    """A team admin's request for a permanent rise of the team's GPU quota of one model
    and/or its monthly budget, waiting for a platform admin's decision."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quota_increases")
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="quota_increases"
    )
    gpu_model = models.CharField(max_length=16, choices=GpuModel.choices, blank=True)
    gpus = models.PositiveIntegerField(null=True, blank=True, help_text="GPUs wanted in all")
    monthly_budget = models.DecimalField(
        max_digits=12, decimal_places=2, null=True, blank=True, help_text="USD per month wanted"
    )
    justification = models.TextField()
    decided_by = decided_by_field("quota_increase_decisions")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["decision", "created_at"])]

    def __str__(self) -> str:
        return f"{self.requester}: {self.summary} ({self.decision})"

    @property
    def summary(self) -> str:
        """What is asked, in words, e.g. "8 A100 GPUs and a budget of $5,000.00/month"."""
        parts = []
        if self.gpu_model and self.gpus is not None:
            parts.append(counted(self.gpus, f"{self.gpu_model} GPU"))
        if self.monthly_budget is not None:
            parts.append(f"a budget of {usd(self.monthly_budget)}/month")
        return f"{self.team.name}: " + " and ".join(parts)


class IdleBounds(models.Model):
    """The limits within which team admins set their idle policy; one row, set by the platform
    admins in /admin/. ``IdleBounds.current()`` gives it, created with these defaults."""

    min_idle_minutes = models.PositiveIntegerField(default=10)
    max_idle_minutes = models.PositiveIntegerField(default=240)
    max_gpu_threshold = models.PositiveSmallIntegerField(default=50, help_text="Percent")
    max_extensions_per_day = models.PositiveSmallIntegerField(default=4)
    max_extension_hours = models.PositiveSmallIntegerField(default=8)
    max_lifetime_hours = models.PositiveIntegerField(
        default=720, help_text="The longest maximum lifetime a team may set"
    )

    class Meta:
        verbose_name_plural = "idle bounds"

    def __str__(self) -> str:
        return "Idle policy bounds"

    @classmethod
    def current(cls) -> "IdleBounds":
        return cls.objects.get_or_create(pk=1)[0]


# The policy fields a team admin sets (the form edits them; the audit records them).
IDLE_FIELDS = (
    "gpu_threshold",
    "idle_minutes",
    "warn_minutes",
    "extensions_per_day",
    "extension_hours",
    "nightly_stop",
    "timezone",
    "max_lifetime_hours",
    "silent_minutes",
)


class IdlePolicy(models.Model):
    """A team's idle policy (see workspaces.idle for what each rule does). A team without a
    row gets the defaults of ``IdlePolicy()``."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="idle_policy")
    gpu_threshold = models.PositiveSmallIntegerField(
        default=5, help_text="Percent: a GPU at or above it is busy"
    )
    idle_minutes = models.PositiveIntegerField(
        default=30, help_text="Minutes without work before a stop"
    )
    warn_minutes = models.PositiveIntegerField(
        default=10, help_text="Minutes before the stop that the owner is warned"
    )
    extensions_per_day = models.PositiveSmallIntegerField(
        default=2, help_text="Keep-running extensions per workspace per day"
    )
    extension_hours = models.PositiveSmallIntegerField(default=4, help_text="Hours per extension")
    nightly_stop = models.TimeField(
        null=True, blank=True, help_text="Local time at which workspaces stop unless extended"
    )
    timezone = models.CharField(
        max_length=64, default="UTC", help_text="IANA name, e.g. Europe/Berlin"
    )
    max_lifetime_hours = models.PositiveIntegerField(
        null=True, blank=True, help_text="Hours a workspace may run at a stretch; empty = no limit"
    )
    silent_minutes = models.PositiveIntegerField(
        default=60, help_text="Minutes without telemetry before a stop"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "idle policies"

    def __str__(self) -> str:
        return f"Idle policy of {self.team}"


# Percent of the monthly budget at which the team's admins and the platform admins are told.
ALERT_THRESHOLDS = (50, 80, 100)


class BudgetAlert(models.Model):
    """That ``team``'s month-to-date spend reached ``threshold`` percent of its budget in the
    month starting ``month`` (the 1st, in the team's time zone): one row per team, month and
    threshold, inserted before anyone is told, so the unique constraint lets only one worker
    send it. ``spent`` and ``budget`` are USD when it was sent."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budget_alerts")
    month = models.DateField(help_text="1st of the team's month")
    threshold = models.PositiveSmallIntegerField(help_text="Percent of the monthly budget")
    spent = models.DecimalField(max_digits=14, decimal_places=2, help_text="USD")
    budget = models.DecimalField(max_digits=12, decimal_places=2, help_text="USD")
    sent_at = models.DateTimeField()
    stopped = models.PositiveIntegerField(
        default=0, help_text="Running workspaces stopped with it (stop at 100%)"
    )

    class Meta:
        ordering = ["team", "month", "threshold"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "month", "threshold"], name="budgetalert_unique_month_threshold"
            )
        ]

    def __str__(self) -> str:
        return f"{self.team}: {self.threshold}% of {self.month:%B %Y} budget"


class ApiScope(models.TextChoices):
    """What a personal access token lets its holder do through /api/v1/."""

    READ = "read", "Read"
    WRITE = "write", "Read and write"


class ApiToken(models.Model):
    """A personal access token for /api/v1/ (teams.tokens): ``gpp_`` + 43 url-safe characters,
    shown once at creation. Only its SHA-256 (hex) is kept: the token is 256 random bits, so
    nobody can guess one from its hash however fast the hash is, and a fast hash lets every
    API request be checked with one indexed lookup (a slow password hash would add its cost to
    each call). ``prefix`` (the first characters after ``gpp_``) tells the user's tokens apart
    on the page and cannot be used to sign in."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=64, help_text="The user's label, e.g. the laptop or CI job")
    scope = models.CharField(max_length=8, choices=ApiScope.choices)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=8, editable=False)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "created_at"])]

    def __str__(self) -> str:
        return f"API token {self.prefix}… ({self.name}) of {self.user}"
