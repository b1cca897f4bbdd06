"""OpenID Connect against Microsoft Entra ID: the authorization code flow with PKCE, the ID
token's validation, and the portal's own Graph token (client credentials).

Authlib (OAuth2Session) builds the authorize URL with state, nonce and the S256 challenge and
redeems the code; PyJWT validates the ID token. Sources: "OpenID Connect on the Microsoft
identity platform", "Microsoft identity platform ID token claims reference", RFC 7636 (PKCE).
Endpoints come from the tenant's discovery document at
``{ENTRA_AUTHORITY}/{ENTRA_TENANT_ID}/v2.0/.well-known/openid-configuration``: production and
the emulator differ only in ENTRA_AUTHORITY.

Errors: every refusal is SignInError, whose message is safe to show and to log (it never
carries a token, a code or the secret).
"""

import hmac
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import jwt
import requests
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session
from django.conf import settings
from django.core.cache import cache

log = logging.getLogger(__name__)
SCOPE = "openid profile email"
GRAPH_SCOPE = "https://graph.microsoft.com/.default"
DISCOVERY_SECONDS = 24 * 3600  # Entra's discovery document changes rarely; keys rotate.
_lock = threading.Lock()
_discovery: dict[str, tuple[float, dict[str, Any]]] = {}  # URL -> (fetched at, document)
_jwks: dict[str, dict[str, jwt.PyJWK]] = {}  # jwks_uri -> kid -> key


class SignInError(Exception):
    """A refused sign-in; str() is the reason, fit for the login page and the log."""

    status = 400


class EntraUnavailable(SignInError):
    """Entra ID or Graph did not answer (or not sensibly): nothing the user did wrong."""

    status = 503


@dataclass(frozen=True)
class Flow:
    """What the session keeps between the redirect to Entra ID and the callback."""

    state: str
    nonce: str
    verifier: str

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "nonce": self.nonce, "verifier": self.verifier}


def enabled() -> bool:
    return bool(settings.ENTRA_TENANT_ID and settings.ENTRA_CLIENT_ID)


def _get_json(url: str) -> dict[str, Any]:
    try:
        response = requests.get(url, timeout=settings.ENTRA_HTTP_TIMEOUT)
        response.raise_for_status()
        document: dict[str, Any] = response.json()
        return document
    except (requests.RequestException, ValueError) as err:
        reason = "Microsoft Entra ID could not be reached; try again shortly."
        raise EntraUnavailable(reason) from err


def discovery() -> dict[str, Any]:
    """The tenant's discovery document (cached a day); its issuer must name the tenant."""
    url = (
        f"{settings.ENTRA_AUTHORITY.rstrip('/')}/{settings.ENTRA_TENANT_ID}"
        "/v2.0/.well-known/openid-configuration"
    )
    fetched = _discovery.get(url)
    if fetched is None or time.monotonic() - fetched[0] > DISCOVERY_SECONDS:
        doc = _get_json(url)
        if settings.ENTRA_TENANT_ID not in str(doc.get("issuer", "")):
            raise SignInError("Microsoft Entra ID answered for another tenant.")
        fetched = _discovery[url] = (time.monotonic(), doc)
    return fetched[1]


def _fetch_jwks(uri: str) -> dict[str, jwt.PyJWK]:
    keys = jwt.PyJWKSet.from_dict(_get_json(uri)).keys
    found = {k.key_id: k for k in keys if k.key_id}
    with _lock:
        _jwks[uri] = found
    return found


def signing_key(kid: str, *, refetch: bool = True) -> jwt.PyJWK:
    """The tenant's key `kid`; an unknown kid refetches the JWKS once (key rotation), unless
    `refetch` is False."""
    uri = discovery()["jwks_uri"]
    key = _jwks.get(uri, {}).get(kid)
    if key is None and (refetch or uri not in _jwks):
        key = _fetch_jwks(uri).get(kid)
    if key is None:
        raise SignInError("The sign-in token was signed with a key Entra ID does not list.")
    return key


def forget_cached() -> None:
    """Drop the cached discovery documents and keys (tests; a changed ENTRA_AUTHORITY)."""
    with _lock:
        _discovery.clear()
        _jwks.clear()


def _session(**kwargs: Any) -> OAuth2Session:
    return OAuth2Session(
        settings.ENTRA_CLIENT_ID,
        settings.ENTRA_CLIENT_SECRET,
        timeout=settings.ENTRA_HTTP_TIMEOUT,
        **kwargs,
    )


def authorize_url(*, redirect_uri: str) -> tuple[str, Flow]:
    """(the Entra ID URL to send the browser to, the Flow to keep in the session)."""
    flow = Flow(generate_token(32), generate_token(32), generate_token(64))
    client = _session(scope=SCOPE, redirect_uri=redirect_uri, code_challenge_method="S256")
    url, _ = client.create_authorization_url(
        discovery()["authorization_endpoint"],
        state=flow.state,
        nonce=flow.nonce,
        code_verifier=flow.verifier,
    )
    return url, flow


