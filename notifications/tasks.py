"""Celery tasks of notifications: thin wrappers over the webhook delivery
(notifications.webhook_delivery). They keep the names they had in teams.tasks, so the
deliveries queued before a deploy and beat's schedule (portal/celery.py) still find them."""

from celery import shared_task
from django.utils import timezone

from notifications import webhook_delivery


@shared_task(ignore_result=True, name="teams.tasks.deliver_webhook")
def deliver_webhook(delivery_id: str) -> None:
    """One attempt of a webhook delivery (notifications.webhook_delivery); a failed one that
    may be retried is queued again after its back-off."""
    delay = webhook_delivery.webhook_deliver(delivery_id=delivery_id, now=timezone.now())
    if delay is not None:
        deliver_webhook.apply_async((delivery_id,), countdown=delay)


@shared_task(name="teams.tasks.retry_webhook_deliveries")
def retry_webhook_deliveries() -> int:
    """Beat, every minute: queue the deliveries whose next attempt is due (the safety net
    for a queued retry that was lost). Returns how many."""
    due = webhook_delivery.webhook_deliveries_due(now=timezone.now())
    for delivery_id in due:
        deliver_webhook.delay(delivery_id)
    return len(due)
