"""Personal access tokens for /api/v1/: create (shown once), revoke, authenticate, list.

A token is ``gpp_`` + ``secrets.token_urlsafe(32)`` (256 random bits, 43 characters). Only its
SHA-256 in hex is stored (ApiToken.token_hash): with 256 random bits no hash can be reversed by
guessing, so a fast hash is the right one, and each API call costs one indexed lookup, where
a password hash (PBKDF2, Argon2) would add tens of milliseconds to every request. The token
text is never stored, logged nor audited; the audit keeps its name, scope and prefix.

Errors raised: TokenError (refused input: the message says why, for the form or a 400),
ApiToken.DoesNotExist (revoke of a token that is not the user's: a 404).
"""

import hashlib
import re
import secrets
from datetime import datetime, timedelta

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import QuerySet

from common.validation import text_problem
from teams.audit import audit_record
from teams.models import ApiScope, ApiToken

TOKEN_PREFIX = "gpp_"
TOKEN_BYTES = 32  # 256 bits; token_urlsafe(32) is 43 characters.
TOKEN_PATTERN = re.compile(r"gpp_[A-Za-z0-9_-]{43}")
DISPLAY_CHARS = 8  # ApiToken.prefix: the first characters after "gpp_".
NAME_MAX = 64
DAYS_MIN, DAYS_MAX = 1, 365
# Unrevoked, unexpired tokens one user may hold: far more than laptops and pipelines need,
# and a bound on what a script gone wrong can pile up.
ACTIVE_MAX = 50
# last_used_at is written at most this often per token: a minute's precision is enough for
# the page, and most requests then cost no write.
LAST_USED_EVERY = timedelta(minutes=1)


class TokenError(Exception):
    """Refused token input (name, scope, expiry, too many tokens); str() says why."""


def token_hash(token: str) -> str:
    """SHA-256 of the token text, 64 hex characters (what ApiToken.token_hash holds)."""
    return hashlib.sha256(token.encode()).hexdigest()


def _clean_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise TokenError("Give the token a name, e.g. the laptop or pipeline that uses it.")
    name = name.strip()
    if len(name) > NAME_MAX:
        raise TokenError(f"Use at most {NAME_MAX} characters for the name.")
    problem = text_problem(name)
    if problem:
        raise TokenError(f"Use printable text only. {problem}")
    return name


def _clean_days(days: object) -> int:
    if isinstance(days, bool) or not isinstance(days, int) or not DAYS_MIN <= days <= DAYS_MAX:
        raise TokenError(f"The expiry is a whole number of days from {DAYS_MIN} to {DAYS_MAX}.")
    return days


def _audit_fields(token: ApiToken) -> dict[str, str]:
    return {
        "user": token.user.username,
        "name": token.name,
        "scope": token.scope,
        "prefix": token.prefix,
        "expires_at": token.expires_at.isoformat(),
    }


def api_token_create(
    *, user: User, name: str, scope: str, expires_in_days: int, now: datetime
) -> tuple[ApiToken, str]:
    """A new token of ``user``: (the stored ApiToken, the token text). The text is returned
    this once and kept nowhere. ``scope`` is "read" or "write"; ``expires_in_days`` 1..365
    from ``now``. Audited ("api_token.create"). Raises TokenError for bad input or when the
    user already holds ACTIVE_MAX live tokens."""
    name = _clean_name(name)
    if scope not in ApiScope.values:
        raise TokenError("The scope is read or write.")
    days = _clean_days(expires_in_days)
    text = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
    with transaction.atomic():
        # Locks the user's row: two creates at once cannot both pass the cap.
        User.objects.select_for_update().filter(pk=user.pk).first()
        if api_token_list(user=user).filter(expires_at__gt=now).count() >= ACTIVE_MAX:
            raise TokenError(f"You hold {ACTIVE_MAX} tokens already: revoke one you do not use.")
        token = ApiToken.objects.create(
            user=user,
            name=name,
            scope=scope,
            token_hash=token_hash(text),
            prefix=text[len(TOKEN_PREFIX) :][:DISPLAY_CHARS],
            created_at=now,
            expires_at=now + timedelta(days=days),
        )
        after = _audit_fields(token)
        audit_record(
            actor=user,
            team=None,
            action="api_token.create",
            obj=token,
            before={},
            after=after,
            now=now,
        )
    return token, text


def api_token_revoke(*, user: User, token_id: int, now: datetime) -> ApiToken:
    """Revoke ``user``'s token ``token_id`` from ``now`` on; audited ("api_token.revoke").
    Revoking a revoked token changes nothing. Raises ApiToken.DoesNotExist when the token is
    not the user's (another user's token is as unknown as a missing one)."""
    with transaction.atomic():
        token = ApiToken.objects.select_for_update().get(pk=token_id, user=user)
        if token.revoked_at is not None:
            return token
        token.revoked_at = now
        token.save(update_fields=["revoked_at"])
        fields = _audit_fields(token)
        audit_record(
            actor=user,
            team=None,
            action="api_token.revoke",
            obj=token,
            before=fields,
            after=fields | {"revoked_at": now.isoformat()},
            now=now,
        )
    return token


def api_token_authenticate(*, token: str, now: datetime) -> ApiToken | None:
    """The live token with this text (its ``user`` loaded), or None: unknown, malformed,
    expired, revoked, or its user deactivated. Records the use in last_used_at, at most once
    per LAST_USED_EVERY."""
    if not TOKEN_PATTERN.fullmatch(token):
        return None  # Not one of ours: no query.
    found = (
        ApiToken.objects.select_related("user")
        .filter(token_hash=token_hash(token), revoked_at=None, expires_at__gt=now)
        .first()
    )
    if found is None or not found.user.is_active:
        return None
    if found.last_used_at is None or now - found.last_used_at >= LAST_USED_EVERY:
        # Conditional, so concurrent requests write once; a later time only moves it forward.
        ApiToken.objects.filter(pk=found.pk, last_used_at=found.last_used_at).update(
            last_used_at=now
        )
        found.last_used_at = now
    return found


def api_token_list(*, user: User) -> QuerySet[ApiToken]:
    """``user``'s unrevoked tokens, newest first (expired ones included: the page says so)."""
    return ApiToken.objects.filter(user=user, revoked_at=None).order_by("-created_at", "-id")
