"""Reads about the Celery beat: which process leads, since when, and when each schedule entry
was last sent (for /metrics: "time since each beat job last ran", and the beat-late alert)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from workspaces.models import BeatRun, Lease

BEAT_LEASE = "celery-beat"


@dataclass(frozen=True)
class BeatLeader:
    """The beat that holds the lease: ``holder`` is ``host:pid:nonce``; ``since`` when it took
    the lease, ``expires_at`` when it lapses unless renewed (aware UTC)."""

    holder: str
    since: datetime | None
    expires_at: datetime


def beat_leader(*, now: datetime) -> BeatLeader | None:
    """The leading beat, or None when no beat holds an unexpired lease (none runs, or the
    leader died less than BEAT_LEASE_SECONDS ago and no standby has taken over yet)."""
    lease = Lease.objects.filter(name=BEAT_LEASE, expires_at__gt=now).first()
    if lease is None:
        return None
    return BeatLeader(holder=lease.holder, since=lease.since, expires_at=lease.expires_at)


def beat_last_runs() -> dict[str, datetime]:
    """``{job name: aware UTC datetime}``: when the leading beat last sent each schedule entry
    of portal/celery.py (its name there, e.g. "idle-sweep"). An entry never sent since this
    table was created is absent. One query."""
    return dict(BeatRun.objects.values_list("job", "last_run_at"))
