"""The user's personal access tokens for /api/v1/: list, create (shown once), revoke.

A user sees and revokes only their own tokens: another user's token id is a 404, as a missing
one. A new token's text is rendered in the answer to the create POST itself and kept nowhere
(not in the session, not in a message): the page is sent with Cache-Control no-store, so the
back button cannot bring it back either.
"""

from typing import cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from teams import tokens
from teams.forms import ApiTokenForm
from teams.models import ApiToken


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def account_tokens(request: HttpRequest) -> HttpResponse:
    """GET: the user's tokens and the create form. POST: create one and show it once."""
    user = cast(User, request.user)  # login_required: never anonymous here
    form = ApiTokenForm(request.POST or None)
    created = None
    if request.method == "POST" and form.is_valid():
        try:
            token, text = tokens.api_token_create(
                user=user,
                name=form.cleaned_data["name"],
                scope=form.cleaned_data["scope"],
                expires_in_days=form.cleaned_data["expires_in_days"],
                now=timezone.now(),
            )
        except tokens.TokenError as err:
            form.add_error(None, str(err))
        else:
            created = {"token": token, "text": text}
            form = ApiTokenForm()
    context = {
        "form": form,
        "created": created,
        "tokens": tokens.api_token_list(user=user),
        "now": timezone.now(),
    }
    return render(request, "teams/tokens.html", context, status=400 if form.errors else 200)


@login_required
@require_POST
def account_token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke the user's token ``pk``; 404 when it is not theirs."""
    try:
        token = tokens.api_token_revoke(
            user=cast(User, request.user),  # login_required: never anonymous here
            token_id=pk,
            now=timezone.now(),
        )
    except ApiToken.DoesNotExist:
        raise Http404("No such token.") from None
    messages.success(request, f"Revoked “{token.name}” ({token.prefix}…): it no longer works.")
    return redirect("account-tokens")
