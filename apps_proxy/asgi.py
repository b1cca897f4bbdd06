"""The app proxy: an ASGI application served by uvicorn on the apps origin, a process of its own
(Procfile ``apps``: ``uvicorn apps_proxy.asgi:application``), never the portal's web process.

Why these pieces, and no HTTP parsing of our own: uvicorn (already the portal's ASGI server,
with httptools) parses the browser's HTTP and WebSocket; httpx's async client streams each
request and answer to the workspace chunk by chunk (uploads, downloads, Jupyter's long
answers), with a connection pool; the ``websockets`` package (the maintained asyncio
WebSocket implementation, also uvicorn's) is the client towards the workspace. A proxy engine
(Envoy, Traefik, nginx) was the other choice: it would still need this per-request check of the
portal's sessions (an ext_authz/forward-auth service) and one more thing to deploy; JupyterHub's
configurable-http-proxy is Node and has no per-request authorisation. Here the check is one
function and the tests run it in-process.

Each request on ``<label>.<APPS_DOMAIN>``:

1. ``/_portal/auth?ticket=...&next=...`` redeems the portal's one-use ticket for this host's
   session cookie (host-only, HttpOnly, SameSite=Lax) and redirects to ``next``;
2. anything else needs that cookie, authorised again against the database
   (apps_proxy.services.app_session_route; apps_proxy.access keeps a yes a few seconds while
   the workspace's stamp, read at each request, is unchanged); without it a page load
   is sent through the portal (which asks for a login and checks the rules), anything else is
   404;
3. a request another site or another workspace's page makes (Fetch Metadata:
   ``Sec-Fetch-Site`` not same-origin, unless the top-level navigation of a link) and a
   WebSocket whose Origin is not this host's are refused with 403, so no page can use the
   viewer's session on this host;
4. the proxy's cookie is taken out of what is forwarded, JupyterLab's token is put in
   (``Authorization: token``), or for VS Code code-server's session cookie, and the answer
   is streamed back.
"""

import asyncio
import contextlib
import functools
import logging
import os
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, MutableMapping
from http.cookies import CookieError, SimpleCookie
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402
from django.conf import settings  # noqa: E402
from django.utils import timezone  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus  # noqa: E402

from apps_proxy import hosts, routes, services, terminal  # noqa: E402
from apps_proxy.access import close_database, database, route_of, watch  # noqa: E402

log = logging.getLogger("apps_proxy")
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

COOKIE = "gpuportal_app"
# Over https the cookie is "__Host-" prefixed: browsers then refuse one set with a Domain, so a
# page on another apps host cannot plant its own session on this one ("cookie tossing").
HOST_COOKIE = "__Host-" + COOKIE
AUTH_PATH = "/_portal/auth"
# Hop-by-hop headers (RFC 9110 7.6.1) and what the proxy sets itself.
HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "authorization",
    }
)
_clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}


def _client() -> httpx.AsyncClient:
    """The connection pool of this event loop (one per process under uvicorn)."""
    loop = asyncio.get_running_loop()
    if loop not in _clients:
        _clients[loop] = httpx.AsyncClient(
            timeout=httpx.Timeout(connect=10.0, read=None, write=None, pool=10.0),
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=100),
            follow_redirects=False,
            trust_env=False,
        )
    return _clients[loop]


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _cookies(header: str) -> SimpleCookie:
    jar: SimpleCookie = SimpleCookie()
    with contextlib.suppress(CookieError):  # A malformed header: no cookie of ours in it.
        jar.load(header)
    return jar


def cookie_name() -> str:
    return HOST_COOKIE if settings.APPS_URL_SCHEME == "https" else COOKIE


def _without_our_cookie(header: str, route: services.Route | None = None) -> str:
    """The Cookie header minus the proxy's session (the workspace never sees it), with the
    route's own cookie (code-server's session) first and none of the browser's of that name,
    which a page on the host may have set to take its place."""
    parts = [p.strip() for p in header.split(";")]
    ours = {COOKIE, HOST_COOKIE}
    if route is not None and route.cookie:
        ours.add(route.cookie.split("=", 1)[0])
    kept = [p for p in parts if p and p.split("=", 1)[0].strip() not in ours]
    if route is not None and route.cookie:
        kept.insert(0, route.cookie)
    return "; ".join(kept)


def upstream_set_cookie(value: str) -> str | None:
    """A workspace's Set-Cookie as the browser gets it: host-only (its Domain dropped, so it
    reaches no other apps host), and none that names the proxy's own cookie."""
    name = value.split("=", 1)[0].strip()
    if name in (COOKIE, HOST_COOKIE):
        return None
    kept = [a for a in value.split(";") if a.split("=", 1)[0].strip().lower() != "domain"]
    return ";".join(kept)


