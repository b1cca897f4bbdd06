"""Who calls the API, and with which scope.

Each authenticator returns the caller's ``User`` (ninja puts it in ``request.auth``), sets
``request.user`` to it, so services and rules see the same user as in the browser, and sets
``request.api_scope``: "read" or "write". A signed-in browser session (CSRF-checked) has
"write". Routes that change anything call ``require_write``.
"""

from typing import Any

from django.http import HttpRequest
from ninja.errors import HttpError
from ninja.security import SessionAuth

READ = "read"
WRITE = "write"


class Session(SessionAuth):
    """The browser's session (the docs page's "Try it out"), CSRF-checked by ninja."""

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        user = super().authenticate(request, key)
        if user is not None:
            request.api_scope = WRITE  # type: ignore[attr-defined]
        return user


# The authenticators in the order ninja tries them.
api_auth: list[Any] = [Session()]


def require_write(request: HttpRequest) -> None:
    """Raise a 403 (HttpError) unless the caller's token may write."""
    if getattr(request, "api_scope", READ) != WRITE:
        raise HttpError(403, "This token may only read: create a read and write token.")
