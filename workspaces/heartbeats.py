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
agents keep their own buffer instead; one agent holds at most its share of the buffer. A
token revoked in another process is refused within HEARTBEAT_AUTH_CACHE_SECONDS; samples
that arrive meanwhile are dropped when stored.

Limits (docs/agent-protocol.md): a token gets 429 with Retry-After beyond HEARTBEAT_BURST
heartbeats at once, then two per AGENT_INTERVAL_SECONDS (workspaces.ratelimit, per process);
samples closer than half an interval to the one before are folded away, here and in the
database; an address that sent HEARTBEAT_BAD_TOKENS_PER_MINUTE wrong tokens gets 429 before
any database lookup, but never for a token this process has accepted.

Poison: a batch the database refuses is split in halves, each stored in its own transaction,
down to the one heartbeat that fails; that one is dropped and logged, so it never holds back
other workspaces' heartbeats. Only a failure of the database itself (OperationalError,
InterfaceError: unreachable, locked, shutting down) keeps the whole batch queued.

The portal's own failures are not the agents' silence: a dropped heartbeat sets its agent's
``store_failed_at``, and a batch kept queued because the database failed notes the time in
Django's cache (telemetry_outage_record; Redis in production, shared by web and workers), so
the idle sweep counts no silence before either (workspaces.idle.verdict).
"""

from __future__ import annotations

import atexit
import hmac
import logging
import math
import os
import threading
import time
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.core.cache import cache
from django.db import (
    InterfaceError,
    OperationalError,
    close_old_connections,
    connection,
    transaction,
)
from django.utils import timezone

from common import metrics
from teams.models import IdlePolicy
from workspaces import idle, ratelimit
from workspaces.gpu_evidence import Batch, gpu_readings_merge
from workspaces.live_topics import telemetry_changed
from workspaces.models import TelemetrySample, WorkspaceAgent
from workspaces.states import Status
from workspaces.telemetry import (
    GONE,
    HeartbeatRefused,
    ParsedSample,
    _sha256,
    heartbeat_parse,
    policy_from_row,
)

# An agent's row as _locked_agents reads it (values()), folded in place by _fold.
Agent = dict[str, Any]
logger = logging.getLogger(__name__)

CLOCK_SKEW_SECONDS = 300  # samples further ahead of the portal's clock are dropped
# Older samples are dropped: the agent buffers a day (2,880 samples at 30 s); an hour more
# for its clock and the time it takes to send the backlog.
MAX_SAMPLE_AGE = timedelta(hours=25)
_POLICY = "workspace__team__idle_policy__"
_ACTIVITY = ("last_at", "evidence_since", "busy_since", "active_at")
_LATEST = (
    "nvml",
    "gpus",
    "interactive",
    "cpu_percent",
    "driver",
    "setup",
    "setup_log",
    "jupyter",
)
# Failures of the database itself, after which a batch is kept to be stored again; any other
# error storing a batch is taken to come from its data.
_DATABASE_DOWN = (OperationalError, InterfaceError)
BUSY = "The portal is behind on storing telemetry; retry later."


def heartbeat_ingest(
    *, workspace_id: UUID, token: str, body: bytes, now: datetime, client: str = ""
) -> int:
    """Take one heartbeat from address ``client``; returns how many samples were taken:
    those stored as new when storing in the request, else all of the heartbeat's in its time
    window and interval (duplicates are dropped when stored). Raises HeartbeatRefused: 401
    wrong token, 410 revoked or deleted, 400 bad payload, 429 too many requests (with
    retry_after, seconds), 503 buffer full or the database failing. Counted in
    common.metrics (portal_heartbeats_total, portal_heartbeat_samples_total)."""
    try:
        taken = _ingest(workspace_id, token, body, now, client)
    except HeartbeatRefused as refused:
        metrics.HEARTBEATS.labels("busy" if refused.status == 503 else "refused").inc()
        raise
    metrics.HEARTBEATS.labels("taken").inc()
    metrics.HEARTBEAT_SAMPLES.inc(taken)
    return taken


def _ingest(workspace_id: UUID, token: str, body: bytes, now: datetime, client: str) -> int:
    heartbeat_authenticate(workspace_id=workspace_id, token=token, now=now, client=client)
    interval = settings.AGENT_INTERVAL_SECONDS
    _throttle(workspace_id, now, interval)
    samples = _spaced(_in_window(heartbeat_parse(body), now), last=None, interval=interval)
    if not samples:
        return 0
    if settings.HEARTBEAT_FLUSH_SECONDS <= 0:
        stored, unstored = heartbeats_store_isolated(batch=[(workspace_id, samples)], now=now)
        if unstored:
            raise HeartbeatRefused(503, BUSY, retry_after=5)
        return stored[workspace_id]
    refused = BUFFER.add(workspace_id, samples)
    if refused == FULL:
        telemetry_outage_record(now=now)  # the portal falls behind: no agent's silence
    if refused:
        raise HeartbeatRefused(503, BUSY, retry_after=5)
    return len(samples)


_requests = ratelimit.TokenBuckets()  # workspace id -> its agent's heartbeats
TOO_MANY = "More heartbeats than the agent's interval allows; retry after Retry-After seconds."
_bad_tokens = ratelimit.TokenBuckets()  # client address -> wrong tokens it sent


def _throttle(workspace_id: UUID, now: datetime, interval: float) -> None:
    """429 when this workspace's agent sent more heartbeats than one does: HEARTBEAT_BURST
    at once (its backlog after an outage), then two per ``interval`` (seconds)."""
    wait = _requests.take(
        workspace_id, now=now.timestamp(), capacity=settings.HEARTBEAT_BURST, rate=2 / interval
    )
    if wait:
        raise HeartbeatRefused(429, TOO_MANY, retry_after=math.ceil(wait))


def _spaced(
    samples: list[ParsedSample], last: datetime | None, interval: float
) -> list[ParsedSample]:
    """The samples (oldest first) at least half an agent ``interval`` (seconds) after the
    one kept before (and after ``last``): an agent samples once per interval, so the rest
    are folded away."""
    gap = timedelta(seconds=interval / 2)
    kept = []
    for sample in samples:
        if last is None or (sample.at > last and sample.at - last >= gap):
            kept.append(sample)
            last = sample.at
    return kept


def _in_window(samples: list[ParsedSample], now: datetime) -> list[ParsedSample]:
    """The samples neither older than MAX_SAMPLE_AGE nor CLOCK_SKEW_SECONDS ahead of ``now``."""
    oldest, latest = now - MAX_SAMPLE_AGE, now + timedelta(seconds=CLOCK_SKEW_SECONDS)
    return [s for s in samples if oldest <= s.at <= latest]


# workspace id -> (token SHA-256, cached until); only tokens that were accepted.
_accepted_tokens: dict[UUID, tuple[str, datetime]] = {}


def heartbeat_authenticate(
    *, workspace_id: UUID, token: str, now: datetime, client: str = ""
) -> None:
    """Check the Bearer token of a workspace's agent; raises HeartbeatRefused 401 (unknown
    workspace or wrong token), 410 (revoked or deleted) or 429 (``client``, an address, sent
    over HEARTBEAT_BAD_TOKENS_PER_MINUTE wrong tokens; the database is not asked). One
    query, none while cached; a token this process accepted before is never throttled."""
    digest = _sha256(token)
    cached = _accepted_tokens.get(workspace_id)
    known = cached is not None and hmac.compare_digest(cached[0], digest)
    if known and cached is not None and cached[1] > now:
        return
    if not known:
        _bad_token_wait(client, now)
    row = (
        WorkspaceAgent.objects.filter(pk=workspace_id)
        .values_list("token_sha256", "revoked_at", "workspace__status")
        .first()
    )
    if row is None or not hmac.compare_digest(digest, row[0]):
        _bad_tokens.take(client, now=now.timestamp(), **_bad_token_bucket())
        raise HeartbeatRefused(401, "Unknown workspace or wrong token.")
    if row[1] is not None or row[2] in GONE:
        _accepted_tokens.pop(workspace_id, None)
        raise HeartbeatRefused(410, "The workspace is deleted; stop sending.")
    if len(_accepted_tokens) > 100_000:  # bounded: a forgotten entry costs one query
        _accepted_tokens.clear()
    ttl = timedelta(seconds=settings.HEARTBEAT_AUTH_CACHE_SECONDS)
    _accepted_tokens[workspace_id] = (digest, now + ttl)


def _bad_token_bucket() -> dict[str, float]:
    per_minute = settings.HEARTBEAT_BAD_TOKENS_PER_MINUTE
    return {"capacity": per_minute, "rate": per_minute / 60}


def _bad_token_wait(client: str, now: datetime) -> None:
    wait = _bad_tokens.wait(client, now=now.timestamp(), **_bad_token_bucket())
    if wait:
        raise HeartbeatRefused(
            429, "Too many wrong tokens from this address.", retry_after=math.ceil(wait)
        )


def heartbeat_forget_token(*, workspace_id: UUID) -> None:
    """Drop this process's cached acceptance of a workspace's token (revoked or replaced)."""
    _accepted_tokens.pop(workspace_id, None)


def heartbeats_store(*, batch: Batch, now: datetime) -> Counter[Any]:
    """Store heartbeats, ``[(workspace_id, [ParsedSample, ...]), ...]`` in arrival order, and
    fold them into their agents' activity, with the GPU readings the portal took itself
    merged in (workspaces.gpu_evidence); returns new samples per workspace id. Samples
    not newer than the agent's last one, over CLOCK_SKEW_SECONDS ahead of ``now``, or for a
    revoked or deleted workspace are dropped. Three queries whatever the batch size: lock the
    agents, insert the samples, update the agents."""
    stored: Counter[Any] = Counter({workspace_id: 0 for workspace_id, _ in batch})
    batch = gpu_readings_merge(batch=batch)  # DCGM's GPU use of MIG slices (gpu_evidence)
    with transaction.atomic():
        agents = _locked_agents({workspace_id for workspace_id, _ in batch})
        rows: list[TelemetrySample] = []
        changed: dict[Any, Agent] = {}
        for workspace_id, samples in batch:
            agent = agents.get(workspace_id)
            fresh = _fresh(agent, samples, now) if agent else []
            if agent and fresh:
                _fold(agent, fresh)
                rows += [_row(workspace_id, s) for s in fresh]
                changed[workspace_id] = agent
                stored[workspace_id] += len(fresh)
        TelemetrySample.objects.bulk_create(rows)
        _update_agents(changed)
        telemetry_changed(changed)
    return stored


def heartbeats_store_isolated(*, batch: Batch, now: datetime) -> tuple[Counter[Any], Batch]:
    """heartbeats_store for a batch that may hold a heartbeat the database refuses: returns
    (new samples per workspace id, the heartbeats left unstored because the database itself
    failed, to be stored again). A failing batch is split in halves, each stored in its own
    transaction, so a heartbeat that fails alone is dropped, logged and noted on its agent
    (store_failed_at) while the others are stored. Never raises for storing."""
    try:
        return heartbeats_store(batch=batch, now=now), []
    except _DATABASE_DOWN:
        logger.warning("Storing %d heartbeats failed; the database failed.", len(batch))
        telemetry_outage_record(now=now)
        return Counter(), batch
    except Exception:
        if len(batch) > 1:
            half = len(batch) // 2
            first = heartbeats_store_isolated(batch=batch[:half], now=now)
            second = heartbeats_store_isolated(batch=batch[half:], now=now)
            return first[0] + second[0], first[1] + second[1]
        workspace_id, samples = batch[0]
        logger.exception(
            "Dropped a heartbeat of workspace %s (%d samples): the database refused it.",
            workspace_id,
            len(samples),
        )
        _store_failed(workspace_id, now)
        return Counter(), []


def _store_failed(workspace_id: UUID, now: datetime) -> None:
    """Note on the agent that the portal failed to store one of its heartbeats at ``now``."""
    try:
        WorkspaceAgent.objects.filter(pk=workspace_id).update(store_failed_at=now)
    except Exception:
        logger.exception("Noting the failure on workspace %s failed too.", workspace_id)
        telemetry_outage_record(now=now)  # then it counts for everyone


OUTAGE_KEY = "heartbeats:store-failed-at"
# Longer than any policy's minutes without telemetry. Measured from the caller's ``now`` when
# read, not by the cache's expiry: that runs on the cache's own clock, and an outage noted at a
# ``now`` other than the cache's (a replayed backlog, a test) would expire early or late.
_OUTAGE_WINDOW = timedelta(days=7)
_outage_noted: list[datetime | None] = [None]  # when this process last wrote OUTAGE_KEY


def telemetry_outage_record(*, now: datetime) -> None:
    """Note, for the idle sweep of every process, that storing telemetry failed at ``now``
    for a reason of the portal's own (the database failed, the buffer was full). Written to
    Django's cache at most once a second per process; never raises (a cache that fails is
    logged: the sweep then holds silent stops itself, see telemetry_outage_last)."""
    noted = _outage_noted[0]
    if noted is not None and timedelta(0) <= now - noted < timedelta(seconds=1):
        return
    _outage_noted[0] = now
    try:
        cache.set(OUTAGE_KEY, now, None)  # one key, overwritten; its age is checked on read
    except Exception:
        logger.exception("Noting that storing telemetry failed in the cache failed.")


def telemetry_outage_last(*, now: datetime) -> datetime | None:
    """When some process last failed to store telemetry for a reason of the portal's own,
    None if not within the last week. ``now`` when the cache cannot be read: nobody can tell
    then, so the sweep holds off silent stops rather than blame the agents."""
    try:
        at: datetime | None = cache.get(OUTAGE_KEY)
    except Exception:
        logger.exception("Reading when storing telemetry last failed failed; assuming now.")
        return now
    return at if at is not None and now - at < _OUTAGE_WINDOW else None


def heartbeat_limits_reset() -> None:
    """Forget what this process remembers of past heartbeats' limits and failures."""
    _outage_noted[0] = None
    _requests.clear()
    _bad_tokens.clear()


