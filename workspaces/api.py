"""The agents' API: JSON in, JSON out, authenticated by a per-workspace Bearer token (no
session, no CSRF: agents are not browsers). See docs/agent-protocol.md.

Heartbeats are the portal's busiest request (one per running workspace every 30 s), so
``heartbeat_fast_path`` answers them in front of Django's URL resolver and middleware, with
the same ``heartbeat_answer`` as the routed view that the test client and ``reverse`` use
(heartbeat_rate.py in benchmarks/ measures what that saves). Which middleware it skips, and
why, is FAST_PATH_SKIPS; a middleware added to settings without an entry there fails
``manage.py check``.
"""

import ipaddress
import json
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from http import HTTPStatus
from typing import Any
from uuid import UUID
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from django.conf import settings
from django.core import signals
from django.http import HttpRequest, JsonResponse
from django.http.request import split_domain_port, validate_host
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from common.client_address import client_address
from common.request_id import HEADER as REQUEST_ID_HEADER
from common.request_id import request_id_bind
from workspaces import heartbeats, telemetry


def heartbeat_answer(
    *,
    workspace_id: UUID,
    authorization: str,
    content_length: str,
    read_body: Callable[[], bytes],
    now: datetime,
    client: str = "",
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """``(status, document, headers)`` for a heartbeat from address ``client``: 202
    {"accepted": n, "interval_seconds": s}; 400, 401, 410, 429 or 503 {"error": "..."}, 429
    and 503 with Retry-After (seconds). ``read_body()`` is called only once the token and
    the length are good."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token:
        return 401, {"error": "Send 'Authorization: Bearer <token>'."}, {}
    if not content_length.isdigit() or int(content_length) > telemetry.MAX_BODY_BYTES:
        return 400, {"error": f"The body must be at most {telemetry.MAX_BODY_BYTES} bytes."}, {}
    try:
        accepted = heartbeats.heartbeat_ingest(
            workspace_id=workspace_id, token=token, body=read_body(), now=now, client=client
        )
    except telemetry.HeartbeatRefused as refused:
        retry = {"Retry-After": str(refused.retry_after)} if refused.retry_after else {}
        return refused.status, {"error": refused.message}, retry
    return 202, {"accepted": accepted, "interval_seconds": settings.AGENT_INTERVAL_SECONDS}, {}


@csrf_exempt
@require_POST
def agent_heartbeat(request: HttpRequest, pk: UUID) -> JsonResponse:
    """The routed heartbeat endpoint, ``agent-heartbeat``; see heartbeat_answer."""
    status, doc, headers = heartbeat_answer(
        workspace_id=pk,
        authorization=request.headers.get("Authorization", ""),
        content_length=request.headers.get("Content-Length", "0"),
        read_body=lambda: request.body,
        now=timezone.now(),
        client=heartbeat_client(request.META),
    )
    return JsonResponse(doc, status=status, headers=headers)


def heartbeat_client(environ: Mapping[str, Any]) -> str:
    """The address a heartbeat came from, as its limits count it (common.client_address:
    REMOTE_ADDR, or behind TRUSTED_PROXY_COUNT proxies the address the outermost appended to
    X-Forwarded-For); an IPv6 address stands for its /64, which one host usually holds whole."""
    address = client_address(environ)
    if ":" not in address:  # IPv4 (or no address): taken as it is, without parsing
        return address[:64]
    try:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    except ValueError:
        return address[:64]


# Every middleware in settings.MIDDLEWARE, and why the fast path does without it. A middleware
# missing here fails `manage.py check` (workspaces/checks.py): whoever adds one decides whether
# heartbeats need it (then route them through Django, or apply it in heartbeat_fast_path).
FAST_PATH_SKIPS = {
    "portal.middleware.RequestMetricsMiddleware": "heartbeats are counted by outcome in "
    "portal_heartbeats_total (heartbeats.heartbeat_ingest), not timed per view",
    "django.middleware.security.SecurityMiddleware": "HSTS, nosniff and the https redirect "
    "are for browsers; an agent's token is sent by the time a redirect could answer",
    "csp.middleware.CSPMiddleware": "a Content-Security-Policy is for pages a browser renders; "
    "a heartbeat's answer is JSON to an agent",
    "whitenoise.middleware.WhiteNoiseMiddleware": "serves static files only",
    "django.contrib.sessions.middleware.SessionMiddleware": "agents have no session",
    "django.middleware.common.CommonMiddleware": "the path already ends in a slash; the host is "
    "checked against ALLOWED_HOSTS by _allowed_host",
    "django.middleware.csrf.CsrfViewMiddleware": "Bearer token, not a cookie: the routed view "
    "is csrf_exempt too",
    "django.contrib.auth.middleware.AuthenticationMiddleware": "the agent's token, not a user, "
    "is checked (heartbeats.heartbeat_ingest)",
    "django.contrib.messages.middleware.MessageMiddleware": "no page to show messages on",
    "django.middleware.clickjacking.XFrameOptionsMiddleware": "JSON, never framed",
    "django_htmx.middleware.HtmxMiddleware": "agents are not htmx",
    "portal.middleware.UserTimezoneMiddleware": "no user, no page times",
    "axes.middleware.AxesMiddleware": "guards the login form only",
    "common.request_id.RequestIdMiddleware": "applied in heartbeat_fast_path itself "
    "(request_id_bind): a refused heartbeat's log line carries its request id too",
}


def fast_path_unreviewed(middleware: list[str]) -> list[str]:
    """The entries of ``middleware`` (settings.MIDDLEWARE) that FAST_PATH_SKIPS does not
    name: middleware the heartbeat fast path would skip without anyone having said so."""
    return [m for m in middleware if m not in FAST_PATH_SKIPS]


_HEARTBEAT_PATH = re.compile(r"/api/workspaces/([0-9a-fA-F-]{36})/heartbeat/")


def heartbeat_fast_path(django_app: WSGIApplication) -> WSGIApplication:
    """Wrap the WSGI application: ``POST /api/workspaces/<uuid>/heartbeat/`` from an allowed
    host is answered here; every other request goes to Django."""

    def application(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        match = _HEARTBEAT_PATH.fullmatch(environ.get("PATH_INFO", ""))
        if not match or environ["REQUEST_METHOD"] != "POST" or not _allowed_host(environ):
            return django_app(environ, start_response)
        try:
            workspace_id = uuid.UUID(match[1])
        except ValueError:
            return django_app(environ, start_response)
        length = environ.get("CONTENT_LENGTH") or "0"
        request_id = request_id_bind(environ.get("HTTP_X_REQUEST_ID"))
        # Django's request signals: close_old_connections listens, as for any request.
        signals.request_started.send(sender=heartbeat_fast_path, environ=environ)
        try:
            status, doc, headers = heartbeat_answer(
                workspace_id=workspace_id,
                authorization=environ.get("HTTP_AUTHORIZATION", ""),
                content_length=length,
                read_body=lambda: environ["wsgi.input"].read(int(length)),
                now=timezone.now(),
                client=heartbeat_client(environ),
            )
        finally:
            signals.request_finished.send(sender=heartbeat_fast_path)
        body = json.dumps(doc).encode()
        start_response(
            f"{status} {HTTPStatus(status).phrase}",
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body))),
                *headers.items(),
                (REQUEST_ID_HEADER, request_id),
            ],
        )
        return [body]

    return application


def _allowed_host(environ: WSGIEnvironment) -> bool:
    host = environ.get("HTTP_HOST") or environ.get("SERVER_NAME", "")
    domain, _ = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    return bool(domain) and validate_host(domain, allowed)
