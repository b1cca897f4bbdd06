"""Entra ID access tokens for the portal's own API: how a pipeline's managed identity (or a
user's delegated token) calls /api/v1/ without a personal access token.

A token is accepted when it is RS256-signed by a key of the tenant's JWKS (the discovery
document and keys of teams.entra_oidc, cached the same way), its ``aud`` is the portal's
``api://{ENTRA_CLIENT_ID}`` or the client id itself (Entra's v2.0 tokens name the client id),
its ``iss`` the tenant's v2.0 issuer, ``tid`` the tenant, and ``exp``/``nbf`` hold within
ENTRA_LEEWAY_SECONDS. It must be an access token, not an ID token (whose ``aud`` is the client
id too, so a token from a user's sign-in would otherwise pass): delegated tokens carry ``scp``,
app-only ones ``idtyp`` "app" (the optional claim docs/api-tokens.md asks for) or, without
``idtyp``, ``azp`` and ``roles`` (an ID token has no ``azp``); a token carrying a ``nonce``
(an ID token's replay guard) is refused whatever it holds. Its ``oid`` must be the Entra
sign-in identity of an active portal user (Profile.signin_object_id): for a managed identity,
a service account an operator created with ``manage.py api_service_account``
(docs/api-tokens.md). Scope: "write" when the app-only
``roles`` or the delegated ``scp`` hold WRITE_PERMISSION, else "read".

Off (every JWT refused) unless ENTRA_TENANT_ID and ENTRA_CLIENT_ID are set.

Errors raised: AccessTokenRefused (a 401; str() is safe to show and log, never the token),
entra_oidc.EntraUnavailable (Entra ID's keys could not be fetched: a 503).
"""

import logging
import uuid
from dataclasses import dataclass
from typing import Any

import jwt
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache

from teams import entra_oidc
from teams.models import ApiScope, Profile

log = logging.getLogger(__name__)
WRITE_PERMISSION = "Workspaces.ReadWrite"  # The app role (app-only) or scope (delegated).
# An unknown kid refetches the JWKS at most this often: a stream of made-up kids must not turn
# each request into a call to Entra ID.
REFETCH_SECONDS = 60
_REFETCH_KEY = "entra:api-jwks-refetch"
_REQUIRED = ["exp", "nbf", "iat", "iss", "aud", "oid", "tid"]


class AccessTokenRefused(Exception):
    """An Entra ID token the API does not accept; str() says why (no token text)."""


@dataclass(frozen=True)
class EntraCaller:
    user: User
    scope: str  # "read" | "write"
    oid: str


def enabled() -> bool:
    return entra_oidc.enabled()


def audiences() -> list[str]:
    """The ``aud`` values of a token for the portal's API."""
    return [f"api://{settings.ENTRA_CLIENT_ID}", settings.ENTRA_CLIENT_ID]


UNLISTED_KEY = "The token was signed with a key Entra ID does not list."


def _key(token: str) -> jwt.PyJWK:
    """The tenant's key for the token's kid. An unknown kid refetches the JWKS (a rotation)
    at most once per REFETCH_SECONDS, across workers (the cache)."""
    kid = str(jwt.get_unverified_header(token).get("kid", ""))
    for refetch in (False, True):
        if refetch and not cache.add(_REFETCH_KEY, 1, timeout=REFETCH_SECONDS):
            break
        try:
            return entra_oidc.signing_key(kid, refetch=refetch)
        except entra_oidc.EntraUnavailable:
            raise
        except entra_oidc.SignInError:
            continue
    raise AccessTokenRefused(UNLISTED_KEY)


def access_token_claims(token: str) -> dict[str, Any]:
    """The claims of a valid access token for the portal's API (see the module docstring);
    ``oid`` normalised to a lower-case UUID. Raises AccessTokenRefused, EntraUnavailable."""
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            _key(token),
            algorithms=["RS256"],
            audience=audiences(),
            issuer=entra_oidc.discovery()["issuer"],
            leeway=settings.ENTRA_LEEWAY_SECONDS,
            options={"require": _REQUIRED},
        )
    except jwt.InvalidTokenError as err:
        log.info("Entra ID API token refused: %s", type(err).__name__)
        raise AccessTokenRefused(_REASONS.get(type(err), "The token is not valid.")) from None
    if claims["tid"] != settings.ENTRA_TENANT_ID:
        raise AccessTokenRefused("The token is for another tenant.")
    _require_access_token(claims)
    try:
        claims["oid"] = str(uuid.UUID(str(claims["oid"])))
    except ValueError:
        raise AccessTokenRefused("The token names no valid identity.") from None
    return claims


NOT_ACCESS = "Send an access token for the portal's API, not an ID token."


def _require_access_token(claims: dict[str, Any]) -> None:
    """Raise AccessTokenRefused unless ``claims`` are an access token's: no ``nonce``, and
    ``scp`` (delegated, ``idtyp`` "user" if given) or ``idtyp`` "app" (app-only; without
    ``idtyp``, an ``azp`` and a ``roles`` list, as Entra issues them by default)."""
    idtyp = claims.get("idtyp")
    delegated = isinstance(claims.get("scp"), str) and bool(claims["scp"].strip())
    if "nonce" in claims:
        raise AccessTokenRefused(NOT_ACCESS)
    if delegated and idtyp in (None, "user"):
        return
    if not delegated and idtyp == "app":
        return
    if (
        not delegated
        and idtyp is None
        and claims.get("azp")
        and isinstance(claims.get("roles"), list)
    ):
        return
    raise AccessTokenRefused(NOT_ACCESS)


def token_scope(claims: dict[str, Any]) -> str:
    """ "write" when the token's app roles or delegated scopes hold WRITE_PERMISSION."""
    roles = claims.get("roles")
    granted = [str(r) for r in roles] if isinstance(roles, list) else []
    granted += str(claims.get("scp") or "").split()
    return ApiScope.WRITE if WRITE_PERMISSION in granted else ApiScope.READ


def entra_caller(*, token: str) -> EntraCaller:
    """The portal user and scope of an Entra ID access token. Raises AccessTokenRefused when
    the token is not valid or its oid is no active user's sign-in identity, EntraUnavailable
    when Entra ID's keys cannot be fetched."""
    if not enabled():
        raise AccessTokenRefused("Entra ID tokens are not accepted here.")
    claims = access_token_claims(token)
    profile = Profile.objects.select_related("user").filter(signin_object_id=claims["oid"]).first()
    if profile is None or not profile.user.is_active:
        log.info("Entra ID API token for an unknown identity %s", claims["oid"])
        raise AccessTokenRefused("The token's identity is not a user of the portal.")
    return EntraCaller(profile.user, token_scope(claims), claims["oid"])


_REASONS: dict[type[Exception], str] = {
    jwt.ExpiredSignatureError: "The token has expired.",
    jwt.ImmatureSignatureError: "The token is not valid yet; check the server's clock.",
    jwt.InvalidAudienceError: "The token is for another application.",
    jwt.InvalidIssuerError: "The token was issued by another tenant.",
    jwt.InvalidSignatureError: "The token's signature is not valid.",
    jwt.MissingRequiredClaimError: "The token lacks a required claim.",
}