def _update_agents(changed: dict[Any, Agent]) -> None:
    """One UPDATE per agent, sent with executemany: psycopg pipelines them, where Django's
    bulk_update would build a CASE per column and row (a millisecond per agent)."""
    names = set(_ACTIVITY + _LATEST)
    fields = [f for f in WorkspaceAgent._meta.concrete_fields if f.name in names]
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


def _locked_agents(workspace_ids: Iterable[Any]) -> dict[Any, Agent]:
    rows = (
        WorkspaceAgent.objects.select_for_update(of=("self",))
        .filter(pk__in=workspace_ids, revoked_at=None)
        .exclude(workspace__status__in=GONE)
        .order_by("pk")  # one lock order, so two flushing processes never deadlock
        .values("pk", *_ACTIVITY, f"{_POLICY}gpu_threshold")
    )
    return {row["pk"]: row for row in rows}


def agent_reading_forget_on_resize(
    *, workspace_id: UUID | str, expected: str, to: str, now: datetime
) -> None:
    """A transition callback (workspaces.hooks): a workspace leaving Resizing has other GPUs,
    so its agent's latest reading (the GPUs it listed, NVML's state) is of hardware it no
    longer has; it is forgotten, and the page waits for the first reading of the new size.
    The idle evidence (last_at and the folded activity) is kept: the silence rule holds."""
    if expected == Status.RESIZING:
        WorkspaceAgent.objects.filter(pk=UUID(str(workspace_id))).update(gpus=[], nvml="")


