"""Billing's beat tasks: thin wrappers over billing.rollups, billing.actual_costs and
billing.budget_alerts."""

from typing import Any  # a bound task is a Celery Task, which ships no types

from celery import shared_task
from django.utils import timezone

from billing.actual_costs import actual_costs_sync
from billing.budget_alerts import budget_alerts_check
from billing.recommendations import recommendations_refresh
from billing.rollups import rollup_rebuild
from billing.savings_digest import savings_digest_send
from cloud.errors import CloudError


@shared_task(ignore_result=True)
def rollup_spend() -> int:
    """Roll every team's complete days into DailySpend (idempotent); returns rows written."""
    return rollup_rebuild(now=timezone.now())


@shared_task(bind=True, ignore_result=True, max_retries=3)
def sync_actual_costs(self: Any) -> int:
    """Nightly: fetch Azure's actual costs (Cost Management) of the month so far and the last
    complete days; returns rows stored. A second delivery stores the same rows again. Azure
    throttling past the client's retries is retried later, as Azure asks (or in 10 minutes)."""
    try:
        return actual_costs_sync(now=timezone.now()).rows
    except CloudError as exc:
        if not exc.transient:
            raise
        raise self.retry(countdown=exc.retry_after or 600) from exc


# Its name from when budget alerts were teams' code: beat schedules and messages already
# queued carry it, so it stays.
@shared_task(name="teams.tasks.check_budget_alerts")
def check_budget_alerts() -> dict[str, int]:
    """Beat, every SPEND_ALERT_SECONDS: alert teams at 50/80/100 % of their monthly budget and
    stop the running workspaces of those with stop at 100 % on. Returns counts."""
    result = budget_alerts_check(now=timezone.now())
    return {
        "evaluated": result.evaluated,
        "sent": len(result.sent),
        "stopped": len(result.stopped),
    }


@shared_task(ignore_result=True)
def refresh_recommendations() -> dict[str, int]:
    """Beat, daily: recompute every workspace's right-sizing advice from its telemetry."""
    result = recommendations_refresh(now=timezone.now())
    return {"advised": result.advised, "removed": result.removed}


@shared_task(ignore_result=True)
def send_savings_digest() -> int:
    """Beat, weekly: tell team admins what right-sizing would save; returns teams told."""
    return len(savings_digest_send(now=timezone.now()))
