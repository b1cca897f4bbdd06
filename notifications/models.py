"""Notices (in-app messages with an email copy) and a team's chat and JSON webhooks with their
delivery log.

These models moved here from teams with their tables (``db_table`` keeps each ``teams_*``
name; migrations/0001 moves them in Django's state only, no row or table moves).

The webhook URL (for Teams and Slack a credential in itself) and the generic hook's signing
secret are stored encrypted (notifications.webhook_crypto); pages show ``url_redacted`` only.
"""

import uuid

from django.conf import settings
from django.db import models


class NoticeKind(models.TextChoices):
    """What a notice is about, which says when it stops being true (see Notice.about)."""

    INFO = "info", "Information"
    STOP_WARNING = "stop_warning", "Stop warning"
    NO_TELEMETRY = "no_telemetry", "No telemetry"
    AWAITING_APPROVAL = "awaiting_approval", "Waiting for approval"
    APPROVAL_ASKED = "approval_asked", "Approval asked"
    INCREASE_ASKED = "increase_asked", "Quota increase asked"
    BUDGET = "budget", "Budget alert"
    AUTO_STOP = "auto_stop", "Stopped automatically"
    MEMBER_ADDED = "member_added", "Added to a team"


class Notice(models.Model):
    """An in-app message for one user, shown on every page until dismissed (``read_at``) or
    until what it says is no longer true (``resolved_at``, set by the service that ends that
    state, or ``expires_at`` passing).

    ``about`` names the object whose state the notice reports, as "<model>:<pk>" (e.g.
    "workspace:12", "team:3", "teamquotaincrease:7"; notifications.notices.notice_about), and
    ``kind`` which state of it: together they are the key the resolving service looks up.
    Informative notices (kind "info") never resolve by themselves."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notices"
    )
    text = models.TextField()
    link = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField()
    read_at = models.DateTimeField(null=True, blank=True)
    kind = models.CharField(max_length=24, choices=NoticeKind.choices, default=NoticeKind.INFO)
    about = models.CharField(max_length=64, blank=True)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="No longer true from then on (e.g. a month's budget)"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    resolved_reason = models.CharField(max_length=300, blank=True)

    class Meta:
        db_table = "teams_notice"  # moved from teams with its table (migrations 0001)
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["user", "read_at"]),
            models.Index(
                fields=["about", "kind"],
                name="notice_open_about",
                condition=models.Q(resolved_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user}: {self.text[:40]}"


class WebhookKind(models.TextChoices):
    TEAMS = "teams", "Microsoft Teams"
    SLACK = "slack", "Slack"
    GENERIC = "generic", "JSON (signed)"


class WebhookEvent(models.TextChoices):
    """What a hook may be told of; each is emitted where the portal sends its notice."""

    APPROVAL_NEEDED = "approval_needed", "Approval needed"
    APPROVAL_DECIDED = "approval_decided", "Approval decided"
    IDLE_WARNING = "idle_warning", "Idle stop warning"
    IDLE_STOP = "idle_stop", "Stopped automatically"
    BUDGET = "budget", "Budget threshold passed"
    EVICTION = "eviction", "Spot eviction"
    FAILURE = "failure", "Workspace failed"
    QUEUE_STARTED = "queue_started", "Started from the queue"
    RECOMMENDATION = "recommendation", "Right-sizing recommendations"
    TEST = "test", "Test message"


class Webhook(models.Model):
    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="webhooks")
    kind = models.CharField(max_length=16, choices=WebhookKind.choices)
    name = models.CharField(max_length=100)
    url_encrypted = models.TextField()  # webhook_crypto.encrypt(url)
    url_redacted = models.CharField(max_length=120)  # scheme, host and "…": safe to show
    secret_encrypted = models.TextField(blank=True)  # generic only: the HMAC key, encrypted
    events = models.JSONField(default=list)  # WebhookEvent values
    enabled = models.BooleanField(default=True)
    # Deliveries (not attempts) that failed in a row; reset by a success.
    consecutive_failures = models.PositiveIntegerField(default=0)
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField()

    class Meta:
        db_table = "teams_webhook"
        ordering = ["team", "name", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="webhook_name_unique_in_team")
        ]

    def __str__(self) -> str:
        return f"{self.team_id}: {self.name} ({self.kind})"


class DeliveryState(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed"
    ABANDONED = "abandoned", "Abandoned (hook disabled)"


class WebhookDelivery(models.Model):
    """One event for one hook, tried up to WEBHOOK_MAX_ATTEMPTS times. ``payload`` holds the
    event's facts (notifications.webhook_payloads.Facts), never the URL or the secret; the body each
    service gets is rendered from it at each attempt."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=32, choices=WebhookEvent.choices)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField()
    state = models.CharField(
        max_length=16, choices=DeliveryState.choices, default=DeliveryState.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    # When the next attempt is due; also a claim: an attempt moves it past its own timeout.
    next_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "teams_webhookdelivery"
        indexes = [models.Index(fields=["state", "next_attempt_at"])]

    def __str__(self) -> str:
        return f"{self.event} to {self.webhook_id} ({self.state})"


class WebhookAttempt(models.Model):
    """The delivery log: one row per HTTP attempt."""

    class Outcome(models.TextChoices):
        OK = "ok", "Delivered"
        HTTP_ERROR = "http_error", "Refused"
        GONE = "gone", "Gone (hook disabled)"
        TIMEOUT = "timeout", "Timed out"
        ERROR = "error", "Connection error"

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="attempts")
    delivery = models.ForeignKey(
        WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log"
    )
    event = models.CharField(max_length=32, choices=WebhookEvent.choices)
    at = models.DateTimeField()
    attempt = models.PositiveSmallIntegerField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    duration_ms = models.PositiveIntegerField()
    error = models.CharField(max_length=300, blank=True)  # truncated; never the URL

    class Meta:
        db_table = "teams_webhookattempt"
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["webhook", "at"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.event}: {self.outcome}"
