"""A small Microsoft Graph v1.0 client for the portal's own reads (plain HTTP with requests).

It reads with the portal's client-credentials token (teams.entra_oidc.graph_token, application
permissions GroupMember.Read.All and User.Read.All) and:

- follows ``@odata.nextLink`` until the last page (Graph, "Paging Microsoft Graph data");
- honours 429 and 503 with ``Retry-After`` (Graph, "Microsoft Graph throttling guidance"), with
  a real bound: at most MAX_TRIES tries per request and each wait capped at RETRY_AFTER_CAP
  seconds, so a run can never hang on a throttled tenant;
- counts every HTTP request it makes in ``calls`` (the sync reports it; the benchmark prints it).

Errors: GraphError (no usable answer: network, 4xx/5xx, malformed JSON, still throttled after
MAX_TRIES); GraphNotFound (404 Request_ResourceNotFound), its subclass. Messages never carry
the token.
"""

import logging
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import requests
from django.conf import settings

log = logging.getLogger(__name__)
MAX_TRIES = 3  # per request; the 3rd throttled answer is a failure
RETRY_AFTER_CAP = 30.0  # seconds; Graph asks for a few seconds, never trust more
RETRY_DEFAULT = 2.0  # seconds, when a 429/503 carries no usable Retry-After
PAGE_SIZE = 999  # $top: Graph's maximum for members, fewest round trips


class GraphError(Exception):
    """Graph gave no usable answer; ``status`` is the HTTP status, None without one."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class GraphNotFound(GraphError):
    """404: the user or group does not exist (deleted)."""


def _wait_seconds(response: requests.Response) -> float:
    try:
        wanted = float(response.headers.get("Retry-After", RETRY_DEFAULT))
    except ValueError:
        wanted = RETRY_DEFAULT
    return min(max(wanted, 0.0), RETRY_AFTER_CAP)


def _error(response: requests.Response) -> GraphError:
    try:
        code = response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        code = "no Graph error body"
    cls = GraphNotFound if response.status_code == 404 else GraphError
    return cls(f"Graph answered {response.status_code} ({code})", response.status_code)


@dataclass
class GraphClient:
    """Reads Graph with ``token``; ``sleep`` waits out Retry-After (time.sleep in production)."""

    token: str
    sleep: Callable[[float], None] = time.sleep
    calls: int = 0
    session: requests.Session = field(default_factory=requests.Session)

    def _url(self, path: str, query: dict[str, Any]) -> str:
        base = settings.ENTRA_GRAPH_ENDPOINT.rstrip("/")
        return f"{base}/v1.0/{path}?{urllib.parse.urlencode(query, safe='$,')}"

    def get(self, url: str) -> dict[str, Any]:
        """The JSON body of GET ``url``, retried on 429/503 as the module says."""
        for attempt in range(1, MAX_TRIES + 1):
            self.calls += 1
            try:
                response = self.session.get(
                    url,
                    headers={"Authorization": f"Bearer {self.token}"},
                    timeout=settings.ENTRA_HTTP_TIMEOUT,
                )
            except requests.RequestException as err:
                raise GraphError(f"Graph could not be reached ({type(err).__name__})") from err
            if response.status_code in (429, 503) and attempt < MAX_TRIES:
                wait = _wait_seconds(response)
                log.info(
                    "Graph throttled (%s); try %s waits %.1f s", response.status_code, attempt, wait
                )
                self.sleep(wait)
                continue
            if response.status_code != 200:
                raise _error(response)
            try:
                body = response.json()
            except ValueError as err:
                raise GraphError("Graph answered with malformed JSON", 200) from err
            if not isinstance(body, dict):  # every Graph answer read here is an object
                raise GraphError("Graph answered with malformed JSON", 200)
            return body
        raise AssertionError("unreachable")  # the loop returns or raises

    def pages(self, url: str) -> Iterator[dict[str, Any]]:
        """Each item of ``value`` on every page, following @odata.nextLink."""
        while url:
            body = self.get(url)
            items = body.get("value")
            if not isinstance(items, list):
                raise GraphError("Graph answered a page without 'value'", 200)
            yield from (i for i in items if isinstance(i, dict))
            url = body.get("@odata.nextLink") or ""

    def group_members(self, group_id: str) -> list[dict[str, Any]]:
        """The group's direct members as [{"id", "accountEnabled"}] (users only):
        GET /v1.0/groups/{id}/members?$select=id,accountEnabled&$top=999, all pages.
        GraphNotFound when the group is gone."""
        query = {"$select": "id,accountEnabled", "$top": PAGE_SIZE}
        url = self._url(f"groups/{urllib.parse.quote(group_id)}/members", query)
        return [
            m
            for m in self.pages(url)
            if m.get("@odata.type", "#microsoft.graph.user") == "#microsoft.graph.user"
        ]

    def user(self, object_id: str) -> dict[str, Any] | None:
        """{"id", "accountEnabled"} of one user (GET /v1.0/users/{id}); None when the user
        does not exist (404: deleted from the tenant)."""
        query = {"$select": "id,accountEnabled"}
        try:
            return self.get(self._url(f"users/{urllib.parse.quote(object_id)}", query))
        except GraphNotFound:
            return None
