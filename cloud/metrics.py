"""Counts of the Azure Resource Manager and Kubernetes API calls, by operation and outcome.

Lives in cloud/ because cloud/ imports no app (pyproject.toml's import-linter contracts); the
portal's ``/metrics`` view (portal/metrics.py) reads the same prometheus-client registry. One
HTTP attempt is one call: azure-core's retries of a 429 count as a throttled call each, then an
ok one, so throttling shows even when the retry succeeds.

Labels stay bounded: ``operation`` is the HTTP method and the ARM resource type path (e.g.
``PUT Microsoft.Compute/virtualMachines``, ``POST Microsoft.Compute/virtualMachines/start``) or
the Kubernetes resource (``GET pods``, ``DELETE namespaces``), never a name or an id.
``outcome`` is ok (2xx/3xx), throttled (429), conflict (409) or failed (anything else,
connection errors included). Sources: Azure's resource id format ("Azure Resource Manager
resource ids", learn.microsoft.com) and the Kubernetes API URL layout (kubernetes.io/docs/
reference/using-api/api-concepts).
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

from azure.core.pipeline import PipelineRequest, PipelineResponse
from azure.core.pipeline.policies import HTTPPolicy
from azure.core.rest import HttpRequest, HttpResponse
from prometheus_client import Counter, Histogram

OK, THROTTLED, CONFLICT, FAILED = "ok", "throttled", "conflict", "failed"
OUTCOMES = (OK, THROTTLED, CONFLICT, FAILED)
METHODS = frozenset({"GET", "PUT", "POST", "PATCH", "DELETE", "HEAD"})

CLOUD_CALLS = Counter(
    "portal_cloud_calls_total",
    "Azure Resource Manager and Kubernetes API calls (HTTP attempts) by api, operation and "
    "outcome (ok, throttled, conflict, failed).",
    ["api", "operation", "outcome"],
)
CLOUD_CALL_SECONDS = Histogram(
    "portal_cloud_call_duration_seconds",
    "Duration of one Azure or Kubernetes API call (HTTP attempt), seconds.",
    ["api", "operation"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)


def outcome(status: int | None) -> str:
    """ok, throttled, conflict or failed for an HTTP status (None: no answer at all)."""
    if status is None:
        return FAILED
    if status < 400:
        return OK
    return {429: THROTTLED, 409: CONFLICT}.get(status, FAILED)


def _method(method: str) -> str:
    upper = method.upper()
    return upper if upper in METHODS else "OTHER"


def arm_operation(method: str, url: str) -> str:
    """``METHOD Namespace/type[/childtype...][/action]`` from an ARM request URL: the names
    between the types are dropped, so the label's values are as many as the types used."""
    segments = [s for s in urlsplit(url).path.split("/") if s]
    lowered = [s.lower() for s in segments]
    if "providers" not in lowered:
        # /subscriptions/{id}/resourceGroups/{rg} or the like: keep the collection names.
        return f"{_method(method)} {'/'.join(segments[::2]) or '/'}"
    at = len(lowered) - 1 - lowered[::-1].index("providers")
    tail = segments[at + 1 :]
    # Namespace, then type/name pairs; an odd segment at the end is an action (start, query).
    return f"{_method(method)} {'/'.join(tail[:1] + tail[1::2])}"


def kube_operation(method: str, url: str) -> str:
    """``METHOD resource[/subresource]`` from a Kubernetes API URL (core ``/api/v1/...`` or
    ``/apis/group/version/...``), without namespace or object names."""
    segments = [s for s in urlsplit(url).path.split("/") if s]
    # The server URL may carry a path prefix (a proxy's, the emulator's): skip to /api or /apis.
    at = next((i for i, s in enumerate(segments) if s in ("api", "apis")), None)
    if at is None:
        return f"{_method(method)} other"
    rest = segments[at + (2 if segments[at] == "api" else 3) :]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]  # /namespaces/{ns}/pods/... : the namespace is a scope, not a resource
    kind = "/".join(rest[:1] + rest[2:3]) or "discovery"
    return f"{_method(method)} {kind}"


def record(api: str, operation: str, status: int | None, seconds: float) -> None:
    """Count one call of ``api`` ("azure" or "kubernetes")."""
    CLOUD_CALLS.labels(api, operation, outcome(status)).inc()
    CLOUD_CALL_SECONDS.labels(api, operation).observe(seconds)


class ArmCallMetricsPolicy(HTTPPolicy[HttpRequest, HttpResponse]):
    """azure-core policy placed after the retry policy (per_retry_policies): counts each
    attempt. A connection error counts as failed and is raised on unchanged."""

    def send(
        self, request: PipelineRequest[HttpRequest]
    ) -> PipelineResponse[HttpRequest, HttpResponse]:
        http = request.http_request
        operation = arm_operation(http.method, http.url)
        started = time.monotonic()
        status: int | None = None
        try:
            response = self.next.send(request)
            status = response.http_response.status_code
            return response
        finally:
            record("azure", operation, status, time.monotonic() - started)


def kube_recorded(method: str, url: str, call: Any) -> Any:
    """``call()`` (a Kubernetes ApiClient request), counted; its ApiException's status is the
    outcome's, any other exception is failed."""
    operation = kube_operation(method, url)
    started = time.monotonic()
    status: int | None = None
    try:
        response = call()
        status = getattr(response, "status", 200)
        return response
    except Exception as exc:
        status = getattr(exc, "status", None) or None
        raise
    finally:
        record("kubernetes", operation, status, time.monotonic() - started)
