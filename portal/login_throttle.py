"""Login throttling with django-axes: the portal's handler, client address and lockout page.

axes counts failed logins per account and per client address (AXES_LOCKOUT_PARAMETERS) and
compares one number with one limit. The portal wants two limits: AXES_FAILURE_LIMIT failures
for one account, from anywhere, and LOGIN_IP_FAILURE_LIMIT (higher: a campus NAT is shared) from
one address, over all accounts. Both lock for AXES_COOLOFF_TIME after the last counted failure.
A lockout is audited once, when it starts (teams.accounts.login_lockout_record); platform admins
unlock in the admin (teams.accounts.login_lockout_reset, audited).
"""

from typing import Any

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_cool_off
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import QuerySet, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from common.client_address import client_address
from teams.accounts import login_lockout_record

# axes hands its handlers the request it extended (axes_ip_address, axes_locked_out, ...) and
# the login form's credentials.
Credentials = dict[str, Any] | None


def _failures(attempts: QuerySet[Any, Any]) -> int:
    return int(attempts.aggregate(n=Sum("failures_since_start"))["n"] or 0)


class LoginThrottleHandler(AxesDatabaseHandler):
    """axes' database handler with a limit per account and one per address, a reset after a
    successful login that forgets only that account's failures from that address, and an
    audit entry when a lockout starts."""

    def failures(self, request: Any, credentials: Credentials = None) -> tuple[int, int]:
        """Failures within the cool-off of (the account, the client address)."""
        recent = AccessAttempt.objects.filter(attempt_time__gte=get_cool_off_threshold(request))
        username = get_client_username(request, credentials)
        return (
            _failures(recent.filter(username=username)),
            _failures(recent.filter(ip_address=request.axes_ip_address)),
        )

    def get_failures(self, request: Any, credentials: Credentials = None) -> int:
        # axes locks when this reaches AXES_FAILURE_LIMIT. The address's failures are scaled
        # so that they reach it exactly when they reach LOGIN_IP_FAILURE_LIMIT:
        # floor(n * L / M) >= L  <=>  n >= M.
        account, address = self.failures(request, credentials)
        limit = settings.AXES_FAILURE_LIMIT
        return max(account, address * int(limit) // int(settings.LOGIN_IP_FAILURE_LIMIT))

    def reset_user_attempts(self, request: Any, credentials: Credentials = None) -> int:
        # axes' own reset forgets every failure of the account and every failure from the
        # address: someone with an account of their own could then log in between guesses at
        # another account's password and never reach either limit.
        username = get_client_username(request, credentials)
        deleted, _ = AccessAttempt.objects.filter(
            username=username, ip_address=request.axes_ip_address
        ).delete()
        return int(deleted)

    def user_login_failed(
        self, sender: object, credentials: dict[str, Any], request: Any = None, **kwargs: Any
    ) -> None:
        # With AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT off, an attempt refused during a
        # lockout arrives already marked locked: only the failure that starts one is audited.
        already_locked = bool(getattr(request, "axes_locked_out", False))
        super().user_login_failed(sender, credentials, request, **kwargs)
        if request is None or already_locked or not request.axes_locked_out:
            return
        account, address = self.failures(request, credentials)
        login_lockout_record(
            username=get_client_username(request, credentials) or "",
            ip_address=request.axes_ip_address,
            account_failures=account,
            address_failures=address,
            now=request.axes_attempt_time,
        )


def client_ip(request: HttpRequest) -> str | None:
    """The client's address (AXES_CLIENT_IP_CALLABLE): common.client_address's rule, the
    same the heartbeat limits use."""
    return client_address(request.META) or None


def lockout_response(
    request: HttpRequest, original_response: object = None, credentials: Credentials = None
) -> HttpResponse:
    """The lockout page (AXES_LOCKOUT_CALLABLE), 429. It says the same for every account,
    existing or not, and does not say whether the account or the address is locked."""
    minutes = int(get_cool_off(request).total_seconds() // 60)
    return render(
        request,
        "registration/locked_out.html",
        {"minutes": minutes},
        status=settings.AXES_HTTP_RESPONSE_CODE,
    )
