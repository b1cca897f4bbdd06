"""Error bodies of the token endpoint and of Microsoft Graph.

Token endpoint (Microsoft identity platform, OAuth 2.0 error response):
{"error": "invalid_grant", "error_description": "AADSTS501481: ...\\r\\nTrace ID: ...\\r\\n
Correlation ID: ...\\r\\nTimestamp: ...", "error_codes": [501481], "timestamp", "trace_id",
"correlation_id"}.
Graph (Microsoft Graph REST API v1.0 "Microsoft Graph error responses and resource types"):
{"error": {"code", "message", "innerError": {"date", "request-id", "client-request-id"}}}.
"""

import time
import uuid

from ..protocol import Response


class EntraError(Exception):
    def __init__(self, response: Response):
        super().__init__(response.status)
        self.response = response


def token_error(status: int, error: str, code: int, text: str, headers=None) -> EntraError:
    trace, correlation = str(uuid.uuid4()), str(uuid.uuid4())
    stamp = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime())
    description = (
        f"AADSTS{code}: {text}\r\nTrace ID: {trace}\r\nCorrelation ID: {correlation}\r\n"
        f"Timestamp: {stamp}"
    )
    body = {
        "error": error,
        "error_description": description,
        "error_codes": [code],
        "timestamp": stamp,
        "trace_id": trace,
        "correlation_id": correlation,
    }
    return EntraError(Response(status, body, dict(headers or {})))


def graph_error(status: int, code: str, message: str, headers=None) -> EntraError:
    request_id = str(uuid.uuid4())
    inner = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()),
        "request-id": request_id,
        "client-request-id": request_id,
    }
    body = {"error": {"code": code, "message": message, "innerError": inner}}
    return EntraError(Response(status, body, {"request-id": request_id, **(headers or {})}))


def graph_fault(kind: str, retry_after: int) -> EntraError:
    """An injected Graph fault: throttle (429), server_error (500), unavailable (503)."""
    wait = {"Retry-After": str(retry_after or 1)}
    if kind == "throttle":
        return graph_error(429, "TooManyRequests", "Too many requests.", wait)
    if kind == "unavailable":
        return graph_error(503, "serviceNotAvailable", "Service unavailable.", wait)
    return graph_error(500, "generalException", "An internal server error occurred.")


def token_fault(kind: str, retry_after: int) -> EntraError:
    """An injected token endpoint fault (throttle 429, server_error 500, unavailable 503)."""
    wait = {"Retry-After": str(retry_after or 1)}
    if kind == "throttle":
        text = "The request was throttled. Please retry later."
        return token_error(429, "temporarily_unavailable", 50196, text, wait)
    status = 503 if kind == "unavailable" else 500
    text = "The service is temporarily unavailable. Please try again later."
    return token_error(status, "temporarily_unavailable", 90033, text, wait)
