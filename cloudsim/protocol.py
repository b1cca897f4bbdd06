"""Request/response values shared by the router, the handlers and the HTTP server."""

import json
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from . import errors
from .models import CONTAINER_SERVICE, NETWORK, Operation


@dataclass
class Request:
    """One HTTP request. `path` is unquoted and has no query; `query` and `headers` keys are
    lower-case; `base_url` is "http://host:port" as the client addressed us."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    base_url: str
    params: dict[str, str] = field(default_factory=dict)  # Filled by the router.

    @property
    def api_version(self) -> str:
        return self.query.get("api-version", "")

    def json(self) -> dict:
        """The body as a JSON object ({} when empty); 400 InvalidRequestContent otherwise."""
        if not self.body.strip():
            return {}
        try:
            value = json.loads(self.body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise errors.invalid_content(str(exc)) from None
        if not isinstance(value, dict):
            raise errors.invalid_content("expected a JSON object")
        return value


@dataclass
class Response:
    status: int
    body: Any = None  # JSON-serialisable, None for an empty body, or bytes sent as they are.
    headers: dict[str, str] = field(default_factory=dict)


def error_response(err: errors.ArmError) -> Response:
    """ARM error body plus the x-ms-error-code header ARM always sends."""
    headers = {"x-ms-error-code": err.code, **err.headers}
    return Response(err.status, err.body(), headers)


def dig(value: Any, *path: str | int) -> Any:
    """value[p0][p1]... or None when any step is missing or of the wrong type."""
    for step in path:
        if isinstance(step, int):
            ok = isinstance(value, list) and -len(value) <= step < len(value)
        else:
            ok = isinstance(value, dict) and step in value
        if not ok:
            return None
        value = value[step]
    return value


def operation_url(req: Request, op: Operation, monitor: bool = False) -> str:
    """Absolute status URL: .../providers/{rp}/locations/{loc}/operations/{id}?api-version=...

    The monitor form (the Location header) is `operationResults` for the network and container
    service RPs and `operations/...&monitor=true` for compute, as Azure does."""
    base = f"{req.base_url}/subscriptions/{op.subscription}/providers/{op.provider}"
    api = urllib.parse.quote(req.api_version or "2024-07-01", safe="")
    if monitor and op.provider in (NETWORK, CONTAINER_SERVICE):
        return f"{base}/locations/{op.location}/operationResults/{op.id}?api-version={api}"
    extra = "monitor=true&" if monitor else ""
    return f"{base}/locations/{op.location}/operations/{op.id}?{extra}api-version={api}"


def lro_headers(req: Request, op: Operation, retry_after: int, location: bool = True) -> dict:
    """Azure-AsyncOperation (+ Location for 202s) and Retry-After in seconds."""
    headers = {"Azure-AsyncOperation": operation_url(req, op), "Retry-After": str(retry_after)}
    if location:
        headers["Location"] = operation_url(req, op, monitor=True)
    return headers
