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

from azure.core.credentials import AccessToken
from azure.core.pipeline.policies import SansIOHTTPPolicy
from azure.identity import DefaultAzureCredential
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.network import NetworkManagementClient

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
CREDENTIAL_MODES = ("default", "emulator")


@dataclass(frozen=True)
class AzureSettings:
    """Where and how to reach ARM. Frozen so clients can be cached per settings.

    subnet_id is the full ARM id of the subnet workspace NICs join. Durations are
    seconds: retry_backoff is azure-core's retry_backoff_factor, polling_interval
    is the LRO poll delay used when the service sends no Retry-After.
    """

    subscription_id: str
    resource_group: str
    subnet_id: str
    endpoint: str = "https://management.azure.com"
    credential: str = "default"
    retry_total: int = 3
    retry_backoff: float = 0.8
    polling_interval: float = 5.0


class _EmulatorCredential:
    """Stands in for a TokenCredential; the emulator policy below never asks it for a token."""

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken("emulator", 2**31 - 1)


class _EmulatorAuthPolicy(SansIOHTTPPolicy):
    """Replaces the bearer policy, which refuses to send tokens over plain http."""

    def on_request(self, request: Any) -> None:
        request.http_request.headers["Authorization"] = "Bearer emulator"


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
    }
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
