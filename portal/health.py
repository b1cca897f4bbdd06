"""``/healthz``: is the database reachable, is the Celery broker reachable.

Anyone may ask (a load balancer's probe has no login), so the answer says only which dependency
is down; the driver's error, which names internal hosts and ports, goes to the log.
"""

import logging

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from portal.celery import app

log = logging.getLogger(__name__)


def _database() -> dict[str, object]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return {"ok": True, "vendor": connection.vendor}
    except Exception as exc:  # any driver error means "down"; the log says which
        log.warning("healthz: the database is down: %s: %s", type(exc).__name__, exc)
        return {"ok": False, "vendor": connection.vendor, "error": "unreachable"}


def _broker() -> dict[str, object]:
    transport = app.conf.broker_url.split("://", 1)[0]
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return {"ok": True, "transport": transport}
    except Exception as exc:  # kombu raises many types; any means "down"
        log.warning("healthz: the broker is down: %s: %s", type(exc).__name__, exc)
        return {"ok": False, "transport": transport, "error": "unreachable"}


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 with {"status": "ok", "database": {...}, "broker": {...}}, or 503 naming the one
    that is down ({"ok": false, "error": "unreachable"}; the detail is logged)."""
    checks = {"database": _database(), "broker": _broker()}
    healthy = all(c["ok"] for c in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "down", **checks}, status=200 if healthy else 503
    )
