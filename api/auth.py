"""Who calls the API, and with which scope.

Each authenticator returns the caller's ``User`` (ninja puts it in ``request.auth``), sets
``request.user`` to it, so services and rules see the same user as in the browser, and sets
``request.api_scope``: "read" or "write". A signed-in browser session (CSRF-checked) has
"write". Routes that change anything call ``require_write``.

Tried in order: a personal access token (``Authorization: Bearer gpp_...``), then an Entra ID
access token for the portal's API, then the session. A bearer token that is sent but refused
is a 401 at once (a stale token never falls back to a session cookie). Token callers are
limited per token (api/ratelimit.py): 429 with Retry-After.
"""

from typing import Any

from django.contrib.auth.models import User
from django.http import HttpRequest
from django.utils import timezone
from ninja.errors import AuthenticationError, HttpError
from ninja.security import HttpBearer, SessionAuth

from api.ratelimit import rate_limit_check
from teams import entra_access
from teams.entra_oidc import EntraUnavailable
from teams.tokens import TOKEN_PREFIX, api_token_authenticate

READ = "read"
WRITE = "write"


class Session(SessionAuth):
    """The browser's session (the docs page's "Try it out"), CSRF-checked by ninja."""

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        user = super().authenticate(request, key)
        if user is not None:
            request.api_scope = WRITE  # type: ignore[attr-defined]
        return user


def _caller(request: HttpRequest, user: User, scope: str) -> User:
    request.user = user
    request.api_scope = scope  # type: ignore[attr-defined]
    return user


class PersonalToken(HttpBearer):
    """``Authorization: Bearer gpp_...``: a personal access token (teams.tokens)."""

    def authenticate(self, request: HttpRequest, token: str) -> User | None:
        if not token.startswith(TOKEN_PREFIX):
            return None  # Perhaps an Entra ID token: the next authenticator's.
        found = api_token_authenticate(token=token, now=timezone.now())
        if found is None:
            raise AuthenticationError(message="The token is unknown, expired or revoked.")
        # Keyed by the hash, not the id: ids come back after a rollback (tests, SQLite).
        rate_limit_check(key=f"pat:{found.token_hash[:32]}")
        return _caller(request, found.user, found.scope)


class EntraToken(HttpBearer):
    """``Authorization: Bearer <JWT>``: an Entra ID access token for the portal's API
    (teams.entra_access), e.g. a pipeline's managed identity. Off without Entra ID."""

    def authenticate(self, request: HttpRequest, token: str) -> User | None:
        if token.startswith(TOKEN_PREFIX) or not entra_access.enabled():
            return None
        try:
            caller = entra_access.entra_caller(token=token)
        except entra_access.AccessTokenRefused as err:
            raise AuthenticationError(message=str(err)) from None
        except EntraUnavailable as err:
            raise HttpError(503, str(err)) from None
        rate_limit_check(key=f"entra:{caller.oid}")
        return _caller(request, caller.user, caller.scope)


# The authenticators in the order ninja tries them.
api_auth: list[Any] = [PersonalToken(), EntraToken(), Session()]


def require_write(request: HttpRequest) -> None:
    """Raise a 403 (HttpError) unless the caller's token may write."""
    if getattr(request, "api_scope", READ) != WRITE:
        raise HttpError(403, "This token may only read: create a read and write token.")
