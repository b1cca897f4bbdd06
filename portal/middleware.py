"""Show times in the user's own time zone; time every request for /metrics."""

import time
import zoneinfo
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from common.metrics import REQUEST_SECONDS

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class UserTimezoneMiddleware:
    """Activate the zone named by the ``tz`` cookie (set by static/portal.js from the browser).

    Storage stays UTC; only rendering changes. An unknown zone name falls back to
    PORTAL_DISPLAY_TIME_ZONE.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        name = request.COOKIES.get("tz") or settings.PORTAL_DISPLAY_TIME_ZONE
        try:
            timezone.activate(zoneinfo.ZoneInfo(name))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            timezone.activate(zoneinfo.ZoneInfo(settings.PORTAL_DISPLAY_TIME_ZONE))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


class RequestMetricsMiddleware:
    """Observe each request's latency in portal_request_duration_seconds, labelled by the URL
    route's name (``workspaces:detail``, never the raw path: the label's values are as many as
    the routes), the method (others as OTHER) and the status class (2xx...). A path that
    resolves to no route is ``unresolved``. The agents' heartbeats take a fast path around
    Django (workspaces/api.py) and are counted by portal_heartbeats_total instead."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        view = (match.view_name or match.route) if match else "unresolved"
        method = request.method if request.method in METHODS else "OTHER"
        status = f"{response.status_code // 100}xx"
        REQUEST_SECONDS.labels(view, method, status).observe(time.perf_counter() - started)
        return response
