"""Authentication backends of the portal's own (settings.AUTHENTICATION_BACKENDS)."""

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest


class PasswordLoginSwitch:
    """Refuses every password authentication while PASSWORD_LOGIN is off, before any backend
    looks at the password: authenticate() stops at PermissionDenied and returns None. Listed
    before ModelBackend, so it covers every caller (the login page, the admin's login, a
    future API), not only the views that check the setting themselves."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if password is not None and not settings.PASSWORD_LOGIN:
            raise PermissionDenied("Password sign-in is off (PASSWORD_LOGIN=false).")
        return None

    # No get_user: sessions never name this backend (Django's test client's force_login and
    # login() without a backend take the first backend that has one).
