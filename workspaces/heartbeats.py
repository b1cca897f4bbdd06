"""Heartbeat ingestion, built for the portal's busiest request (docs/agent-protocol.md).

A heartbeat is authenticated against the agent's token hash, which each process caches for
HEARTBEAT_AUTH_CACHE_SECONDS, and parsed by workspaces.telemetry. Its samples are then
either stored in the request (HEARTBEAT_FLUSH_SECONDS = 0) or queued in the process's
buffer, which a background thread stores every HEARTBEAT_FLUSH_SECONDS in one transaction
of three queries, however many heartbeats it holds. Storing folds the samples into each
agent's idle.Activity, so the sweep never re-reads samples.

What the buffer trades: an acknowledged heartbeat waits up to HEARTBEAT_FLUSH_SECONDS before
the sweep sees it, and a process killed with SIGKILL loses what it had not stored (a gap the
idle policy treats like any telemetry gap). A full buffer answers 503 with Retry-After, so
agents keep their own buffer instead. A token revoked in another process is refused within
HEARTBEAT_AUTH_CACHE_SECONDS; samples that arrive meanwhile are dropped when stored.
"""

from __future__ import annotations

import atexit
import hmac
import logging
import os
import threading
import time
from collections import Counter
from datetime import datetime, timedelta

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from workspaces import idle
from workspaces.models import TelemetrySample, WorkspaceAgent
from workspaces.telemetry import (
    GONE,
    HeartbeatRefused,
    ParsedSample,
    _sha256,
    heartbeat_parse,
    policy_from_row,
)

logger = logging.getLogger(__name__)

CLOCK_SKEW_SECONDS = 300  # samples further ahead of the portal's clock are dropped
_POLICY = "workspace__team__idle_policy__"
_ACTIVITY = ("last_at", "evidence_since", "busy_since", "active_at")
_LATEST = ("nvml", "gpus", "interactive", "cpu_percent")


def heartbeat_ingest(*, workspace_id, token: str, body: bytes, now: datetime) -> int:
    """Take one heartbeat; returns how many samples were taken: those stored as new when
    storing in the request, all of the heartbeat's when queued (duplicates are dropped when
    stored). Raises HeartbeatRefused: 401 wrong token, 410 revoked or deleted, 400 bad
    payload, 503 buffer full."""
    heartbeat_authenticate(workspace_id=workspace_id, token=token, now=now)
    samples = heartbeat_parse(body)
    if settings.HEARTBEAT_FLUSH_SECONDS <= 0:
        return heartbeats_store(batch=[(workspace_id, samples)], now=now)[workspace_id]
    if not BUFFER.add(workspace_id, samples):
        raise HeartbeatRefused(
            503, "The portal is behind on storing telemetry; retry later.", retry_after=5
        )
    return len(samples)


# workspace id -> (token SHA-256, cached until); only tokens that were accepted.
_accepted_tokens: dict = {}


def heartbeat_authenticate(*, workspace_id, token: str, now: datetime) -> None:
    """Check the Bearer token of a workspace's agent; raises HeartbeatRefused 401 (unknown
    workspace or wrong token) or 410 (revoked or deleted). One query, none while cached."""
    digest = _sha256(token)
    cached = _accepted_tokens.get(workspace_id)
    if cached and cached[1] > now and hmac.compare_digest(cached[0], digest):
        return
    row = (
        WorkspaceAgent.objects.filter(pk=workspace_id)
        .values_list("token_sha256", "revoked_at", "workspace__status")
        .first()
    )
    if row is None or not hmac.compare_digest(digest, row[0]):
        raise HeartbeatRefused(401, "Unknown workspace or wrong token.")
    if row[1] is not None or row[2] in GONE:
        _accepted_tokens.pop(workspace_id, None)
        raise HeartbeatRefused(410, "The workspace is deleted; stop sending.")
    if len(_accepted_tokens) > 100_000:  # bounded: a forgotten entry costs one query
        _accepted_tokens.clear()
    ttl = timedelta(seconds=settings.HEARTBEAT_AUTH_CACHE_SECONDS)
    _accepted_tokens[workspace_id] = (digest, now + ttl)


def heartbeat_forget_token(*, workspace_id) -> None:
    """Drop this process's cached acceptance of a workspace's token (revoked or replaced)."""
    _accepted_tokens.pop(workspace_id, None)


def heartbeats_store(*, batch: list[tuple], now: datetime) -> Counter:
    """Store heartbeats, ``[(workspace_id, [ParsedSample, ...]), ...]`` in arrival order, and
    fold them into their agents' activity; returns new samples per workspace id. Samples
    not newer than the agent's last one, over CLOCK_SKEW_SECONDS ahead of ``now``, or for a
    revoked or deleted workspace are dropped. Three queries whatever the batch size: lock the
    agents, insert the samples, update the agents."""
    stored: Counter = Counter({workspace_id: 0 for workspace_id, _ in batch})
    with transaction.atomic():
        agents = _locked_agents({workspace_id for workspace_id, _ in batch})
        rows, changed = [], {}
        for workspace_id, samples in batch:
            agent = agents.get(workspace_id)
            fresh = _fresh(agent, samples, now) if agent else []
            if fresh:
                _fold(agent, fresh)
                rows += [_row(workspace_id, s) for s in fresh]
                changed[workspace_id] = agent
                stored[workspace_id] += len(fresh)
        TelemetrySample.objects.bulk_create(rows)
        _update_agents(changed)
    return stored


