"""The request id: on every log line written while a request is served (portal.logs), and in
the response's X-Request-ID header, so a user's report or a proxy's log finds the lines.

A proxy's or client's X-Request-ID is kept when it is sane (1-128 characters of letters,
digits and ``-._:``; a UUID, a W3C trace id, Azure Front Door's and App Gateway's ids all
are); anything else, or none, gets a fresh UUID4 (32 hex digits), so a hostile header can
neither forge log structure nor grow lines without bound.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

import structlog
from django.http import HttpRequest, HttpResponse

HEADER = "X-Request-ID"
SANE = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def request_id_bind(value: str | None) -> str:
    """Start a request's log context: forget the previous request's, bind the incoming id
    when sane, else a new uuid4 hex, and return it (for the X-Request-ID response header)."""
    request_id = value if value is not None and SANE.fullmatch(value) else uuid.uuid4().hex
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(request_id=request_id)
    return request_id


class RequestIdMiddleware:
    """First in MIDDLEWARE; heartbeats' fast path (workspaces.api) binds the id itself.
    The context is cleared as a request starts, not as it ends: Django logs a 4xx/5xx
    (django.request) after the middleware chain has returned, and that line must carry the
    id too."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = request_id_bind(request.headers.get(HEADER))
        request.request_id = request_id  # type: ignore[attr-defined]
        response = self.get_response(request)
        response[HEADER] = request_id
        return response
