"""Entra ID's OpenID Connect endpoints: discovery, JWKS, authorize and token.

Shapes follow login.microsoftonline.com's v2.0 endpoints ("OpenID Connect on the Microsoft
identity platform", "authorization code flow", "client credentials flow"); error codes are
its AADSTS codes. The authorize page lists the directory's users to pick one (no password);
POST it back and the browser goes to redirect_uri?code=...&state=...
"""

import html
import secrets
import time
import urllib.parse

from ..protocol import Request, Response
from . import tokens
from .directory import DOMAIN, Directory, Grant
from .grants import client_grant, code_grant, form, known_client
from .replies import token_error, token_fault

DISABLED = "AADSTS50057: The user account is disabled."
CODE_LIFETIME = 600  # Seconds an authorization code may wait to be redeemed.
TOKEN_OP = "entra.token"
PAGE_USERS = 50  # Identities listed on the authorize page; others are typed.


def _directory(cloud, tenant: str) -> Directory:
    d = cloud.entra
    if tenant.lower() not in (d.tenant, DOMAIN, "organizations", "common"):
        text = f"Tenant '{tenant}' not found. Check to make sure you have the correct tenant ID."
        raise token_error(400, "invalid_tenant", 90002, text)
    return d


# The fields of login.microsoftonline.com's v2.0 discovery document that do not name a URL.
DISCOVERY_FIXED = {
    "token_endpoint_auth_methods_supported": [
        "client_secret_post",
        "private_key_jwt",
        "client_secret_basic",
    ],
    "response_modes_supported": ["query", "fragment", "form_post"],
    "subject_types_supported": ["pairwise"],
    "id_token_signing_alg_values_supported": ["RS256"],
    "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
    "scopes_supported": ["openid", "profile", "email", "offline_access"],
    "request_uri_parameter_supported": False,
    "http_logout_supported": True,
    "frontchannel_logout_supported": True,
    "claims_supported": [
        *("sub", "iss", "cloud_instance_name", "cloud_instance_host_name"),
        *("cloud_graph_host_name", "msgraph_host", "aud", "exp", "iat", "auth_time", "acr"),
        *("nonce", "preferred_username", "name", "tid", "ver", "at_hash", "c_hash", "email"),
    ],
    "tenant_region_scope": "NA",
    "cloud_instance_name": "microsoftonline.com",
    "cloud_graph_host_name": "graph.windows.net",
    "rbac_url": "https://pas.windows.net",
}


def discovery(cloud, req: Request, tenant: str) -> Response:
    """GET /{tenant}/v2.0/.well-known/openid-configuration: login.microsoftonline.com's fields,
    its URLs on the emulator (userinfo, devicecode and logout are named but not served)."""
    d, base = _directory(cloud, tenant), req.base_url
    root = f"{base}/{d.tenant}"
    urls = {
        "issuer": tokens.issuer(base, d.tenant),
        "authorization_endpoint": f"{root}/oauth2/v2.0/authorize",
        "token_endpoint": f"{root}/oauth2/v2.0/token",
        "jwks_uri": f"{root}/discovery/v2.0/keys",
        "userinfo_endpoint": f"{base}/oidc/userinfo",
        "device_authorization_endpoint": f"{root}/oauth2/v2.0/devicecode",
        "end_session_endpoint": f"{root}/oauth2/v2.0/logout",
        "msgraph_host": urllib.parse.urlsplit(base).netloc,
    }
    return Response(200, {**DISCOVERY_FIXED, **urls})


def jwks(cloud, req: Request, tenant: str) -> Response:
    """GET /{tenant}/discovery/v2.0/keys: {"keys": [{"kty", "use", "kid", "x5t", "n", "e"}]}."""
    return Response(200, _directory(cloud, tenant).keys.jwks())


