"""Celery tasks of teams: thin wrappers over services."""

from dataclasses import asdict

from celery import shared_task
from django.utils import timezone

from teams import services
from teams.entra_sync import entra_sync as entra_sync_run


@shared_task
def expire_quota_requests() -> int:
    """Beat: expire requests that waited past QUOTA_REQUEST_EXPIRY_DAYS. Returns how many."""
    return services.quota_requests_expire(now=timezone.now())


@shared_task
def check_budget_alerts() -> dict:
    """Beat, every SPEND_ALERT_SECONDS: alert teams at 50/80/100 % of their monthly budget and
    stop the running workspaces of those with stop at 100 % on. Returns counts."""
    result = services.budget_alerts_check(now=timezone.now())
    return {
        "evaluated": result.evaluated,
        "sent": len(result.sent),
        "stopped": len(result.stopped),
    }


@shared_task
def entra_sync() -> dict:
    """Beat, every ENTRA_SYNC_SECONDS: the Graph sync (teams.entra_sync) when Entra ID sign-in
    is on. Returns its counts."""
    return asdict(entra_sync_run(now=timezone.now()))
