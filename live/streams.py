"""Server-sent event streams of topic changes.

Under ASGI (the Procfile's uvicorn workers) one ``Hub`` per process reads the generation key
once per TICK; only when it moved does it read the subscribed stamps (one ``get_many``) and
wake the streams whose topics changed. An idle stream costs nothing but a keep-alive comment
every KEEPALIVE seconds. Under WSGI (``manage.py runserver``, the tests' live server) each
stream polls the cache itself in its own thread, and lasts WSGI_LIFETIME seconds so it never
holds a thread for long; EventSource reconnects by itself after ``retry``.

Events: ``event: change`` with ``id`` and ``data`` the topics' version (live.stamps.version);
the browser sends the last id back as Last-Event-ID when it reconnects, so a change made while
it was away is told at once.

A stream ends early, with ``event: end``, when the stamp of its ``ends_on`` topic moves: the
view passes ``session:<user id>``, which teams bumps when it deactivates the user (the Graph
sync), so an open page stops hearing of changes at once rather than at the stream's
lifetime; its reconnect is refused (403) as the session is gone.
"""

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor

from django.db import connections

from live import stamps

TICK = 1.0  # seconds between looks at the cache: the stream's share of the 5 s promise
KEEPALIVE = 20.0  # seconds: proxies and browsers close silent connections
ASGI_LIFETIME = 15 * 60.0  # seconds before a stream ends and the browser reconnects
WSGI_LIFETIME = 60.0
RETRY_MS = 2000  # what EventSource waits before reconnecting


def _event(version: str) -> bytes:
    return f"event: change\nid: {version}\ndata: {version}\n\n".encode()


END = b"event: end\ndata: session ended\n\n"


def _hello() -> bytes:
    # Opens the stream at once (some browsers wait for the first bytes) and sets the retry.
    return f"retry: {RETRY_MS}\n: live\n\n".encode()


def _stamp(topic: str | None) -> str | None:
    return stamps.read([topic])[topic] if topic else None


def sync_stream(
    topics: list[str], seen: str, lifetime: float | None = None, ends_on: str | None = None
) -> Iterator[bytes]:
    """A WSGI response body: events for ``topics`` whose version differs from ``seen``."""
    _release_database()
    ended = _stamp(ends_on)
    yield _hello()
    deadline = time.monotonic() + (WSGI_LIFETIME if lifetime is None else lifetime)
    generation, quiet_since = None, time.monotonic()
    while time.monotonic() < deadline:
        now_generation = stamps.generation()
        if now_generation != generation or generation is None:
            generation = now_generation
            if ends_on and _stamp(ends_on) != ended:
                yield END
                return
            current = stamps.current_version(topics)
            if current != seen:
                seen, quiet_since = current, time.monotonic()
                yield _event(current)
        if time.monotonic() - quiet_since > KEEPALIVE:
            quiet_since = time.monotonic()
            yield b": keep-alive\n\n"
        time.sleep(TICK)


def _release_database() -> None:
    # The stream reads only the cache: this thread's database connection (opened for the
    # session) would otherwise stay open, idle, as long as the stream.
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


class _Subscriber:
    __slots__ = ("topics", "wake")

    def __init__(self, topics: list[str]) -> None:
        self.topics = topics
        self.wake = asyncio.Event()


class Hub:
    """The per-process reader of stamps for all ASGI streams (see the module docstring)."""

    def __init__(self) -> None:
        self.subscribers: set[_Subscriber] = set()
        self.values: dict[str, str | None] = {}
        self.generation: str | None = None
        self.changed: set[str] = set()
        self.task: asyncio.Task[None] | None = None
        # One thread: Django's cache connections are per thread, so it keeps its own.
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="live-hub")

    async def stream(
        self,
        topics: list[str],
        seen: str,
        lifetime: float | None = None,
        ends_on: str | None = None,
    ) -> AsyncIterator[bytes]:
        """An ASGI response body: as ``sync_stream``, fed by the hub."""
        lifetime = ASGI_LIFETIME if lifetime is None else lifetime
        subscriber = _Subscriber([*topics, ends_on] if ends_on else topics)
        self.subscribers.add(subscriber)
        loop = asyncio.get_running_loop()
        if self.task is None or self.task.done() or self.task.get_loop() is not loop:
            # Nobody was listening: what the hub last read may be stale, so forget it.
            self.values, self.generation = {}, None
            self.task = loop.create_task(self._run())
        missing = [t for t in subscriber.topics if t not in self.values]
        if missing:
            self.values.update(await loop.run_in_executor(self.executor, stamps.read, missing))
        ended = self.values.get(ends_on) if ends_on else None
        deadline = loop.time() + lifetime
        try:
            yield _hello()
            while loop.time() < deadline:
                if ends_on and self.values.get(ends_on) != ended:
                    yield END
                    return
                current = stamps.version(self.values, topics)
                if current != seen:
                    seen = current
                    yield _event(current)
                try:
                    await asyncio.wait_for(subscriber.wake.wait(), timeout=KEEPALIVE)
                except TimeoutError:
                    yield b": keep-alive\n\n"
                subscriber.wake.clear()
        finally:
            self.subscribers.discard(subscriber)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self.subscribers:
            await asyncio.sleep(TICK)
            try:
                await loop.run_in_executor(self.executor, self._look)
            except Exception:  # noqa: BLE001 (a cache outage: try again next tick)
                continue
            self._wake_changed()

    def _look(self) -> None:
        """In the hub's thread: the generation, and the stamps when it moved."""
        generation = stamps.generation()
        if generation == self.generation:
            self.changed = set()
            return
        self.generation = generation
        wanted = {t for s in list(self.subscribers) for t in s.topics}
        fresh = stamps.read(wanted)
        self.changed = {t for t, v in fresh.items() if self.values.get(t) != v}
        self.values.update(fresh)

    def _wake_changed(self) -> None:
        """In the event loop: wake the streams of changed topics, forget unwatched ones."""
        changed = self.changed
        if not changed:
            return
        wanted = {t for s in self.subscribers for t in s.topics}
        if len(self.values) > 2 * len(wanted) + 100:
            self.values = {t: v for t, v in self.values.items() if t in wanted}
        for subscriber in self.subscribers:
            if not changed.isdisjoint(subscriber.topics):
                subscriber.wake.set()


hub = Hub()
