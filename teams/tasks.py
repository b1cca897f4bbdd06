"""Celery tasks of teams: thin wrappers over the business rules (quota_requests)."""

from dataclasses import asdict
from typing import Any

from celery import shared_task
from django.utils import timezone

from teams import quota_requests
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
