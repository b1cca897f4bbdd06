"""The agents' API: JSON in, JSON out, authenticated by a per-workspace Bearer token (no
session, no CSRF: agents are not browsers). See docs/agent-protocol.md."""

from django.conf import settings
from django.http import JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from workspaces import telemetry


@csrf_exempt
@require_POST
def agent_heartbeat(request, pk):
    """202 {"accepted": n, "interval_seconds": s}; 400, 401 or 410 {"error": "..."}."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        return JsonResponse({"error": "Send 'Authorization: Bearer <token>'."}, status=401)
    length = request.headers.get("Content-Length", "0")
    if not length.isdigit() or int(length) > telemetry.MAX_BODY_BYTES:
        return JsonResponse(
            {"error": f"The body must be at most {telemetry.MAX_BODY_BYTES} bytes."}, status=400
        )
    try:
        accepted = telemetry.heartbeat_ingest(
            workspace_id=pk, token=token, body=request.body, now=timezone.now()
        )
    except telemetry.HeartbeatRefused as refused:
        return JsonResponse({"error": refused.message}, status=refused.status)
    return JsonResponse(
        {"accepted": accepted, "interval_seconds": settings.AGENT_INTERVAL_SECONDS}, status=202
    )
