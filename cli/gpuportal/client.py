"""The HTTP client of /api/v1/, and the failures a command turns into exit codes.

Every failure is a CliFailure with the exit code the CLI documents (docs/cli.md):
ApiRefused (1; 3 for 401; 4 for 404) carries the problem details the API sent,
NotSignedIn (3), NetworkError (7).
"""

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import requests

from gpuportal import __version__
from gpuportal.config import Credentials

# Exit codes (docs/cli.md, `gpuportal --help`). 2 is Typer's own usage error.
EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_SIGNED_OUT = 3
EXIT_NOT_FOUND = 4
EXIT_FAILED = 5
EXIT_TIMEOUT = 6
EXIT_NETWORK = 7

API_PREFIX = "/api/v1"
# Seconds to connect, and to wait for an answer: the API answers at once (work is queued).
TIMEOUT = (10.0, 60.0)
# A 429's Retry-After is honoured up to this many seconds, at most RATE_RETRIES times a call.
RETRY_AFTER_MAX = 60.0
RATE_RETRIES = 3


class CliFailure(Exception):
    """A failure the CLI reports in one or two lines and ends with ``exit_code``."""

    exit_code = EXIT_REFUSED

    def lines(self) -> list[str]:
        return [str(self)]


class NotSignedIn(CliFailure):
    exit_code = EXIT_SIGNED_OUT

    def __init__(self) -> None:
        super().__init__(
            "Not signed in: run `gpuportal login`, or set GPUPORTAL_URL and GPUPORTAL_TOKEN."
        )


class NetworkError(CliFailure):
    exit_code = EXIT_NETWORK


@dataclass
class ApiRefused(CliFailure):
    """The API answered 4xx/5xx; ``problem`` is its RFC 9457 body (or what could be made of
    a body that was not one)."""

    status: int
    problem: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.summary())
        if self.status == 401:
            self.exit_code = EXIT_SIGNED_OUT
        elif self.status == 404:
            self.exit_code = EXIT_NOT_FOUND

    def summary(self) -> str:
        title = str(self.problem.get("title") or f"HTTP {self.status}")
        detail = str(self.problem.get("detail") or "")
        return f"{title}: {detail}" if detail and detail != title else title

    def lines(self) -> list[str]:
        out = [f"Error {self.status}: {self.summary()}"]
        for error in self.problem.get("errors") or []:
            if isinstance(error, dict):
                loc = ".".join(str(part) for part in error.get("loc") or [])
                out.append(f"  {loc}: {error.get('msg', '')}" if loc else f"  {error.get('msg')}")
        if self.status == 401:
            out.append(
                "Sign in again with `gpuportal login` (the token may be expired or revoked)."
            )
        return out


def _problem(response: requests.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        return body
    return {"title": response.reason or f"HTTP {response.status_code}"}


def _retry_after(response: requests.Response) -> float:
    try:
        seconds = float(response.headers.get("Retry-After", "1"))
    except ValueError:
        seconds = 1.0
    return min(max(seconds, 0.0), RETRY_AFTER_MAX)


class Client:
    """One portal, one token. Methods return the decoded JSON body (None for 304)."""

    def __init__(self, creds: Credentials, session: requests.Session | None = None) -> None:
        self.creds = creds
        self.session = session or requests.Session()
        self.session.headers.update(
            {
                "Authorization": f"Bearer {creds.token}",
                "Accept": "application/json",
                "User-Agent": f"gpuportal/{__version__}",
            }
        )

    def url(self, path: str) -> str:
        """The absolute URL of an API path ("/workspaces") or of a URL the API gave back."""
        if path.startswith(("http://", "https://")):
            return path
        if path.startswith(API_PREFIX + "/"):
            return self.creds.url + path
        return self.creds.url + API_PREFIX + path

    def send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> requests.Response:
        """One request; waits out 429s (Retry-After). Returns 2xx and 304 responses; raises
        ApiRefused for other statuses, NetworkError when the portal cannot be reached."""
        for attempt in range(RATE_RETRIES + 1):
            try:
                response = self.session.request(
                    method,
                    self.url(path),
                    params=params,
                    json=body,
                    headers=dict(headers or {}),
                    timeout=TIMEOUT,
                    allow_redirects=False,
                )
            except requests.RequestException as exc:
                raise NetworkError(f"Cannot reach {self.creds.url}: {exc}") from exc
            if response.status_code == 429 and attempt < RATE_RETRIES:
                time.sleep(_retry_after(response))
                continue
            if response.status_code < 300 or response.status_code == 304:
                return response
            raise ApiRefused(response.status_code, _problem(response))
        raise AssertionError("unreachable")  # the loop returns or raises

    def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return self.send("GET", path, params=params).json()

    def post(self, path: str, body: Any = None) -> Any:
        return self.send("POST", path, body=body if body is not None else {}).json()

    def put(self, path: str, body: Any) -> Any:
        return self.send("PUT", path, body=body).json()

    def delete(self, path: str) -> Any:
        return self.send("DELETE", path).json()

    def create(self, path: str, body: Mapping[str, Any], tries: int = 3) -> Any:
        """POST a create with a fresh Idempotency-Key, sent again with the same key when the
        network failed (the portal then answers the first request's result, never a second
        workspace). Raises NetworkError after ``tries`` failed sends."""
        key = str(uuid.uuid4())
        for attempt in range(1, tries + 1):
            try:
                response = self.send(
                    "POST", path, body=dict(body), headers={"Idempotency-Key": key}
                )
            except NetworkError:
                if attempt == tries:
                    raise
                time.sleep(0.5 * 2 ** (attempt - 1))
                continue
            return response.json()
        raise AssertionError("unreachable")
