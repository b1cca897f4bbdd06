"""Entra ID sign-in pages: the login page's "Sign in with Microsoft" button starts the flow
(entra_login), Entra ID sends the browser back to entra_callback. The rules are in
teams/entra_oidc.py (protocol, token validation) and teams/entra.py (accounts, teams, roles).

Refusals render the login page with the reason (400; 503 when Entra ID does not answer),
never a 500; they are logged without tokens or codes. Both pages 404 while Entra ID sign-in
is off (ENTRA_TENANT_ID or ENTRA_CLIENT_ID unset).
"""

import logging
import re
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.views import redirect_to_login
from django.db import IntegrityError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render, resolve_url
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from teams import entra, entra_oidc
from teams.entra_oidc import Flow, SignInError
from teams.forms import LoginForm

log = logging.getLogger(__name__)
SESSION_KEY = "entra_flow"
PARAM_MAX = 4096  # Entra's codes are ~1-2 KB; anything longer is not from it.
AADSTS = re.compile(r"AADSTS\d{4,7}")


PASSWORD_OFF = "Local passwords are turned off here: sign in with Microsoft."


class LoginView(auth_views.LoginView):
    """Django's login page, with the "Sign in with Microsoft" button when Entra ID is on and the
    password form while PASSWORD_LOGIN is on. Off, a posted password is refused (403) before
    anything authenticates it."""

    authentication_form = LoginForm

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.PASSWORD_LOGIN:
            context = self.get_context_data(form=LoginForm(request), entra_error=PASSWORD_OFF)
            return self.render_to_response(context, status=403)
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return super().get_context_data(**kwargs) | {
            "entra_enabled": entra_oidc.enabled(),
            "password_login": settings.PASSWORD_LOGIN,
        }


@never_cache
def admin_login(request: HttpRequest) -> HttpResponseBase:
    """Django admin's own login while PASSWORD_LOGIN is on; off, its GET goes to the portal's
    login page (Sign in with Microsoft) and a posted password is refused (403)."""
    if settings.PASSWORD_LOGIN:
        return admin.site.login(request)
    if request.method == "POST":
        return HttpResponseForbidden(PASSWORD_OFF)
    return redirect_to_login(request.GET.get("next") or reverse("admin:index"))


def _refuse(request: HttpRequest, error: SignInError) -> HttpResponse:
    log.warning("Entra ID sign-in refused: %s", error)
    context = {
        "form": LoginForm(request),
        "entra_enabled": True,
        "entra_error": str(error),
        "password_login": settings.PASSWORD_LOGIN,
    }
    return render(request, "registration/login.html", context, status=error.status)


def _redirect_uri(request: HttpRequest) -> str:
    return str(request.build_absolute_uri(reverse("entra-callback")))


def _next(request: HttpRequest) -> str:
    wanted = request.GET.get("next", "")
    safe = url_has_allowed_host_and_scheme(
        wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return wanted if safe else resolve_url(settings.LOGIN_REDIRECT_URL)


@never_cache
@require_GET
def entra_login(request: HttpRequest) -> HttpResponseBase:
    """302 to Entra ID's authorize endpoint; state, nonce and the PKCE verifier stay in the
    session for the callback."""
    if not entra_oidc.enabled():
        raise Http404
    try:
        url, flow = entra_oidc.authorize_url(redirect_uri=_redirect_uri(request))
    except SignInError as error:
        return _refuse(request, error)
    request.session[SESSION_KEY] = flow.as_dict() | {"next": _next(request)}
    return redirect(url)


def _param(request: HttpRequest, name: str) -> str:
    value = str(request.GET.get(name, ""))
    if len(value) > PARAM_MAX or not value.isprintable():
        raise SignInError("The sign-in answer was malformed; sign in again.")
    return value


@never_cache
@require_GET
def entra_callback(request: HttpRequest) -> HttpResponseBase:
    """Entra ID's answer (?code&state or ?error&error_description): validate, find or create
    the account, set its teams and roles, log in, 302 to where the user was going."""
    if not entra_oidc.enabled():
        raise Http404
    kept = request.session.pop(SESSION_KEY, None)  # Single use: a replay finds nothing.
    try:
        flow = Flow(kept["state"], kept["nonce"], kept["verifier"]) if kept else None
        if not entra_oidc.state_matches(flow, _param(request, "state")):
            raise SignInError("The sign-in could not be matched to this browser; sign in again.")
        if request.GET.get("error"):
            codes = AADSTS.findall(_param(request, "error_description"))[:1]
            why = f" ({codes[0]})" if codes else ""
            raise SignInError(f"Microsoft Entra ID refused the sign-in{why}.")
        code = _param(request, "code")
        if not code:
            raise SignInError("The sign-in answer had no code; sign in again.")
        token = entra_oidc.code_redeem(code=code, flow=flow, redirect_uri=_redirect_uri(request))
        claims = entra_oidc.id_token_claims(token, nonce=flow.nonce)
        groups = entra_oidc.token_groups(claims)
        user = entra.user_sign_in(claims=claims, groups=groups, now=timezone.now())
    except SignInError as error:
        return _refuse(request, error)
    except IntegrityError:  # Two first sign-ins of one person at once: the other one won.
        return _refuse(request, SignInError("Signing in did not finish; sign in again."))
    if not user.is_active:
        return _refuse(request, SignInError("This account is deactivated in the portal."))
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    return redirect(kept.get("next") or resolve_url(settings.LOGIN_REDIRECT_URL))
