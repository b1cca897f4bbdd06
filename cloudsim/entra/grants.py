"""The token endpoint's grants: authorization_code (with PKCE S256) and client_credentials.

Refusals carry Entra's AADSTS codes: 70008 (unknown or expired code), 54005 (code already
redeemed), 500112 (redirect_uri differs), 501481 (code_verifier does not match), 50057
(disabled user), 1002012 (client_credentials without a /.default scope), 500011 (a /.default
scope naming no app of the tenant).

client_credentials scopes: https://graph.microsoft.com/.default (a Graph app token, v1.0), or
api://{client id}/.default or {client id}/.default (a v2.0 app token for that app's API,
tokens.api_app_token: how a pipeline's managed identity or service principal calls the portal).
"""

import base64
import hashlib
import time
import urllib.parse

from ..protocol import Request, Response
from . import tokens
from .directory import Directory, Grant
from .replies import token_error


def known_client(d: Directory, params: dict) -> str:
    client_id = params.get("client_id", "")
    if client_id not in d.clients:
        text = (
            f"Application with identifier '{client_id}' was not found in the directory "
            f"'{d.tenant}'."
        )
        raise token_error(400, "unauthorized_client", 700016, text)
    return client_id


def form(req: Request) -> dict:
    params = dict(urllib.parse.parse_qsl(req.body.decode(errors="replace")))
    auth = req.headers.get("authorization", "")
    if auth.lower().startswith("basic "):
        try:
            raw = base64.b64decode(auth[6:], validate=True).decode()
        except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors.
            text = "Malformed client credentials."
            raise token_error(401, "invalid_client", 7000215, text) from None
        client_id, _, secret = raw.partition(":")
        params.setdefault("client_id", urllib.parse.unquote_plus(client_id))
        params.setdefault("client_secret", urllib.parse.unquote_plus(secret))
    return params


def check_secret(d: Directory, client_id: str, params: dict, required: bool) -> None:
    secret = params.get("client_secret")
    if secret is None and not required:
        return
    if secret != d.clients[client_id]:
        text = (
            "Invalid client secret provided. Ensure the secret being sent in the request is "
            "the client secret value, not the client secret ID."
        )
        raise token_error(401, "invalid_client", 7000215, text)


def _bad_grant(code: int, text: str):
    return token_error(400, "invalid_grant", code, text)


def _pkce_ok(grant: Grant, verifier: str) -> bool:
    if not grant.challenge:
        return True
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=") == grant.challenge


def _redeem(d: Directory, params: dict) -> Grant:
    client_id = known_client(d, params)
    check_secret(d, client_id, params, required=False)
    grant = d.codes.get(params.get("code", ""))
    if grant is None or grant.expires < time.time() or grant.client_id != client_id:
        raise _bad_grant(
            70008,
            "The provided authorization code or refresh token has expired "
            "due to inactivity. Send a new interactive authorization request.",
        )
    if grant.redeemed:
        raise _bad_grant(
            54005,
            "OAuth2 Authorization code was already redeemed, please retry "
            "with a new valid code or use an existing refresh token.",
        )
    grant.redeemed = True  # Even a failed redemption spends the code, as Entra does.
    if params.get("redirect_uri") != grant.redirect_uri:
        raise _bad_grant(
            500112,
            "The reply address does not match the reply address provided "
            "when requesting Authorization code.",
        )
    if not _pkce_ok(grant, params.get("code_verifier", "")):
        raise _bad_grant(
            501481,
            "The Code_Verifier does not match the code_challenge supplied "
            "in the authorization request.",
        )
    return grant


def code_grant(d: Directory, base: str, params: dict) -> Response:
    grant = _redeem(d, params)
    user = d.users.get(grant.user_id)
    if user is None or not user.enabled:
        raise _bad_grant(50057, "The user account is disabled.")
    body = {
        "token_type": "Bearer",
        "scope": grant.scope,
        "expires_in": tokens.LIFETIME,
        "ext_expires_in": tokens.LIFETIME,
        "access_token": tokens.user_access_token(d, base, user, grant.client_id, grant.scope),
    }
    if "openid" in grant.scope.split():
        body["id_token"] = tokens.id_token(d, base, user, grant.client_id, grant.nonce)
    return Response(200, body, {"Cache-Control": "no-store", "Pragma": "no-cache"})


def _api_resource(d: Directory, scope: str) -> str | None:
    """The client id of the app whose API ``scope`` (api://{id}/.default or {id}/.default)
    names; None when it names no API. Raises 500011 for an app the tenant does not have."""
    if not scope.endswith("/.default"):
        return None
    resource = scope.removesuffix("/.default")
    client_id = resource.removeprefix("api://")
    if client_id in d.clients:
        return client_id
    text = (
        f"The resource principal named {resource} was not found in the tenant named "
        f"{d.tenant}. This can happen if the application has not been installed by the "
        "administrator of the tenant or consented to by any user in the tenant. You might "
        "have sent your authentication request to the wrong tenant."
    )
    raise token_error(400, "invalid_resource", 500011, text)


def client_grant(d: Directory, base: str, params: dict) -> Response:
    client_id = known_client(d, params)
    check_secret(d, client_id, params, required=True)
    scope = params.get("scope", "")
    if scope.rstrip("/") in ("https://graph.microsoft.com/.default", f"{base}/.default"):
        access = tokens.app_token(d, base, client_id)
    elif (resource := _api_resource(d, scope.strip())) is not None:
        access = tokens.api_app_token(d, base, d.apps[client_id], resource)
    else:
        text = (
            f"The provided value for scope {scope} is not valid. Client credential flows "
            "must have a scope value with /.default suffixed to the resource identifier "
            "(application ID URI)."
        )
        raise token_error(400, "invalid_scope", 1002012, text)
    body = {
        "token_type": "Bearer",
        "expires_in": tokens.LIFETIME,
        "ext_expires_in": tokens.LIFETIME,
        "access_token": access,
    }
    return Response(200, body, {"Cache-Control": "no-store", "Pragma": "no-cache"})
