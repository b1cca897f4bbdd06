"""One chain of tasks per Azure operation, and a bound on its attempts that holds.

A workspace's (or node pool's) operation is carried by one chain of tasks: each run does one
step and queues the next (poll again, check again, retry after a back-off). The chain holds a
claim on the row: ``operation_claim`` (the chain's id) and ``operation_due_at`` (when it runs
next), taken, moved on and released by compare-and-set. A run whose claim is gone (a person
moved the workspace on, or the sweep took a late chain over) stops quietly. The reconcile sweep
takes over only a chain overdue by more than its grace (a lost message, a dead worker), so a
chain waiting in a back-off or for Azure's Retry-After is never doubled.

Failed attempts are counted on the row (``operation_attempts``), not in Celery's per-chain
``retries``: a chain taken over goes on counting, so WORKSPACE_RETRY_MAX bounds the attempts of
the operation in a row, whatever carries them. The count starts again at 0 after a step that
went through and with each new status (states.transition).

Rows need the three fields; workspaces.models.Workspace and clusters.models.NodePool have them.
"""

import logging
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from cloud.errors import CloudError

log = logging.getLogger(__name__)

# The one row a chain carries, as a query set of Workspace or NodePool (see the docstring).
Rows = QuerySet[Any, Any]

# Fields a transition writes when it hands the row to a new chain (user actions, sweeps).
RELEASED: dict[str, Any] = {"operation_claim": "", "operation_due_at": None}


class Next(Enum):
    """What a chain does after one step: nothing more (DONE), poll the Azure operation again
    in AZURE_POLLING_INTERVAL seconds (POLL), check Azure's quota and SKU restrictions again in
    AZURE_PRECHECK_RETRY_SECONDS (WAIT), look at a MIG pod waiting for a free slice again in
    KUBE_PENDING_RETRY_SECONDS (PENDING), or read a setting-up VM's agent again in
    SETUP_POLL_SECONDS (SETUP)."""

    DONE = "done"
    POLL = "poll"
    WAIT = "wait"
    PENDING = "pending"
    SETUP = "setup"


def retry_delay(*, attempt: int, retry_after: float | None) -> float:
    """Seconds before try ``attempt`` + 1 (``attempt`` counts from 0): Azure's Retry-After
    when it gave one, else exponential back-off from 2 s, capped at 5 minutes."""
    if retry_after:
        return float(retry_after)
    return float(min(300, 2 ** (attempt + 1)))


def grace() -> timedelta:
    """How late a chain may be before it is presumed lost: two reconcile intervals."""
    return timedelta(seconds=2 * settings.PORTAL_RECONCILE_INTERVAL)


def lost(*, stale_before: datetime) -> Q:
    """Rows whose chain is lost: its next step was due before ``stale_before``, or no chain
    holds the row and it has not changed since then."""
    return Q(operation_due_at__lt=stale_before) | Q(operation_claim="", updated_at__lt=stale_before)


def take_over(rows: Rows, *, stale_before: datetime, now: datetime) -> str:
    """Claim the row of ``rows`` (one row, e.g. ``filter(pk=..., status__in=...)``) for a new
    chain if its chain is lost (see ``lost``); the new chain's id, or "" when a live chain
    holds it. Compare-and-set: two sweeps at once take it over once."""
    claim = uuid.uuid4().hex
    taken = rows.filter(lost(stale_before=stale_before)).update(
        operation_claim=claim, operation_due_at=now
    )
    return claim if taken else ""


def hold(rows: Rows, *, claim: str, now: datetime) -> str:
    """At the start of a run: keep the chain's ``claim`` (due now), or for a run that has none
    (the first of a chain) take the row if no live chain holds it. The claim held, or "" when
    another chain carries the operation."""
    if claim:
        kept = rows.filter(operation_claim=claim).update(operation_due_at=now)
        return claim if kept else ""
    claim = uuid.uuid4().hex
    free = Q(operation_claim="") | Q(operation_due_at__lt=now - grace())
    taken = rows.filter(free).update(operation_claim=claim, operation_due_at=now)
    return claim if taken else ""


def release(rows: Rows, *, claim: str) -> None:
    """The chain ends: the row is free for the next one."""
    rows.filter(operation_claim=claim).update(operation_attempts=0, **RELEASED)


def run(
    *,
    task: Any,  # the bound Celery task (Celery ships no types): name, request, apply_async
    args: list[Any],
    rows: Rows,
    claim: str,
    step: Callable[[], Next],
    give_up: Callable[[CloudError], None],
) -> None:
    """One run of a chain of ``task`` called with ``args``: hold the claim, do a step, then
    queue the next run with the claim (``task.apply_async(args=args, kwargs={"claim": ...},
    countdown=seconds)``) or release it at the end.

    ``step`` does one step and raises CloudError for a transient Azure error; after
    WORKSPACE_RETRY_MAX such errors in a row, ``give_up(error)`` records the failure. Eager
    tasks (tests) poll and retry in place and do not wait for WAIT, PENDING or SETUP: the
    caller runs them again.
    """
    claim = hold(rows, claim=claim, now=timezone.now())
    if not claim:
        log.info("%s%s: another chain carries the operation", task.name, args)
        return
    eager = bool(task.request.is_eager)
    while True:
        try:
            delay, went_through = _countdown(step(), eager), True
        except CloudError as exc:
            delay, went_through = _failed(rows, claim, exc, give_up), False
            if delay is None:
                return
        if delay is None:
            release(rows, claim=claim)
            return
        if not _next_due(rows, claim, delay, went_through):
            return  # taken over: the chain that took it goes on
        if not eager:
            task.apply_async(args=args, kwargs={"claim": claim}, countdown=delay)
            return
        time.sleep(delay if went_through else 0)


def _countdown(step: Next, eager: bool) -> float | None:
    """Seconds until the next run; None when the chain ends here."""
    if step is Next.POLL:
        return float(settings.AZURE_POLLING_INTERVAL)
    if eager:
        return None
    if step is Next.WAIT:
        return float(settings.AZURE_PRECHECK_RETRY_SECONDS)
    if step is Next.PENDING:
        return float(settings.KUBE_PENDING_RETRY_SECONDS)
    if step is Next.SETUP:
        return float(settings.SETUP_POLL_SECONDS)
    return None


def _next_due(rows: Rows, claim: str, delay: float, went_through: bool) -> bool:
    fields: dict[str, Any] = {"operation_due_at": timezone.now() + timedelta(seconds=delay)}
    if went_through:
        fields["operation_attempts"] = 0
    return bool(rows.filter(operation_claim=claim).update(**fields))


def _failed(
    rows: Rows, claim: str, error: CloudError, give_up: Callable[[CloudError], None]
) -> float | None:
    """Count a failed attempt; the delay before the next, or None when the chain ends (the
    bound is reached and the failure recorded, or the claim is gone)."""
    attempts_now = rows.filter(operation_claim=claim).values_list("operation_attempts", flat=True)
    before: int | None = attempts_now.first()
    if before is None:
        return None
    attempts = before + 1
    if attempts > settings.WORKSPACE_RETRY_MAX:
        try:
            give_up(error)
        except CloudError as exc:
            # Recording the failure needs Azure too (a failed create's clean-up): the claim
            # lapses and the sweep's next chain tries again, so nothing is left billed.
            log.warning("Giving up needs Azure, which did not answer (%s)", exc.code)
            return None
        release(rows, claim=claim)
        return None
    delay = retry_delay(attempt=before, retry_after=error.retry_after)
    counted = rows.filter(operation_claim=claim, operation_attempts=before).update(
        operation_attempts=attempts
    )
    return delay if counted else None
