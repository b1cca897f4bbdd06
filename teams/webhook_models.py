"""A team's chat and JSON webhooks and their delivery log (imported by teams.models).

The URL (for Teams and Slack a credential in itself) and the generic hook's signing secret
are stored encrypted (teams.webhook_crypto); pages show ``url_redacted`` only.
"""

import uuid

from django.conf import settings
from django.db import models


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
    event's facts (teams.webhook_payloads.Facts), never the URL or the secret; the body each
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
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["webhook", "at"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.event}: {self.outcome}"
