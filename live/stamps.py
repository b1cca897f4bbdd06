"""Change stamps: one cache key per topic, rewritten with a fresh value on every change.

A topic is a short string: ``ws:<uuid>`` (one workspace), ``team:<id>``, ``user:<id>`` (that
user's notices and own workspaces), ``workspaces`` (any workspace: the platform admin's
list) and ``approvals``. Stamps live in the shared Django cache (Redis in production, files
in the embedded default) so that every web process sees the worker's and beat's changes.

Besides the topic's own key, every bump rewrites one generation key: a stream reads only
that key each second and reads the topics' stamps only when it moved, so idle pages cost one
cache read per process per second whatever their number.
"""

import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from django.core.cache import cache
from django.db import transaction

log = logging.getLogger(__name__)

PREFIX = "live:"
GENERATION = "live:generation"
# Seconds a stamp is kept: one that expired reads as changed once (a harmless refresh).
STAMP_SECONDS = 7 * 24 * 3600


def topic(kind: str, key: object = None) -> str:
    """``topic("ws", uuid)`` -> "ws:<uuid>"; ``topic("approvals")`` -> "approvals"."""
    return kind if key is None else f"{kind}:{key}"


class AfterCommit:
    """A live bump waiting for its transaction to commit: ``run(*args)`` then. A class, not a
    lambda, so that a test counting on_commit callbacks can tell these from other work."""

    def __init__(self, run: Callable[..., object], *args: Any) -> None:
        self.run, self.args = run, args

    def __call__(self) -> None:
        self.run(*self.args)


def after_commit(run: Callable[..., object], *args: Any) -> None:
    """Call ``run(*args)`` once the current transaction commits (at once outside one), never
    on rollback; an exception it raises is logged, not raised into the committing code."""
    transaction.on_commit(AfterCommit(run, *args), robust=True)


def bump(*topics: str) -> None:
    """Mark ``topics`` changed once the current transaction commits (at once outside one);
    nothing happens on rollback. Never raises: a cache outage costs liveness, not the write."""
    wanted = {t for t in topics if t}
    if wanted:
        after_commit(bump_now, wanted)


def bump_now(topics: Iterable[str]) -> None:
    """Write fresh stamps for ``topics`` now (an on_commit callback, or after a bulk write)."""
    value = f"{time.time_ns():x}"
    try:
        cache.set_many({PREFIX + t: value for t in topics}, timeout=STAMP_SECONDS)
        # After the stamps: a reader that sees the new generation also sees the stamps.
        cache.set(GENERATION, value, timeout=None)
    except Exception:  # noqa: BLE001 (any cache backend's error; the change itself is committed)
        log.warning("live: could not bump %s", sorted(topics), exc_info=True)


def generation() -> str | None:
    """The value of the generation key (None when unset)."""
    value: str | None = cache.get(GENERATION)
    return value


def read(topics: Iterable[str]) -> dict[str, str | None]:
    """Current stamps of ``topics`` (None for one never bumped or expired)."""
    topics = list(topics)
    found = cache.get_many([PREFIX + t for t in topics])
    return {t: found.get(PREFIX + t) for t in topics}


def version(stamps: dict[str, str | None], topics: Iterable[str]) -> str:
    """A short digest of the stamps of ``topics``: equal digests mean nothing changed."""
    text = "|".join(f"{t}={stamps.get(t) or ''}" for t in sorted(topics))
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def current_version(topics: Iterable[str]) -> str:
    """``version`` of the stamps as they are now."""
    topics = list(topics)
    return version(read(topics), topics)
