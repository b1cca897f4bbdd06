"""Azure management clients built from plain settings.

The product path always goes through the real SDK clients. The only switch is
the credential: DefaultAzureCredential against ARM, or a fixed token for a local
ARM emulator (loopback endpoints only).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import structlog
from azure.core.credentials import AccessToken
from azure.core.pipeline.policies import RetryPolicy, SansIOHTTPPolicy
from azure.core.rest import HttpRequest, HttpResponse
from azure.identity import DefaultAzureCredential
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.containerservice import ContainerServiceClient
from azure.mgmt.costmanagement import CostManagementClient
from azure.mgmt.network import NetworkManagementClient
from azure.mgmt.storage import StorageManagementClient

from .metrics import ArmCallMetricsPolicy

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
CREDENTIAL_MODES = ("default", "emulator")
# Cost Management throttles per query-processing budget, entity and tenant, and says how long to
# wait in its own headers, not always in Retry-After; the longest wait is the one that counts.
COST_RETRY_AFTER_HEADERS = tuple(
    f"x-ms-ratelimit-microsoft.costmanagement-{bucket}-retry-after"
    for bucket in ("qpu", "entity", "tenant", "client")
)
MAX_RETRY_WAIT = 60.0  # Seconds; a longer wait asked for is cut to this, so a sync cannot hang.


@dataclass(frozen=True)
class AzureSettings:
    """Where and how to reach ARM. Frozen so clients can be cached per settings.

    subnet_id is the full ARM id of the subnet workspace NICs join. Durations are
    seconds: retry_backoff is azure-core's retry_backoff_factor, polling_interval
    is the LRO poll delay used when the service sends no Retry-After. connection_timeout and
    read_timeout bound each attempt (azure-core's own default is 300 s each, so a hung ARM
    held a caller for minutes); total_timeout, when set, is azure-core's RetryPolicy
    ``timeout``: no attempt starts after it, and connecting is cut to what is left of it (an
    attempt already reading still has its read_timeout), as a web request needs
    (cloud.bounded).
    """

    subscription_id: str
    resource_group: str
    subnet_id: str
    endpoint: str = "https://management.azure.com"
    credential: str = "default"
    retry_total: int = 3
    retry_backoff: float = 0.8
    polling_interval: float = 5.0
    connection_timeout: float = 10.0
    read_timeout: float = 120.0
    total_timeout: float | None = None


class _EmulatorCredential:
    """Stands in for a TokenCredential; the emulator policy below never asks it for a token."""

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken("emulator", 2**31 - 1)


class _EmulatorAuthPolicy(SansIOHTTPPolicy[HttpRequest, HttpResponse]):
    """Replaces the bearer policy, which refuses to send tokens over plain http."""

    def on_request(self, request: Any) -> None:
        request.http_request.headers["Authorization"] = "Bearer emulator"


class AzureIdsPolicy(SansIOHTTPPolicy[HttpRequest, HttpResponse]):
    """Binds the ids of the last ARM response (x-ms-correlation-request-id and x-ms-request-id,
    which Microsoft support asks for) into the log context (structlog contextvars), so every
    later log line of the same request or task names the Azure call it followed; and logs
    each response at DEBUG with its method, path and status. Never logs headers or bodies."""

    def on_response(self, request: Any, response: Any) -> None:
        headers = response.http_response.headers
        ids = {
            key: headers[header]
            for key, header in (
                ("azure_correlation_id", "x-ms-correlation-request-id"),
                ("azure_request_id", "x-ms-request-id"),
            )
            if headers.get(header)
        }
        if ids:
            structlog.contextvars.bind_contextvars(**ids)
        http = request.http_request
        _log.debug(
            "azure response",
            method=http.method,
            path=urlsplit(http.url).path,
            status=response.http_response.status_code,
        )


_log = structlog.get_logger("cloud.azure")


@functools.cache
def _default_credential() -> DefaultAzureCredential:
    """One DefaultAzureCredential per process, so both clients share its token cache."""
    return DefaultAzureCredential()


def _client_kwargs(settings: AzureSettings) -> dict[str, Any]:
    """Constructor kwargs shared by both clients.

    Raises ValueError for an unknown credential mode, or for the emulator
    credential on a non-loopback endpoint (a dummy token must never reach Azure).
    """
    endpoint = settings.endpoint.rstrip("/")
    # retry_total is meant as the single knob: lift azure-core's separate caps (3 each) with it.
    kwargs: dict[str, Any] = {
        "base_url": endpoint,
        "retry_total": settings.retry_total,
        "retry_status": settings.retry_total,
        "retry_connect": settings.retry_total,
        "retry_read": settings.retry_total,
        "retry_backoff_factor": settings.retry_backoff,
        "polling_interval": settings.polling_interval,
        # The transport's per-attempt limits (azure-core's ConnectionConfiguration).
        "connection_timeout": settings.connection_timeout,
        "read_timeout": settings.read_timeout,
        # azure-core runs it per attempt, after the retry policy: the last answer's ids win.
        "custom_hook_policy": AzureIdsPolicy(),
        # After the retry policy, so each attempt is counted (a retried 429 shows as throttled).
        "per_retry_policies": [ArmCallMetricsPolicy()],
    }
    if settings.total_timeout is not None:
        kwargs["timeout"] = settings.total_timeout  # RetryPolicy's bound over every attempt.
    if settings.credential == "default":
        kwargs["credential"] = _default_credential()
        # The token audience follows the endpoint, so sovereign clouds work too.
        kwargs["credential_scopes"] = [f"{endpoint}/.default"]
        return kwargs
    if settings.credential == "emulator":
        host = urlsplit(endpoint).hostname
        if host not in LOOPBACK_HOSTS:
            raise ValueError(
                f"credential 'emulator' is only allowed for loopback endpoints, not {endpoint!r}"
            )
        kwargs["credential"] = _EmulatorCredential()
        kwargs["authentication_policy"] = _EmulatorAuthPolicy()
        return kwargs
    raise ValueError(
        f"unknown credential mode {settings.credential!r}; use one of {CREDENTIAL_MODES}"
    )


@functools.lru_cache(maxsize=16)
def compute_client(settings: AzureSettings) -> ComputeManagementClient:
    """The cached ComputeManagementClient for these settings. Raises ValueError (see above)."""
    kwargs = _client_kwargs(settings)
    return ComputeManagementClient(subscription_id=settings.subscription_id, **kwargs)


@functools.lru_cache(maxsize=16)
def network_client(settings: AzureSettings) -> NetworkManagementClient:
    """The cached NetworkManagementClient for these settings. Raises ValueError (see above)."""
    kwargs = _client_kwargs(settings)
    return NetworkManagementClient(subscription_id=settings.subscription_id, **kwargs)


@functools.lru_cache(maxsize=16)
def container_client(settings: AzureSettings) -> ContainerServiceClient:
    """The cached ContainerServiceClient (AKS, api-version 2026-08-01) for these settings; for a
    cluster in another subscription pass dataclasses.replace(settings, subscription_id=...).
    Raises ValueError (see _client_kwargs)."""
    kwargs = _client_kwargs(settings)
    return ContainerServiceClient(subscription_id=settings.subscription_id, **kwargs)


@functools.lru_cache(maxsize=16)
def storage_client(settings: AzureSettings) -> StorageManagementClient:
    """The cached StorageManagementClient (storage accounts, Azure Files shares) for these
    settings. Raises ValueError (see _client_kwargs)."""
    kwargs = _client_kwargs(settings)
    return StorageManagementClient(subscription_id=settings.subscription_id, **kwargs)


class CostRetryPolicy(RetryPolicy[HttpRequest, HttpResponse]):
    """azure-core's retry policy for Cost Management queries.

    A query is a POST that only reads, so a 429 is retried like a GET's, waiting the longest of
    Retry-After and the x-ms-ratelimit-microsoft.costmanagement-*-retry-after headers (seconds),
    at most MAX_RETRY_WAIT; without any, azure-core's exponential back-off applies.
    """

    def get_retry_after(self, response: Any) -> float | None:
        headers = response.http_response.headers
        waits = [super().get_retry_after(response)]
        for value in filter(None, (headers.get(name) for name in COST_RETRY_AFTER_HEADERS)):
            try:
                waits.append(max(float(value), 0.0))
            except ValueError:
                continue  # An unreadable header is no reason to fail the query.
        known = [wait for wait in waits if wait is not None]
        return min(max(known), MAX_RETRY_WAIT) if known else None

    def is_retry(self, settings: dict[str, Any], response: Any) -> bool:
        if response.http_response.status_code == 429 and settings["total"]:
            return True
        return super().is_retry(settings, response)


@functools.lru_cache(maxsize=16)
def cost_client(settings: AzureSettings) -> CostManagementClient:
    """The cached CostManagementClient for these settings (retries: CostRetryPolicy).

    Raises ValueError (see _client_kwargs)."""
    kwargs = _client_kwargs(settings)
    kwargs["retry_policy"] = CostRetryPolicy(
        retry_total=settings.retry_total,
        retry_connect=settings.retry_total,
        retry_read=settings.retry_total,
        retry_status=settings.retry_total,
        retry_backoff_factor=settings.retry_backoff,
        retry_backoff_max=MAX_RETRY_WAIT,
        **({"timeout": settings.total_timeout} if settings.total_timeout is not None else {}),
    )
    return CostManagementClient(**kwargs)
