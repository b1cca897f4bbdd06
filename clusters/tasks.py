"""Celery tasks for node pools: thin wrappers that pass ids to clusters.services."""

from typing import Any  # a bound task is a Celery Task, which ships no types

from celery import shared_task
from django.utils import timezone

from clusters import services
from clusters.models import NodePool
from workspaces import chains


@shared_task(bind=True, acks_late=True, max_retries=None)
def advance_pool(self: Any, pool_id: int, claim: str = "") -> None:
    """Run the node pool's Azure operation (create or delete), polling it every
    AZURE_POLLING_INTERVAL seconds by re-queueing itself rather than sleeping. Transient Azure
    errors are retried with back-off, at most WORKSPACE_RETRY_MAX times in a row counted on the
    pool, then recorded as a failure. ``claim``: the chain this run belongs to (one chain per
    operation, see workspaces.chains)."""
    chains.run(
        task=self,
        args=[pool_id],
        rows=NodePool.objects.filter(pk=pool_id),
        claim=claim,
        step=lambda: services.pool_advance(pool_id=pool_id, clock=timezone.now),
        give_up=lambda error: services.pool_operation_failed(
            pool_id=pool_id, error=error, now=timezone.now()
        ),
    )


@shared_task
def reconcile_pools() -> int:
    """Beat: take over and re-queue node pool operations whose chain of tasks was lost.
    Returns how many."""
    now = timezone.now()
    return len(services.pool_reconcile(now=now, stale_before=now - chains.grace()))
