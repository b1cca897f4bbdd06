"""A Celery beat scheduler that sends only while it holds a lease, so that two or more beats
can run and exactly one of them sends the schedule (``CELERY_BEAT_SCHEDULER``).

Why a database lease and not celery-redbeat or django-celery-beat: redbeat locks in Redis,
which the embedded default (SQLite and a filesystem broker) does not have; django-celery-beat
keeps the schedule in the database but takes no lock, so two of its beats send twice. A lease
row (workspaces.leases) works on both stacks, and this class keeps Celery's own
PersistentScheduler for everything else (the schedule in portal/celery.py, the local file).

Timing (settings BEAT_LEASE_SECONDS, BEAT_LEASE_POLL_SECONDS): the leader renews every third
of the lease and sends only while more than a third of it is left; a standby tries to take
the lease every poll. A leader that dies (SIGKILL, node lost) is replaced at most
``lease + poll`` seconds after its last renewal; one that stops cleanly (SIGTERM) lets go, and
a standby takes over at its next poll. A beat that takes over continues each entry from when
the last leader sent it (workspaces.models.BeatRun), so nothing is sent twice for one due time.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from datetime import datetime, timedelta
from typing import Any

from celery.beat import PersistentScheduler
from django.apps import apps
from django.conf import settings
from django.db import DatabaseError, close_old_connections
from django.utils import timezone

log = logging.getLogger(__name__)
# The workspaces modules are imported inside the methods: they import models, which only
# works once __init__ has populated Django's apps (Celery imports this module before).


def holder_name() -> str:
    """``host:pid:nonce``, at most 64 characters: the nonce tells apart two beats that are
    both pid 1 in containers on one node, and a restart from its predecessor."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{secrets.token_hex(4)}"


class LeaderScheduler(PersistentScheduler):
    """Celery's PersistentScheduler, sending only while this beat holds the lease
    ``celery-beat``; every send is recorded for workspaces.beat_selectors.beat_last_runs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # `celery beat` never sets Django up, and the lease is a model. Not django.setup(): it
        # would apply LOGGING over Celery's logging, and the beat's log would go silent.
        apps.populate(settings.INSTALLED_APPS)
        self.holder = holder_name()
        self.lease_seconds = float(settings.BEAT_LEASE_SECONDS)
        self.poll_seconds = float(settings.BEAT_LEASE_POLL_SECONDS)
        self.lease_until: datetime | None = None  # expiry of our lease, None while standing by
        self.renewed_at: datetime | None = None
        self._told_standby = False
        super().__init__(*args, **kwargs)

    # The loop: Celery calls tick() and sleeps for what it returns.
    def tick(self, *args: Any, **kwargs: Any) -> float:
        # A beat runs for months on one connection; drop it if the database went away.
        close_old_connections()
        now = timezone.now()
        self._lead(now)
        if self.lease_until is None:
            return self.poll_seconds
        if self.lease_until - now <= timedelta(seconds=self.lease_seconds / 3):
            return min(1.0, self.poll_seconds)  # renewal is late (slow database): send nothing
        delay = float(super().tick(*args, **kwargs))
        return max(0.0, min(delay, self._seconds_to_renewal(timezone.now())))

    def _seconds_to_renewal(self, now: datetime) -> float:
        assert self.renewed_at is not None
        due = self.renewed_at + timedelta(seconds=self.lease_seconds / 3)
        return (due - now).total_seconds()

    def _lead(self, now: datetime) -> None:
        # Not at the top: Celery imports this module before Django has its apps (see above).
        from workspaces.beat_selectors import BEAT_LEASE
        from workspaces.leases import lease_renew, lease_take

        name, holder, seconds = BEAT_LEASE, self.holder, self.lease_seconds
        try:
            if self.lease_until is None:
                until = lease_take(name=name, holder=holder, seconds=seconds, now=now)
                if until is not None:
                    self._took(until, now)
                elif not self._told_standby:
                    log.info("beat %s standing by: another beat leads", self.holder)
                    self._told_standby = True
            elif self._seconds_to_renewal(now) <= 0:
                until = lease_renew(name=name, holder=holder, seconds=seconds, now=now)
                if until is None:
                    log.warning("beat %s lost the lease to another beat", self.holder)
                    self._step_down()
                else:
                    self.lease_until, self.renewed_at = until, now
        except DatabaseError:
            # Without the database we cannot know that we still lead: send nothing.
            log.exception("beat %s cannot reach the database; standing by", self.holder)
            self._step_down()

    def _took(self, until: datetime, now: datetime) -> None:
        # Not at the top: Celery imports this module before Django has its apps (see above).
        from workspaces.beat_selectors import beat_last_runs

        self.lease_until, self.renewed_at = until, now
        self._told_standby = False
        log.info("beat %s leads from %s", self.holder, now.isoformat())
        # Continue each entry from the last leader's send, not from our own start-up.
        runs = beat_last_runs()
        for name, entry in self.schedule.items():
            if name in runs:
                entry.last_run_at = runs[name]
        self._heap = None  # rebuilt from the entries at the next tick

    def _step_down(self) -> None:
        self.lease_until = self.renewed_at = None

    def apply_async(self, entry: Any, producer: Any = None, advance: bool = True, **kw: Any) -> Any:
        # Not at the top: Celery imports this module before Django has its apps (see above).
        from workspaces.leases import beat_run_record

        result = super().apply_async(entry, producer=producer, advance=advance, **kw)
        try:
            beat_run_record(job=entry.name, holder=self.holder, at=timezone.now())
        except DatabaseError:
            log.exception("beat %s sent %s but could not record it", self.holder, entry.name)
        return result

    def close(self) -> None:
        # Not at the top: Celery imports this module before Django has its apps (see above).
        from workspaces.beat_selectors import BEAT_LEASE
        from workspaces.leases import lease_release

        if self.lease_until is not None:
            try:
                lease_release(name=BEAT_LEASE, holder=self.holder, now=timezone.now())
            except DatabaseError:
                log.exception("beat %s could not let go of the lease", self.holder)
            self._step_down()
        super().close()
