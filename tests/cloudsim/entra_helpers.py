"""Plain-HTTP helpers for the Entra ID and Graph tests: form posts, no redirects followed."""

import base64
import hashlib
import json
import secrets
import urllib.error
import urllib.parse
import urllib.request

from cloudsim.entra.directory import DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, TENANT_ID

REDIRECT = "http://127.0.0.1:8000/auth/callback"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def call(url: str, method="GET", form=None, body=None, token=None, basic=None):
    """(status, headers with lower-case names, parsed JSON or text)."""
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    if body is not None:
        data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if basic:
        request.add_header("Authorization", f"Basic {basic}")
    try:
        with _opener.open(request, timeout=10) as response:
            status, headers, raw = response.status, response.headers, response.read()
    except urllib.error.HTTPError as err:
        status, headers, raw = err.code, err.headers, err.read()
    lowered = {k.lower(): v for k, v in headers.items()}
    is_json = "json" in lowered.get("content-type", "")
    return status, lowered, json.loads(raw) if is_json and raw else raw.decode()


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).decode().rstrip("=")


class Entra:
    def __init__(self, url: str):
        self.url = url
        self.root = f"{url}/{TENANT_ID}"

    def sign_in(self, who: str, challenge: str, nonce="n-0S6_WzA2Mj", state="st1") -> tuple:
        """POST the picker for `who` (UPN); (status, Location query as a dict)."""
        form = {
            "client_id": DEMO_CLIENT_ID,
            "response_type": "code",
            "redirect_uri": REDIRECT,
            "scope": "openid profile email User.Read",
            "state": state,
            "nonce": nonce,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "login_hint": who,
        }
        status, headers, _ = call(f"{self.root}/oauth2/v2.0/authorize", "POST", form)
        location = headers.get("location", "")
        assert location.startswith(REDIRECT), location
        return status, dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))

    def redeem(self, code: str, verifier: str):
        form = {
            "client_id": DEMO_CLIENT_ID,
            "client_secret": DEMO_CLIENT_SECRET,
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
        }
        return call(f"{self.root}/oauth2/v2.0/token", "POST", form)

    def app_token(self) -> str:
        form = {
            "client_id": DEMO_CLIENT_ID,
            "client_secret": DEMO_CLIENT_SECRET,
            "grant_type": "client_credentials",
            "scope": "https://graph.microsoft.com/.default",
        }
        status, _, body = call(f"{self.root}/oauth2/v2.0/token", "POST", form)
        assert status == 200, body
        return body["access_token"]

    def jwks(self) -> dict:
        return call(f"{self.root}/discovery/v2.0/keys")[2]
