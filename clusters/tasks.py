"""Celery tasks for node pools: thin wrappers that pass ids to clusters.services."""

import time
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from cloud.errors import CloudError
from clusters import services
from workspaces.services import Next
from workspaces.tasks import retry_delay


@shared_task(bind=True, acks_late=True, max_retries=None)
def advance_pool(self, pool_id: int) -> None:
    """Run the node pool's Azure operation (create or delete), polling it every
    AZURE_POLLING_INTERVAL seconds by re-queueing itself rather than sleeping. Transient Azure
    errors are retried with back-off up to WORKSPACE_RETRY_MAX times."""
    step = _advance_once(self, pool_id)
    while step is Next.POLL and self.request.is_eager:
        time.sleep(settings.AZURE_POLLING_INTERVAL)
        step = _advance_once(self, pool_id)
    if step is Next.POLL:
        advance_pool.apply_async(args=[pool_id], countdown=settings.AZURE_POLLING_INTERVAL)


def _advance_once(task, pool_id: int) -> Next:
    try:
        return services.pool_advance(pool_id=pool_id, clock=timezone.now)
    except CloudError as exc:
        if task.request.retries >= settings.WORKSPACE_RETRY_MAX:
            services.pool_operation_failed(pool_id=pool_id, error=exc, now=timezone.now())
            return Next.DONE
        delay = retry_delay(attempt=task.request.retries, retry_after=exc.retry_after)
        raise task.retry(exc=exc, countdown=delay) from exc


@shared_task
def reconcile_pools() -> int:
    """Beat: re-queue node pool operations whose task was lost. Returns how many."""
    stale = timezone.now() - timedelta(seconds=settings.PORTAL_RECONCILE_INTERVAL * 2)
    return len(services.pool_reconcile(stale_before=stale))
