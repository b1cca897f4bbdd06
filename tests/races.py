"""Run calls at the same instant from many threads, each with its own database session.

Every thread opens its connection *before* the barrier, so the race itself starts with
all sessions open; a thread that meets PostgreSQL's "too many clients already" (another
xdist worker's processes, or the previous trial's backends still exiting) waits for room
instead of dropping out of the race.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import OperationalError, connection, connections

T = TypeVar("T")


def _connect_when_room(deadline: float) -> None:
    while True:
        try:
            connection.ensure_connection()
            return
        except OperationalError as exc:
            if "too many clients" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def race(calls: list[Callable[[], T]], *, timeout: float = 120.0) -> list[T]:
    """Run ``calls`` together; returns the results of those that returned, in finish order.

    Raises AssertionError when a thread failed to reach the start line (its error
    is in the message), so a missing result never reads as a lost race."""
    barrier = threading.Barrier(len(calls))
    results: list[T] = []
    errors: list[BaseException] = []
    deadline = time.monotonic() + timeout / 2

    def one(call: Callable[[], T]) -> None:
        try:
            try:
                _connect_when_room(deadline)
            except BaseException as exc:
                errors.append(exc)
                barrier.abort()
                return
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                return  # another racer could not start; reported below
            results.append(call())
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one, args=(c,)) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not errors, f"{len(errors)} racers never started: {errors[0]!r}"
    return results
