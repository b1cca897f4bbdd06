"""Celery tasks of teams: thin wrappers over services."""

from celery import shared_task
from django.utils import timezone

from teams import services


@shared_task
def expire_quota_requests() -> int:
    """Beat: expire requests that waited past QUOTA_REQUEST_EXPIRY_DAYS. Returns how many."""
    return services.quota_requests_expire(now=timezone.now())