def code_redeem(*, code: str, flow: Flow, redirect_uri: str) -> str:
    """The ID token for `code` (the token endpoint, with the PKCE verifier)."""
    client = _session(redirect_uri=redirect_uri)
    try:
        token = client.fetch_token(
            discovery()["token_endpoint"], code=code, code_verifier=flow.verifier
        )
    except Exception as err:  # Authlib's OAuthError or requests': the reason, not the body.
        log.warning("Entra ID refused the code: %s", getattr(err, "error", type(err).__name__))
        raise SignInError("Microsoft Entra ID did not accept the sign-in; try again.") from err
    if not token.get("id_token"):
        raise SignInError("Microsoft Entra ID returned no ID token.")
    return str(token["id_token"])


def id_token_claims(token: str, *, nonce: str) -> dict[str, Any]:
    """The claims of a valid ID token: RS256 by a key of the tenant's JWKS, iss the discovery
    document's, aud the client id, exp/nbf/iat within ENTRA_LEEWAY_SECONDS, tid the tenant,
    nonce the flow's and never seen before. SignInError otherwise."""
    try:
        kid = jwt.get_unverified_header(token).get("kid", "")
        claims = jwt.decode(
            token,
            signing_key(str(kid)),
            algorithms=["RS256"],
            audience=settings.ENTRA_CLIENT_ID,
            issuer=discovery()["issuer"],
            leeway=settings.ENTRA_LEEWAY_SECONDS,
            options={"require": ["exp", "nbf", "iat", "iss", "aud", "oid", "tid", "nonce"]},
        )
    except jwt.InvalidTokenError as err:
        log.warning("Entra ID token refused: %s", type(err).__name__)
        raise SignInError(_REASONS.get(type(err), "The sign-in token is not valid.")) from err
    try:
        claims["oid"] = str(uuid.UUID(str(claims["oid"])))
    except ValueError:
        raise SignInError("The sign-in token names no valid user.") from None
    if claims["tid"] != settings.ENTRA_TENANT_ID:
        raise SignInError("The sign-in token is for another tenant.")
    if not hmac.compare_digest(str(claims["nonce"]), nonce):
        raise SignInError("The sign-in token belongs to another sign-in.")
    # Single use, for as long as the token could be valid: a replayed token is refused.
    if not cache.add(f"entra:nonce:{nonce}", 1, timeout=24 * 3600):
        raise SignInError("This sign-in was already used; sign in again.")
    return claims


_REASONS = {
    jwt.ExpiredSignatureError: "The sign-in token has expired; sign in again.",
    jwt.ImmatureSignatureError: "The sign-in token is not valid yet; check the server's clock.",
    jwt.InvalidAudienceError: "The sign-in token is for another application.",
    jwt.InvalidIssuerError: "The sign-in token was issued by another tenant.",
    jwt.InvalidSignatureError: "The sign-in token's signature is not valid.",
}


def state_matches(flow: Flow | None, state: str) -> bool:
    return flow is not None and hmac.compare_digest(flow.state, state)


def graph_token() -> str:
    """The portal's own Graph token (client credentials, GroupMember.Read.All and
    User.Read.All as application permissions)."""
    client = _session(scope=GRAPH_SCOPE)
    try:
        token = client.fetch_token(discovery()["token_endpoint"], grant_type="client_credentials")
    except Exception as err:
        log.warning("Entra ID refused the portal's Graph token: %s", type(err).__name__)
        raise EntraUnavailable("Microsoft Graph could not be asked for your groups.") from err
    return str(token["access_token"])


def member_groups(*, oid: str) -> list[str]:
    """The ids of the groups `oid` belongs to, transitively, from Graph's
    POST /v1.0/users/{oid}/getMemberObjects (the groups overage: the ID token had too many)."""
    url = f"{settings.ENTRA_GRAPH_ENDPOINT.rstrip('/')}/v1.0/users/{oid}/getMemberObjects"
    try:
        response = requests.post(
            url,
            json={"securityEnabledOnly": True},
            headers={"Authorization": f"Bearer {graph_token()}"},
            timeout=settings.ENTRA_HTTP_TIMEOUT,
        )
        response.raise_for_status()
        return [str(g) for g in response.json()["value"]]
    except (requests.RequestException, ValueError, KeyError, TypeError) as err:
        log.warning("Graph getMemberObjects failed: %s", type(err).__name__)
        raise EntraUnavailable("Microsoft Graph could not be asked for your groups.") from err


def token_groups(claims: dict[str, Any]) -> list[str]:
    """The user's group ids: the `groups` claim, or Graph's answer when the token carries the
    overage claims (`_claim_names.groups`) instead. The overage's own endpoint is not called:
    Microsoft says to ask Graph, whose address is ENTRA_GRAPH_ENDPOINT."""
    if "groups" in (claims.get("_claim_names") or {}):
        return member_groups(oid=claims["oid"])
    groups = claims.get("groups") or []
    if not isinstance(groups, list):
        raise SignInError("The sign-in token's groups are not a list.")
    return [str(g) for g in groups]