def _fresh(agent: Agent, samples: list[ParsedSample], now: datetime) -> list[ParsedSample]:
    """The samples newer than the agent's last by half an interval at least (_spaced), and
    not over CLOCK_SKEW_SECONDS ahead of ``now``: however many heartbeats one token sends,
    a workspace gets at most one sample row per half interval of time."""
    latest = now + timedelta(seconds=CLOCK_SKEW_SECONDS)
    fresh = [s for s in samples if s.at <= latest]
    return _spaced(fresh, last=agent["last_at"], interval=settings.AGENT_INTERVAL_SECONDS)


def _fold(agent: Agent, fresh: list[ParsedSample]) -> None:
    """Fold into ``agent`` in place, so a later heartbeat of the same batch builds on it."""
    samples = (idle.Sample(s.at, s.gpu_util, s.interactive, s.user_active_at) for s in fresh)
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
        driver=latest.driver,
        setup=latest.setup,
        setup_log=list(latest.setup_log),
        jupyter=latest.jupyter,
    )


def _policy(agent: Agent) -> idle.Policy:
    """Folding needs only the threshold and the spike and gap windows of the policy."""
    row = IdlePolicy()
    if agent[f"{_POLICY}gpu_threshold"] is not None:
        row.gpu_threshold = agent[f"{_POLICY}gpu_threshold"]
    return policy_from_row(row)


