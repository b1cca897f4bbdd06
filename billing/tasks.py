"""Billing's beat tasks: thin wrappers over billing.services."""

from celery import shared_task
from django.utils import timezone


@shared_task(ignore_result=True)
def rollup_spend() -> int:
    """Roll every team's complete days into DailySpend (idempotent); returns rows written."""
    from billing.services import rollup_rebuild

    return rollup_rebuild(now=timezone.now())


@shared_task(bind=True, ignore_result=True, max_retries=3)
def sync_actual_costs(self) -> int:
    """Nightly: fetch Azure's actual costs (Cost Management) of the month so far and the last
    complete days; returns rows stored. A second delivery stores the same rows again. Azure
    throttling past the client's retries is retried later, as Azure asks (or in 10 minutes)."""
    from billing.services import actual_costs_sync
    from cloud.errors import CloudError

    try:
        return actual_costs_sync(now=timezone.now()).rows
    except CloudError as exc:
        if not exc.transient:
            raise
        raise self.retry(countdown=exc.retry_after or 600) from exc
