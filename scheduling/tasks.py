"""Celery tasks: thin wrappers that call the queue's services."""

import logging
import time

from celery import shared_task
from django.utils import timezone

from scheduling.autostart import autostarts_run
from scheduling.claims import claims_expire
from scheduling.queue import queue_pass

log = logging.getLogger(__name__)


@shared_task(acks_late=True)
def run_queue_pass() -> int:
    """One pass of the fair queue (beat every QUEUE_PASS_SECONDS, and whenever GPUs are
    freed); returns how many workspaces it started. A pass that dies midway is harmless: what
    it moved is moved, the rest waits for the next."""
    began = time.monotonic()
    result = queue_pass(now=timezone.now())
    if result.admitted:
        log.info(
            "queue pass started %d of %d in %.3f s",
            len(result.admitted),
            result.looked_at,
            time.monotonic() - began,
        )
    return len(result.admitted)


@shared_task(acks_late=True)
def expire_queue_claims() -> int:
    """Stop what the queue started and nobody claimed in time; returns how many."""
    return len(claims_expire(now=timezone.now()))


@shared_task(acks_late=True)
def run_autostarts() -> int:
    """Queue (and start, with room) the workspaces whose schedule is due; how many."""
    return len(autostarts_run(now=timezone.now()))
