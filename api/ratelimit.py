"""Requests per minute per token, shared by every gunicorn worker through Django's cache
(Redis in production, the file cache in the embedded default).

A fixed window per calendar minute: the first request of a minute adds the counter (expiring
with the window), later ones increment it. Redis increments atomically, so N workers never
let more than API_RATE_PER_MINUTE through; the file cache reads and writes the file, so under
concurrent requests it may count a few short (the embedded default serves one machine).
"""

import math
import time

from django.conf import settings
from django.core.cache import cache
from ninja.errors import Throttled

WINDOW_SECONDS = 60


def rate_limit_check(*, key: str, now: float | None = None) -> None:
    """Count one request for ``key`` (e.g. "pat:17") in the current minute; raise ninja's
    Throttled (wait: whole seconds until the minute ends, for Retry-After) past
    settings.API_RATE_PER_MINUTE. ``now`` is Unix time in seconds (time.time() if None)."""
    limit = settings.API_RATE_PER_MINUTE
    if limit <= 0:
        return  # 0 turns the limit off.
    now = time.time() if now is None else now
    window = int(now // WINDOW_SECONDS)
    counter = f"api:rate:{key}:{window}"
    # The timeout outlives the window a little: a clock step between workers cannot reset it.
    if cache.add(counter, 1, timeout=WINDOW_SECONDS + 10):
        count = 1
    else:
        try:
            count = cache.incr(counter)
        except ValueError:  # Expired between add and incr: this is its first request.
            cache.add(counter, 1, timeout=WINDOW_SECONDS + 10)
            count = 1
    if count > limit:
        raise Throttled(wait=max(1, math.ceil((window + 1) * WINDOW_SECONDS - now)))
