"""``/healthz``: is the database reachable, is the Celery broker reachable."""

from django.db import connection
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from portal.celery import app


def _database() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return {"ok": True, "vendor": connection.vendor}
    except Exception as exc:  # any driver error means "down"; the message says which
        return {"ok": False, "vendor": connection.vendor, "error": str(exc)[:200]}


def _broker() -> dict:
    transport = app.conf.broker_url.split("://", 1)[0]
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return {"ok": True, "transport": transport}
    except Exception as exc:  # kombu raises many types; any means "down"
        return {"ok": False, "transport": transport, "error": str(exc)[:200]}


@require_GET
def healthz(request):
    """200 with {"status": "ok", "database": {...}, "broker": {...}}, or 503 if either is down."""
    checks = {"database": _database(), "broker": _broker()}
    healthy = all(c["ok"] for c in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "down", **checks}, status=200 if healthy else 503
    )
