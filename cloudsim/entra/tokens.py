"""Claims of the tokens the emulated tenant issues, signed by directory.keys (PyJWT).

ID token (v2.0; Microsoft's "ID token claims reference"): aud (the client id), iss
"{base}/{tid}/v2.0" (login.microsoftonline.com's form, on the emulator's URL), iat, nbf, exp,
name, oid, preferred_username, sub, tid, ver "2.0", nonce, roles, groups. Past the directory's
group_limit (200, as Entra for JWTs) the overage form replaces groups:
"_claim_names": {"groups": "src1"}, "_claim_sources": {"src1": {"endpoint": ".../getMemberObjects"}}
(Entra's endpoint is the retired graph.windows.net; clients call Microsoft Graph's
getMemberObjects, which is what the emulator's endpoint points at).

App token (client_credentials for https://graph.microsoft.com/.default; v1.0 as Graph's are):
aud "https://graph.microsoft.com", iss "{base}/{tid}/", appid, idtyp "app", oid, roles, tid.

App token for an app's own API (client_credentials for api://{client id}/.default; v2.0, as an
app registration whose manifest asks for v2 tokens, requestedAccessTokenVersion 2; Microsoft's
"Access token claims reference"): aud the API's client id (v2 tokens always name the client
id, never the App ID URI), iss "{base}/{tid}/v2.0", iat, nbf, exp, azp (the caller's client
id), azpacr "1" (a client secret), idtyp "app", oid and sub (the caller's service principal),
roles (its app roles on the API; absent when it holds none), tid, uti, ver "2.0".
"""

import hashlib
import time
import uuid

from .directory import App, Directory, User

LIFETIME = 3600  # Seconds; Entra's default is 60-90 minutes.
GRAPH_AUDIENCE = "https://graph.microsoft.com"
GRAPH_APP_ROLES = ["User.Read.All", "GroupMember.Read.All"]


def issuer(base: str, tenant: str) -> str:
    return f"{base}/{tenant}/v2.0"


def _times(now: float) -> dict:
    now = int(now)
    return {"iat": now, "nbf": now, "exp": now + LIFETIME}


def _sub(user: User, client_id: str) -> str:
    # Pairwise per app, as Entra's sub; oid is the stable id across apps.
    digest = hashlib.sha256(f"{user.id}:{client_id}".encode()).digest()
    return digest[:32].hex()


def id_token(d: Directory, base: str, user: User, client_id: str, nonce: str, now=None) -> str:
    now = time.time() if now is None else now
    claims = {
        "aud": client_id,
        "iss": issuer(base, d.tenant),
        **_times(now),
        "name": user.display_name,
        "oid": user.id,
        "preferred_username": user.upn,
        "upn": user.upn,
        "sub": _sub(user, client_id),
        "tid": d.tenant,
        "uti": uuid.uuid4().hex[:22],
        "ver": "2.0",
        "roles": list(user.roles),
    }
    if nonce:
        claims["nonce"] = nonce
    claims.update(group_claims(d, base, user))
    return d.keys.sign(claims)


def group_claims(d: Directory, base: str, user: User) -> dict:
    """{"groups": [...]} or, past d.group_limit, the overage claims."""
    groups = d.groups_of(user.id)
    if len(groups) <= d.group_limit:
        return {"groups": groups}
    endpoint = f"{base}/v1.0/users/{user.id}/getMemberObjects"
    return {
        "_claim_names": {"groups": "src1"},
        "_claim_sources": {"src1": {"endpoint": endpoint}},
    }


def user_access_token(d: Directory, base: str, user: User, client_id: str, scope: str) -> str:
    """A delegated Graph token (scp), as Entra returns beside the ID token."""
    claims = {
        "aud": GRAPH_AUDIENCE,
        "iss": f"{base}/{d.tenant}/",
        **_times(time.time()),
        "appid": client_id,
        "idtyp": "user",
        "name": user.display_name,
        "oid": user.id,
        "scp": " ".join(s for s in scope.split() if s not in ("openid", "profile", "email")),
        "tid": d.tenant,
        "upn": user.upn,
        "ver": "1.0",
    }
    return d.keys.sign(claims)


def app_token(d: Directory, base: str, client_id: str) -> str:
    claims = {
        "aud": GRAPH_AUDIENCE,
        "iss": f"{base}/{d.tenant}/",
        **_times(time.time()),
        "appid": client_id,
        "idtyp": "app",
        "oid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"sp:{client_id}")),
        "roles": list(GRAPH_APP_ROLES),
        "tid": d.tenant,
        "ver": "1.0",
    }
    return d.keys.sign(claims)


def api_app_token(d: Directory, base: str, caller: App, resource: str) -> str:
    """An app-only v2.0 token of ``caller`` for the API of the app ``resource`` (a client id)."""
    claims = {
        "aud": resource,
        "iss": issuer(base, d.tenant),
        **_times(time.time()),
        "azp": caller.client_id,
        "azpacr": "1",
        "idtyp": "app",
        "oid": caller.object_id,
        "sub": caller.object_id,
        "tid": d.tenant,
        "uti": uuid.uuid4().hex[:22],
        "ver": "2.0",
    }
    if caller.roles:
        claims["roles"] = list(caller.roles)
    return d.keys.sign(claims)