def _row(workspace_id: Any, s: ParsedSample) -> TelemetrySample:
    return TelemetrySample(
        workspace_id=workspace_id,
        at=s.at,
        gpu_util=s.gpu_util,
        gpu_mem_used_mib=s.gpu_mem_used_mib,
        interactive=s.interactive,
        cpu_percent=s.cpu_percent,
        gpu_mem_max_mib=s.gpu_mem_max_mib,
        gpu_mem_total_mib=s.gpu_mem_total_mib,
        gpus_in_use=s.gpus_in_use,
    )


QUEUED, FULL, SHARE_FULL = "", "full", "share full"


class HeartbeatBuffer:
    """Heartbeats taken but not yet stored, in this process. ``add`` is thread-safe and
    starts the flushing thread on first use (after any fork, so each gunicorn worker has its
    own); ``flush`` stores what is queued (heartbeats_store_isolated) and queues again what
    the database failed to take."""

    def __init__(self, *, flush_thread: bool = True):
        self._lock = threading.Lock()
        self._flushing = threading.Lock()  # one flush at a time: exit waits for the thread's
        self._items: Batch = []
        self._pending: Counter[Any] = Counter()  # workspace id -> its heartbeats in _items
        self._thread_pid: int | str | None = None if flush_thread else "never"
        self._since: float | None = None  # Unix time the oldest queued heartbeat was taken

    def add(self, workspace_id: Any, samples: list[ParsedSample]) -> str:
        """Queue a heartbeat; QUEUED (empty), FULL when HEARTBEAT_BUFFER_MAX heartbeats wait,
        or SHARE_FULL when this workspace's agent already has its share waiting."""
        most, share = settings.HEARTBEAT_BUFFER_MAX, _share()
        with self._lock:
            if len(self._items) >= most:
                return FULL
            if self._pending[workspace_id] >= share:
                return SHARE_FULL
            self._items.append((workspace_id, samples))
            self._pending[workspace_id] += 1
            if self._since is None:
                self._since = time.time()
            self._publish()
            if self._thread_pid not in (os.getpid(), "never"):
                self._thread_pid = os.getpid()
                threading.Thread(target=self._run, name="heartbeat-flush", daemon=True).start()
        return QUEUED

    def pending(self) -> int:
        return len(self._items)

    def flush(self) -> int:
        """Store what is queued; returns how many heartbeats were taken from the queue."""
        with self._flushing:
            with self._lock:
                items, self._items = self._items, []
                self._pending.clear()
                since, self._since = self._since, None
            unstored: Batch = []
            if items:
                _, unstored = heartbeats_store_isolated(batch=items, now=timezone.now())
            self._queue_again(unstored, since)
        return len(items)

    def _publish(self) -> None:
        """Tell /metrics how many wait here and since when (called holding the lock)."""
        metrics.heartbeat_buffer_state(pending=len(self._items), oldest=self._since)

    def _queue_again(self, items: Batch, since: float | None) -> None:
        """Put ``items`` (the oldest taken at ``since``) back in front of what came meanwhile,
        as far as there is room."""
        with self._lock:
            if items and since is not None:
                self._since = min(since, self._since or since)
            elif not self._items:
                self._since = None
            room = max(settings.HEARTBEAT_BUFFER_MAX - len(self._items), 0)
            kept = items[len(items) - room :] if room < len(items) else items
            if len(kept) < len(items):
                logger.error(
                    "The heartbeat buffer is full: %d heartbeats lost.", len(items) - len(kept)
                )
            self._items[:0] = kept
            self._pending.update(workspace_id for workspace_id, _ in kept)
            self._publish()

    def _run(self) -> None:
        while True:
            time.sleep(max(settings.HEARTBEAT_FLUSH_SECONDS, 0.05))
            if self.flush():
                close_old_connections()  # drops a broken or aged connection, as requests do
            else:
                connection.close()  # an idle web process holds no database connection


def _share() -> int:
    """Heartbeats one agent may have waiting: a backlog's worth (HEARTBEAT_BURST), and never
    more than a tenth of the buffer, so no one agent can fill it for the others."""
    return max(1, min(int(settings.HEARTBEAT_BURST), int(settings.HEARTBEAT_BUFFER_MAX) // 10))


BUFFER = HeartbeatBuffer()
atexit.register(BUFFER.flush)  # a graceful gunicorn or runserver exit stores what is queued
