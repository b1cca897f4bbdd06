"""The stream of changes (server-sent events) and its fallback poll (ETag, 304).

Both take ``t``, a subscription signed for the logged-in user (live.tokens). Anonymous: 403;
a missing, tampered or expired ``t``: 400; another user's: 403.
"""

from collections.abc import AsyncIterator, Iterator

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.http import require_GET

from live import stamps, streams, tokens

_VERSION_CHARS = frozenset("0123456789abcdef")


def _topics(request: HttpRequest) -> list[str]:
    if not request.user.is_authenticated:
        raise tokens.Refused(403, "Log in first.")
    return tokens.parse(request.GET.get("t", ""), user_id=request.user.pk)


def _seen(value: str) -> str:
    # The version the page was rendered with; anything else (tampering, junk) is "unknown".
    value = (value or "").strip().strip('"')[:32]
    return value if value and set(value) <= _VERSION_CHARS else ""


@require_GET
def live_stream(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """``GET /live/stream/?t=<token>&v=<version>``: text/event-stream of ``change`` events."""
    try:
        topics = _topics(request)
    except tokens.Refused as refused:
        return HttpResponse(str(refused), status=refused.status, content_type="text/plain")
    seen = _seen(request.headers.get("Last-Event-ID") or request.GET.get("v", ""))
    ends_on = stamps.topic("session", request.user.pk)  # bumped when the user is deactivated
    body: Iterator[bytes] | AsyncIterator[bytes]
    if isinstance(request, ASGIRequest):
        body = streams.hub.stream(topics, seen, ends_on=ends_on)
    else:
        body = streams.sync_stream(topics, seen, ends_on=ends_on)
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    # nginx and similar proxies would otherwise buffer the stream.
    response["X-Accel-Buffering"] = "no"
    return response


@require_GET
def live_poll(request: HttpRequest) -> HttpResponse:
    """``GET /live/poll/?t=<token>``: 304 while If-None-Match is the topics' version, else
    200 {"version": "<hex>"} with that ETag. For browsers whose EventSource failed."""
    try:
        topics = _topics(request)
    except tokens.Refused as refused:
        return HttpResponse(str(refused), status=refused.status, content_type="text/plain")
    current = stamps.current_version(topics)
    etag = f'"{current}"'
    if request.headers.get("If-None-Match") == etag:
        response = HttpResponse(status=304)
    else:
        response = JsonResponse({"version": current})
    response["ETag"] = etag
    response["Cache-Control"] = "no-cache"
    return response