async def _upstream(route: services.Route) -> tuple[str, int]:
    return await asyncio.to_thread(routes.route_resolve, route.host, route.port)


def _foreign(scope: Scope, headers: dict[str, str], app: hosts.AppHost) -> bool:
    """Whether another origin (another site, another workspace's page) makes the request."""
    if scope["type"] == "websocket":
        return headers.get("origin", "") != hosts.app_origin(app)
    site = headers.get("sec-fetch-site")
    navigation = headers.get("sec-fetch-mode") == "navigate" and scope["method"] in ("GET", "HEAD")
    if site in ("same-site", "cross-site") and not navigation:
        return True
    origin = headers.get("origin")
    unsafe = scope["method"] not in ("GET", "HEAD", "OPTIONS")
    return bool(unsafe and origin and origin != hosts.app_origin(app))


async def application(scope: Scope, receive: Receive, send: Send) -> None:
    """ASGI entry point: see the module docstring."""
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    headers = _headers(scope)
    app = hosts.host_parse(headers.get("host", ""))
    if app is None:
        await _refuse(scope, send, 404, "No such app.")
        return
    if scope["type"] == "http" and scope["path"] == AUTH_PATH:
        await _redeem(scope, send, app)
        return
    jar = _cookies(headers.get("cookie", ""))
    name = cookie_name()
    route = await route_of(jar[name].value, app) if name in jar else None
    if route is None:
        await _enter_through_portal(scope, send, headers, app)
        return
    if _foreign(scope, headers, app):
        await _refuse(scope, send, 403, "Requests from other origins are refused.")
        return
    try:
        upstream = await _upstream(route)
    except routes.Unreachable:
        await _refuse(scope, send, 502, "The workspace does not answer.")
        return
    if scope["type"] == "websocket":
        # Its session is checked again while it is open (access.watch): a long-lived terminal
        # or kernel connection ends with access, not only the next request.
        watcher = functools.partial(watch, jar[name].value, app)
        await _proxy_websocket(scope, receive, send, headers, route, upstream, watcher)
    else:
        await _proxy_http(scope, receive, send, headers, route, upstream)


async def _redeem(scope: Scope, send: Send, app: hosts.AppHost) -> None:
    query = urllib.parse.parse_qs(scope["query_string"].decode("latin-1"))
    ticket = (query.get("ticket") or [""])[0]
    target = (query.get("next") or ["/"])[0]
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        target = "/"  # Only a path on this host: no open redirect.
    now = timezone.now()
    secret = await database(
        lambda: services.app_ticket_redeem(ticket=ticket, app=app, now=now) if ticket else None
    )
    if secret is None:
        await _refuse(scope, send, 404, "This link has expired or was used: open it again.")
        return
    if target == terminal.TERMINAL_PATH:  # The Terminal link: a terminal laid out in JupyterLab.
        target = await terminal.terminal_location(secret, app, _client())
    attributes = f"Path=/; HttpOnly; SameSite=Lax; Max-Age={services.SESSION_SECONDS}"
    if settings.APPS_URL_SCHEME == "https":
        attributes += "; Secure"
    await _plain(
        send,
        302,
        b"",
        [
            (b"location", target.encode("latin-1")),
            (b"set-cookie", f"{cookie_name()}={secret}; {attributes}".encode()),
            (b"referrer-policy", b"no-referrer"),
            (b"cache-control", b"no-store"),
        ],
    )


async def _enter_through_portal(
    scope: Scope, send: Send, headers: dict[str, str], app: hosts.AppHost
) -> None:
    """A page load without a session goes to the portal, which signs in and checks; the rest
    is 404, as for an app that does not exist."""
    if scope["type"] == "http" and scope["method"] == "GET":
        asked = scope["query_string"].decode()
        path = scope["path"] + ("?" + asked if asked else "")
        query = urllib.parse.urlencode({"host": app.label, "next": path})
        location = f"{settings.PORTAL_URL}/apps/enter/?{query}"
        await _plain(send, 302, b"", [(b"location", location.encode())])
        return
    await _refuse(scope, send, 404, "No such app.")


def _forwarded_headers(
    headers: dict[str, str], route: services.Route, scope: Scope
) -> list[tuple[str, str]]:
    out = [(k, v) for k, v in headers.items() if k not in HOP and k != "cookie"]
    cookie = _without_our_cookie(headers.get("cookie", ""), route)
    if cookie:
        out.append(("cookie", cookie))
    if route.token:
        out.append(("authorization", f"token {route.token}"))
    client = scope.get("client")
    if client:
        out.append(("x-forwarded-for", client[0]))
    out.append(("x-forwarded-proto", settings.APPS_URL_SCHEME))
    return out


