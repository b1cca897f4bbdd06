"""Services for named leases (workspaces.models.Lease) and the Celery beat's record of its runs.

A lease is one row per name, taken and kept by compare-and-set on ``holder`` and
``expires_at``: single UPDATE statements, so it works alike on SQLite (the embedded default)
and PostgreSQL, with no advisory locks and no Redis. Whoever holds an unexpired lease may act;
a holder that stops renewing loses it ``seconds`` after its last renewal.

Expiry compares the database row with the caller's ``now``: the processes that share a lease
need clocks within a small part of its duration of each other (NTP; AKS nodes run chrony).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q

from workspaces.models import BeatRun, Lease


def lease_take(*, name: str, holder: str, seconds: float, now: datetime) -> datetime | None:
    """Take the lease ``name`` for ``holder`` until ``now + seconds``, when it is free, has
    expired, or is this holder's already (then ``since`` is kept); the new expiry (aware UTC),
    or None when another holder has it. Raises django.db.DatabaseError when the database
    does not answer."""
    until = now + timedelta(seconds=seconds)
    if Lease.objects.filter(name=name, holder=holder).update(expires_at=until):
        return until
    taken = Lease.objects.filter(Q(name=name) & Q(expires_at__lte=now)).update(
        holder=holder, expires_at=until, since=now
    )
    if taken:
        return until
    try:
        with transaction.atomic():
            Lease.objects.create(name=name, holder=holder, expires_at=until, since=now)
    except IntegrityError:
        return None  # another holder took it first, or holds it unexpired
    return until


def lease_renew(*, name: str, holder: str, seconds: float, now: datetime) -> datetime | None:
    """Extend ``holder``'s lease ``name`` to ``now + seconds``; the new expiry, or None when
    the lease is someone else's now (it lapsed and was taken). A lapsed lease nobody took is
    still this holder's: nobody else can have acted in between. Raises DatabaseError."""
    until = now + timedelta(seconds=seconds)
    kept = Lease.objects.filter(name=name, holder=holder).update(expires_at=until)
    return until if kept else None


def lease_release(*, name: str, holder: str, now: datetime) -> None:
    """Let go of ``holder``'s lease ``name`` (it expires ``now``), so that a waiting process
    takes it at its next poll instead of after the full duration. Raises DatabaseError."""
    Lease.objects.filter(name=name, holder=holder).update(expires_at=now)


def beat_run_record(*, job: str, holder: str, at: datetime) -> None:
    """Record that ``holder`` (the leading beat) sent the schedule entry ``job`` at ``at``
    (aware UTC); read by workspaces.beat_selectors. Raises DatabaseError."""
    BeatRun.objects.update_or_create(job=job, defaults={"last_run_at": at, "holder": holder})