def _update_agents(changed: dict) -> None:
    """One UPDATE per agent, sent with executemany: psycopg pipelines them, where Django's
    bulk_update would build a CASE per column and row (a millisecond per agent)."""
    fields = [WorkspaceAgent._meta.get_field(name) for name in _ACTIVITY + _LATEST]
    sets = ", ".join(f"{connection.ops.quote_name(f.column)} = %s" for f in fields)
    table = connection.ops.quote_name(WorkspaceAgent._meta.db_table)
    pk = WorkspaceAgent._meta.pk
    params = [
        [f.get_db_prep_save(agent[f.name], connection) for f in fields]
        + [pk.get_db_prep_value(workspace_id, connection)]
        for workspace_id, agent in changed.items()
    ]
    if params:
        with connection.cursor() as cursor:
            cursor.executemany(f"UPDATE {table} SET {sets} WHERE {pk.column} = %s", params)


def _locked_agents(workspace_ids) -> dict:
    rows = (
        WorkspaceAgent.objects.select_for_update(of=("self",))
        .filter(pk__in=workspace_ids, revoked_at=None)
        .exclude(workspace__status__in=GONE)
        .order_by("pk")  # one lock order, so two flushing processes never deadlock
        .values("pk", *_ACTIVITY, f"{_POLICY}gpu_threshold")
    )
    return {row["pk"]: row for row in rows}


def _fresh(agent: dict, samples: list[ParsedSample], now: datetime) -> list[ParsedSample]:
    last_at = agent["last_at"]
    return [
        s
        for s in samples
        if (last_at is None or s.at > last_at)
        and (s.at - now).total_seconds() <= CLOCK_SKEW_SECONDS
    ]


def _fold(agent: dict, fresh: list[ParsedSample]) -> None:
    """Fold into ``agent`` in place, so a later heartbeat of the same batch builds on it."""
    samples = (idle.Sample(s.at, s.gpu_util, s.interactive) for s in fresh)
    activity = idle.fold(idle.activity_of(agent), samples, _policy(agent))
    latest = fresh[-1]
    agent.update(
        last_at=activity.last_at,
        evidence_since=activity.evidence_since,
        busy_since=activity.busy_since,
        active_at=activity.active_at,
        nvml=latest.nvml,
        gpus=latest.gpus,
        interactive=latest.interactive,
        cpu_percent=latest.cpu_percent,
    )


def _policy(agent: dict) -> idle.Policy:
    """Folding needs only the threshold and the spike and gap windows of the policy."""
    from teams.models import IdlePolicy

    row = IdlePolicy()
    if agent[f"{_POLICY}gpu_threshold"] is not None:
        row.gpu_threshold = agent[f"{_POLICY}gpu_threshold"]
    return policy_from_row(row)


def _row(workspace_id, s: ParsedSample) -> TelemetrySample:
    return TelemetrySample(
        workspace_id=workspace_id,
        at=s.at,
        gpu_util=s.gpu_util,
        gpu_mem_used_mib=s.gpu_mem_used_mib,
        interactive=s.interactive,
        cpu_percent=s.cpu_percent,
    )


class HeartbeatBuffer:
    """Heartbeats taken but not yet stored, in this process. ``add`` is thread-safe and
    starts the flushing thread on first use (after any fork, so each gunicorn worker has its
    own); ``flush`` stores what is queued and, should storing fail, queues it again."""

    def __init__(self, *, flush_thread: bool = True):
        self._lock = threading.Lock()
        self._items: list[tuple] = []
        self._thread_pid = None if flush_thread else "never"

    def add(self, workspace_id, samples) -> bool:
        """Queue a heartbeat; False when HEARTBEAT_BUFFER_MAX heartbeats are waiting."""
        with self._lock:
            if len(self._items) >= settings.HEARTBEAT_BUFFER_MAX:
                return False
            self._items.append((workspace_id, samples))
            if self._thread_pid not in (os.getpid(), "never"):
                self._thread_pid = os.getpid()
                threading.Thread(target=self._run, name="heartbeat-flush", daemon=True).start()
        return True

    def pending(self) -> int:
        return len(self._items)

    def flush(self) -> int:
        """Store what is queued; returns how many heartbeats were taken from the queue."""
        with self._lock:
            items, self._items = self._items, []
        if not items:
            return 0
        try:
            heartbeats_store(batch=items, now=timezone.now())
        except Exception:
            logger.exception("Storing %d heartbeats failed; they stay queued.", len(items))
            with self._lock:
                room = settings.HEARTBEAT_BUFFER_MAX - len(self._items)
                self._items[:0] = items[-room:] if room > 0 else []
        return len(items)

    def _run(self) -> None:
        while True:
            time.sleep(max(settings.HEARTBEAT_FLUSH_SECONDS, 0.05))
            if self.flush():
                close_old_connections()  # drops a broken or aged connection, as requests do
            else:
                connection.close()  # an idle web process holds no database connection


BUFFER = HeartbeatBuffer()
atexit.register(BUFFER.flush)  # a graceful gunicorn or runserver exit stores what is queued
