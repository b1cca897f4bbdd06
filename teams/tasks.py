"""Celery tasks of teams: thin wrappers over the business rules (quota_requests)."""

from dataclasses import asdict
from typing import Any

from celery import shared_task
from django.utils import timezone

from teams import quota_requests, webhook_delivery
from teams.entra_sync import entra_sync as entra_sync_run


@shared_task
def expire_quota_requests() -> int:
    """Beat: expire requests that waited past QUOTA_REQUEST_EXPIRY_DAYS. Returns how many."""
    return quota_requests.quota_requests_expire(now=timezone.now())


@shared_task
def entra_sync() -> dict[str, Any]:
    """Beat, every ENTRA_SYNC_SECONDS: the Graph sync (teams.entra_sync) when Entra ID sign-in
    is on. Returns its counts."""
    return asdict(entra_sync_run(now=timezone.now()))


@shared_task(ignore_result=True)
def deliver_webhook(delivery_id: str) -> None:
    """One attempt of a webhook delivery (teams.webhook_delivery); a failed one that may be
    retried is queued again after its back-off."""
    delay = webhook_delivery.webhook_deliver(delivery_id=delivery_id, now=timezone.now())
    if delay is not None:
        deliver_webhook.apply_async((delivery_id,), countdown=delay)


@shared_task
def retry_webhook_deliveries() -> int:
    """Beat, every minute: queue the deliveries whose next attempt is due (the safety net
    for a queued retry that was lost). Returns how many."""
    due = webhook_delivery.webhook_deliveries_due(now=timezone.now())
    for delivery_id in due:
        deliver_webhook.delay(delivery_id)
    return len(due)
