"""Show times in the user's own time zone."""

import zoneinfo

from django.conf import settings
from django.utils import timezone


class UserTimezoneMiddleware:
    """Activate the zone named by the ``tz`` cookie (set by static/portal.js from the browser).

    Storage stays UTC; only rendering changes. An unknown zone name falls back to
    PORTAL_DISPLAY_TIME_ZONE.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        name = request.COOKIES.get("tz") or settings.PORTAL_DISPLAY_TIME_ZONE
        try:
            timezone.activate(zoneinfo.ZoneInfo(name))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            timezone.activate(zoneinfo.ZoneInfo(settings.PORTAL_DISPLAY_TIME_ZONE))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
