"""Errors as RFC 9457 problem details: ``application/problem+json`` with ``type``, ``title``,
``status`` and ``detail``, plus ``errors`` (a list of {loc, msg}) where input was refused.

Every refusal of the API goes through ``problem``, so a caller parses one error shape: bad
input is 400 (never Django's 500 nor ninja's 422), a missing token 401, a read-only token
writing 403, anything the caller may not see 404, a state conflict 409, a limit 429."""

from http import HTTPStatus
from typing import Any

from django.http import HttpRequest, JsonResponse

CONTENT_TYPE = "application/problem+json"


def problem(
    request: HttpRequest,
    status: int,
    detail: str,
    *,
    type_: str = "about:blank",
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JsonResponse:
    """A problem-details response: ``status`` (an HTTP code), its standard reason as ``title``
    (RFC 9457 §4.2, for "about:blank"), and ``detail`` fit to show a user."""
    body: dict[str, Any] = {
        "type": type_,
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "instance": request.path,
    }
    if errors is not None:
        body["errors"] = errors
    response = JsonResponse(body, status=status, content_type=CONTENT_TYPE)
    for name, value in (headers or {}).items():
        response[name] = value
    return response
