"""Reads of a team's webhooks and their delivery log."""

from django.db.models import QuerySet

from teams.models import DeliveryState, Team, Webhook, WebhookAttempt, WebhookDelivery

LOG_ROWS = 200


def webhooks_of_team(*, team: Team) -> QuerySet[Webhook]:
    """The team's hooks, by name (one query)."""
    return Webhook.objects.filter(team=team).select_related("team").order_by("name", "pk")


def webhook_attempts(*, hook: Webhook, limit: int = LOG_ROWS) -> list[WebhookAttempt]:
    """The hook's last ``limit`` attempts, newest first (one query on (webhook, at))."""
    return list(WebhookAttempt.objects.filter(webhook=hook).order_by("-at", "-pk")[:limit])


def webhook_waiting_count(*, hook: Webhook) -> int:
    """How many of the hook's deliveries are still pending: queued, or waiting for a retry
    (one COUNT on the delivery's state)."""
    return WebhookDelivery.objects.filter(webhook=hook, state=DeliveryState.PENDING).count()
