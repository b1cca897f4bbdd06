"""Beat's task for bookings: hold, warn and release them in Azure (bookings.lifecycle)."""

from celery import shared_task
from django.utils import timezone

from bookings.lifecycle import bookings_advance


@shared_task(ignore_result=True)
def advance_bookings() -> dict[str, int]:
    """One tick: every booking due a step moves on; {state: how many}."""
    return bookings_advance(now=timezone.now())