async def _request_body(receive: Receive) -> AsyncIterator[bytes]:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        yield message.get("body", b"")
        if not message.get("more_body"):
            return


async def _proxy_http(
    scope: Scope,
    receive: Receive,
    send: Send,
    headers: dict[str, str],
    route: services.Route,
    upstream: tuple[str, int],
) -> None:
    """Stream the request to the workspace and its answer back, chunk by chunk."""
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if raw else urllib.parse.quote(scope["path"])
    url = f"http://{upstream[0]}:{upstream[1]}{path}"
    if scope["query_string"]:
        url += "?" + scope["query_string"].decode("latin-1")
    has_body = "content-length" in headers or "transfer-encoding" in headers
    client = _client()
    request = client.build_request(
        scope["method"],
        url,
        headers=_forwarded_headers(headers, route, scope),
        content=_request_body(receive) if has_body else None,
    )
    try:
        answer = await client.send(request, stream=True)
    except httpx.HTTPError:
        await _refuse(scope, send, 502, "The workspace does not answer.")
        return
    try:
        out = _answer_headers(answer.headers.multi_items())
        await send({"type": "http.response.start", "status": answer.status_code, "headers": out})
        async for chunk in answer.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        await answer.aclose()


def _answer_headers(items: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    out = []
    for key, value in items:
        if key.lower() in HOP:
            continue
        if key.lower() == "set-cookie":
            kept = upstream_set_cookie(value)
            if kept is None:
                continue
            value = kept
        out.append((key.encode("latin-1"), value.encode("latin-1")))
    return out


async def _proxy_websocket(
    scope: Scope,
    receive: Receive,
    send: Send,
    headers: dict[str, str],
    route: services.Route,
    upstream: tuple[str, int],
    watch: Callable[[Any, asyncio.Event], Coroutine[Any, Any, None]],
) -> None:
    """Open the same WebSocket to the workspace, then pass frames both ways until one side
    closes or ``watch`` (access.watch) ends access. The upstream Origin is the upstream's own: the
    proxy checked the browser's."""
    url = f"ws://{upstream[0]}:{upstream[1]}{scope['path']}"
    if scope["query_string"]:
        url += "?" + scope["query_string"].decode("latin-1")
    extra = [("Authorization", f"token {route.token}")] if route.token else []
    cookie = _without_our_cookie(headers.get("cookie", ""), route)
    if cookie:
        extra.append(("Cookie", cookie))
    try:
        remote = await connect(
            url,
            additional_headers=extra,
            subprotocols=scope.get("subprotocols") or None,
            origin=f"http://{upstream[0]}:{upstream[1]}",  # type: ignore[arg-type]
            max_size=None,
            compression=None,
            open_timeout=30,
            close_timeout=2,  # Seconds: code-server may never answer a close frame.
            ping_interval=None,
        )
    except (OSError, InvalidHandshake, InvalidStatus, TimeoutError):
        await send({"type": "websocket.close", "code": 1011})
        return
    await send({"type": "websocket.accept", "subprotocol": remote.subprotocol})
    browser_gone, ended = asyncio.Event(), asyncio.Event()
    to_remote = asyncio.create_task(_browser_to_remote(receive, remote, browser_gone))
    watcher = asyncio.create_task(watch(remote, ended))
    try:
        with contextlib.suppress(ConnectionClosed):  # Closed without a clean handshake.
            async for message in remote:
                key = "text" if isinstance(message, str) else "bytes"
                await send({"type": "websocket.send", key: message})
        if not browser_gone.is_set():  # The workspace closed it, or access ended: say so.
            code = 1008 if ended.is_set() else (remote.close_code or 1000)
            await send({"type": "websocket.close", "code": code})
    finally:
        to_remote.cancel()
        watcher.cancel()
        await remote.close()


async def _browser_to_remote(receive: Receive, remote: Any, gone: asyncio.Event) -> None:
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            gone.set()
            await remote.close()
            return
        data = message.get("text") if message.get("text") is not None else message.get("bytes")
        if data is not None:
            await remote.send(data)


async def _plain(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _refuse(scope: Scope, send: Send, status: int, text: str) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})  # uvicorn answers 403.
        return
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"cache-control", b"no-store")]
    await _plain(send, status, text.encode(), headers)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            for client in list(_clients.values()):
                await client.aclose()
            await close_database()
            await send({"type": "lifespan.shutdown.complete"})
            return
