"""Whether a session on an apps host may go on, as the app proxy (apps_proxy.asgi) asks it at
each request and while a WebSocket is open; and the database thread it asks in.

A yes is kept ROUTE_CACHE_SECONDS, and trusted only while the workspace's stamp
(apps_proxy.services.app_stamp: its status, its owner, and a counter that revoking admins'
access or stopping or changing a share bumps) is the one it was decided under: one read by
primary key per request, so a revoked grant, a stopped share or a stopped workspace is refused
at the next request. A no is never kept. The open WebSockets' stamps are read every
WS_RECHECK_SECONDS, all in one query (watch), and a socket is closed with 1008 once its
session no longer opens the app.
"""

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connections
from django.utils import timezone

from apps_proxy import hosts, services

log = logging.getLogger("apps_proxy")
T = TypeVar("T")
ROUTE_CACHE_SECONDS = 5.0
WS_RECHECK_SECONDS = 2.0  # The open WebSockets' stamps are read again this often.
WS_FULL_CHECK = 60.0  # Seconds: an open WebSocket's session is checked in full at least this often.
# (session, host label) -> (monotonic time it is kept until, the stamp it was decided under, the
# route): positive answers only (route_of).
_routes: dict[tuple[str, str], tuple[float, services.Stamp | None, services.Route]] = {}


async def route_of(session: str, app: hosts.AppHost) -> services.Route | None:
    """The session's route on this host, or None. A yes is kept ROUTE_CACHE_SECONDS, and
    trusted only while the workspace's stamp is the one it was decided under (one read by
    primary key): a revoked grant, a stopped share or workspace is refused at the next
    request. A no is never kept: the next request asks again."""
    key, now = (session, app.label), time.monotonic()
    cached = _routes.get(key)

    def look() -> tuple[services.Stamp | None, services.Route | None, bool]:
        close_old_connections()  # A thread of the pool keeps its connection: check it lives.
        # The stamp first: a change after it makes the next request's stamp differ.
        stamp = services.app_stamp(workspace_id=app.workspace_id)
        if cached is not None and cached[0] > now and cached[1] == stamp:
            return stamp, cached[2], True
        route = services.app_session_route(session=session, app=app, now=timezone.now())
        return stamp, route, False

    stamp, route, kept = await database(look)
    if kept:
        return route
    if route is None or stamp is None:
        _routes.pop(key, None)
        return None
    if len(_routes) > 10_000:
        _routes.clear()
    _routes[key] = (now + ROUTE_CACHE_SECONDS, stamp, route)
    return route


async def database(work: Callable[[], T]) -> T:
    """Run ORM work in Django's one thread for it (asgiref's thread-sensitive executor), as
    Django's own ASGI handler does: one connection, which close_database() closes."""
    return await sync_to_async(work, thread_sensitive=True)()


async def close_database() -> None:
    await sync_to_async(connections.close_all, thread_sensitive=True)()


@dataclass(eq=False)
class _Open:
    """An open WebSocket: its session, its app, the workspace's side, and what its last full
    check saw (the stamp, and when, on the monotonic clock)."""

    session: str
    app: hosts.AppHost
    remote: Any
    ended: asyncio.Event
    stamp: services.Stamp | None
    checked_at: float


# Per event loop (one per process under uvicorn): its open WebSockets, and the task that
# checks them (kept here: the event loop holds only a weak reference to a task).
_open: dict[asyncio.AbstractEventLoop, tuple[set[_Open], asyncio.Task[None]]] = {}


async def watch(session: str, app: hosts.AppHost, remote: Any, ended: asyncio.Event) -> None:
    """Watch an open WebSocket until cancelled: once its session no longer opens the app, set
    ``ended`` and close the workspace's side (the proxy then closes the browser's with 1008).
    One task per process checks them all (_sweep)."""
    cached = _routes.get((session, app.label))
    opened = _Open(session, app, remote, ended, cached[1] if cached else None, time.monotonic())
    loop = asyncio.get_running_loop()
    if loop not in _open:
        sockets: set[_Open] = set()
        _open[loop] = (sockets, loop.create_task(_sweep(sockets)))
    _open[loop][0].add(opened)
    try:
        await ended.wait()
    finally:
        _open[loop][0].discard(opened)


async def _sweep(watched: set[_Open]) -> None:
    """Every WS_RECHECK_SECONDS, the stamps of the open WebSockets' workspaces in one query; a
    socket whose stamp changed, or not fully checked for WS_FULL_CHECK_SECONDS (a user
    deactivated, a teammate gone), is checked again (route_of), and ended once refused. A
    database error is logged and the sweep goes on."""
    while True:
        await asyncio.sleep(WS_RECHECK_SECONDS)
        sockets = list(watched)
        if not sockets:
            continue
        try:
            ids = {s.app.workspace_id for s in sockets}
            stamps = await database(functools.partial(_stamps, ids))
            for socket in sockets:
                await _recheck(socket, stamps.get(socket.app.workspace_id))
        except Exception:  # A failing check must not end the connections, nor go unseen.
            log.exception("checking the open WebSockets' sessions failed")


def _stamps(workspace_ids: set[UUID]) -> dict[UUID, services.Stamp]:
    close_old_connections()  # A thread of the pool keeps its connection: check it lives.
    return services.app_stamps(workspace_ids=workspace_ids)


async def _recheck(socket: _Open, stamp: services.Stamp | None) -> None:
    now = time.monotonic()
    if stamp is not None and stamp == socket.stamp and now - socket.checked_at < WS_FULL_CHECK:
        return
    if await route_of(socket.session, socket.app) is None:
        socket.ended.set()
        await socket.remote.close(1008, "Access ended.")
        return
    socket.stamp, socket.checked_at = stamp, now
