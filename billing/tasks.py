"""Billing's beat tasks: thin wrappers over billing.services."""

from celery import shared_task
from django.utils import timezone


@shared_task(ignore_result=True)
def rollup_spend() -> int:
    """Roll every team's complete days into DailySpend (idempotent); returns rows written."""
    from billing.services import rollup_rebuild

    return rollup_rebuild(now=timezone.now())
