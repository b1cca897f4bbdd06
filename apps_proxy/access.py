"""Whether a session on an apps host may go on, as the app proxy (apps_proxy.asgi) asks it at
each request and while a WebSocket is open; and the database thread it asks in.

A yes is kept ROUTE_CACHE_SECONDS, and trusted only while the workspace's stamp
(apps_proxy.services.app_stamp: its status, its owner, and a counter that revoking admins'
access or stopping or changing a share bumps) is the one it was decided under: one read by
primary key per request, so a revoked grant, a stopped share or a stopped workspace is refused
at the next request. A no is never kept. An open WebSocket is checked every
WS_RECHECK_SECONDS (watch) and closed with 1008 once its session no longer opens the app.
"""

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connections
from django.utils import timezone

from apps_proxy import hosts, services

log = logging.getLogger("apps_proxy")
T = TypeVar("T")
ROUTE_CACHE_SECONDS = 5.0
WS_RECHECK_SECONDS = 2.0  # An open WebSocket's session is checked again this often.
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


async def watch(session: str, app: hosts.AppHost, remote: Any, ended: asyncio.Event) -> None:
    """Every WS_RECHECK_SECONDS, whether the session still opens the app (route_of: one read of
    the workspace's stamp while nothing changed); once not, close the workspace's side (and so
    the browser's, with 1008). A database error is logged and checked again next time."""
    while True:
        await asyncio.sleep(WS_RECHECK_SECONDS)
        try:
            allowed = await route_of(session, app) is not None
        except Exception:  # A failing check must not end the connection, nor go unseen.
            log.exception("checking an open WebSocket's session failed")
            continue
        if not allowed:
            ended.set()
            await remote.close(1008, "Access ended.")
            return
