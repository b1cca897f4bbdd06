"""Token buckets kept in one process's memory, for the heartbeat endpoint's limits.

Heartbeats are answered in front of Django's middleware for speed (workspaces.api; 2,000 a
second is the floor), so their limits must cost next to nothing: a dict lookup under a lock,
no cache or database round trip. The price is that each web process keeps its own buckets:
with N processes an agent may send up to N times the limit. That is fine for what they are
for, keeping one token or one address from flooding a process; what an agent can make the
portal store is bounded per workspace in the database (workspaces.heartbeats).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable


class TokenBuckets:
    """One token bucket per key: holding at most ``capacity`` tokens, gaining ``rate`` per
    second; a key not seen yet has a full one. Thread-safe. At most ``max_keys`` keys are
    remembered: beyond that, full buckets are forgotten (they hold nothing a fresh one does
    not), and if that is not enough, all of them. Times are seconds on any one clock."""

    def __init__(self, *, max_keys: int = 100_000):
        self._lock = threading.Lock()
        self._buckets: dict[Hashable, tuple[float, float]] = {}  # key -> (tokens, at)
        self._max_keys = max_keys

    def take(self, key: Hashable, *, now: float, capacity: float, rate: float) -> float:
        """Take a token from ``key``'s bucket: 0.0 when taken, else the seconds until one
        will be there (and nothing is taken)."""
        with self._lock:
            tokens = self._level(key, now, capacity, rate)
            if tokens >= 1:
                self._buckets[key] = (tokens - 1, now)
                if len(self._buckets) > self._max_keys:
                    self._forget_full(now, capacity, rate)
                return 0.0
            self._buckets[key] = (tokens, now)
        return (1 - tokens) / rate

    def wait(self, key: Hashable, *, now: float, capacity: float, rate: float) -> float:
        """Seconds until ``key``'s bucket has a token, 0.0 when it has one; takes nothing."""
        with self._lock:
            tokens = self._level(key, now, capacity, rate)
        return 0.0 if tokens >= 1 else (1 - tokens) / rate

    def clear(self) -> None:
        with self._lock:
            self._buckets.clear()

    def _level(self, key: Hashable, now: float, capacity: float, rate: float) -> float:
        tokens, at = self._buckets.get(key, (capacity, now))
        # A clock that went back refills nothing rather than a negative amount.
        return min(capacity, tokens + max(now - at, 0.0) * rate)

    def _forget_full(self, now: float, capacity: float, rate: float) -> None:
        full = [
            k for k, (tokens, at) in self._buckets.items() if tokens + (now - at) * rate >= capacity
        ]
        for key in full:
            del self._buckets[key]
        if len(self._buckets) > self._max_keys:
            self._buckets.clear()