def _page(d: Directory, params: dict) -> bytes:
    hidden = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
        for k, v in params.items()
    )
    buttons = "".join(
        f'<li><button name="login_hint" value="{html.escape(u.upn)}">'
        f"{html.escape(u.display_name)} ({html.escape(u.upn)})"
        f"{'' if u.enabled else ' - disabled'}</button></li>"
        for u in list(d.users.values())[:PAGE_USERS]
    )
    typed = '<input name="login_hint" placeholder="user@example.org"><button>Sign in</button>'
    return (
        "<!doctype html><title>Sign in (cloudsim Entra ID)</title><h1>Pick an account</h1>"
        f'<form method="post">{hidden}<ul>{buttons}</ul></form>'
        f'<form method="post">{hidden}{typed}</form>'
    ).encode()


def _check_authorize(d: Directory, params: dict) -> None:
    known_client(d, params)
    if params.get("response_type") != "code" or not params.get("redirect_uri"):
        raise token_error(
            400,
            "invalid_request",
            900144,
            "The request body must contain response_type=code and a redirect_uri.",
        )
    if params.get("code_challenge") and params.get("code_challenge_method", "plain") != "S256":
        raise token_error(400, "invalid_request", 50149, "Invalid Code_Challenge_method parameter.")


def authorize_page(cloud, req: Request, tenant: str) -> Response:
    """GET .../authorize?client_id&response_type=code&redirect_uri&scope&state&nonce
    &code_challenge&code_challenge_method=S256: the identity picker (HTML)."""
    d = _directory(cloud, tenant)
    _check_authorize(d, req.query)
    return Response(200, _page(d, dict(req.query)), {"Content-Type": "text/html; charset=utf-8"})


def authorize(cloud, req: Request, tenant: str) -> Response:
    """POST the picker's form (its hidden fields + login_hint=UPN): 302 to
    redirect_uri?code&state, or ?error=access_denied&error_description=AADSTS50057 (disabled)
    or AADSTS50034 (no such user)."""
    d = _directory(cloud, tenant)
    params = {**req.query, **dict(urllib.parse.parse_qsl(req.body.decode(errors="replace")))}
    _check_authorize(d, params)
    user = d.user(params.get("login_hint", ""))
    answer = {"state": params.get("state", "")}
    if user is None:
        why = f"AADSTS50034: The user account {params.get('login_hint', '')} does not exist."
        answer |= {"error": "access_denied", "error_description": why}
    elif not user.enabled:
        answer |= {"error": "access_denied", "error_description": DISABLED}
    else:
        now, code = time.time(), secrets.token_urlsafe(48)
        d.codes = {c: g for c, g in d.codes.items() if g.expires > now}  # Forget stale codes.
        d.codes[code] = Grant(
            user.id,
            params["client_id"],
            params["redirect_uri"],
            params.get("scope", ""),
            params.get("nonce", ""),
            params.get("code_challenge", ""),
            params.get("code_challenge_method", ""),
            now + CODE_LIFETIME,
        )
        answer = {"code": code, **answer}
    sep = "&" if "?" in params["redirect_uri"] else "?"
    location = params["redirect_uri"] + sep + urllib.parse.urlencode(answer)
    return Response(302, None, {"Location": location})


def token(cloud, req: Request, tenant: str) -> Response:
    """POST .../token (form): grant_type authorization_code or client_credentials.

    200 {"token_type": "Bearer", "scope", "expires_in", "ext_expires_in", "access_token",
    "id_token" (authorization_code with openid)}; errors as replies.token_error."""
    d = _directory(cloud, tenant)
    fault = cloud.take_fault(TOKEN_OP, frozenset({"throttle", "server_error", "unavailable"}))
    if fault is not None:
        raise token_fault(fault.kind, fault.retry_after)
    params = form(req)
    grant = params.get("grant_type")
    if grant == "authorization_code":
        return code_grant(d, req.base_url, params)
    if grant == "client_credentials":
        return client_grant(d, req.base_url, params)
    text = f"The provided value for the input parameter 'grant_type' is not valid: {grant!r}."
    raise token_error(400, "unsupported_grant_type", 70003, text)
