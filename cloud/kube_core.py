"""The shared part of the Kubernetes adapter (cloud.kube): the API client for an AKS API server
with its Entra ID bearer token, the translation of the API server's refusals into CloudError,
the idempotent create-or-adopt every object kind uses (_ensure, owned by WORKSPACE_LABEL), the
labels and names, and the capacity of a cluster's GPU node pools.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import os
import re
import tempfile
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlsplit

import urllib3
from azure.core.exceptions import AzureError
from kubernetes import client
from kubernetes.client import ApiClient, ApiException

from .clients import LOOPBACK_HOSTS, AzureSettings, _default_credential
from .errors import CloudError, from_azure
from .metrics import kube_recorded

AKS_SERVER_SCOPE = "6dae42f8-4368-4678-94ff-3960e28e3630/.default"  # Entra ID AKS server app
MANAGED_BY = "gpu-workspace-portal"  # label app.kubernetes.io/managed-by
WORKSPACE_LABEL = "portal.azure.com/workspace"  # value: the workspace uuid (owner check on 409)
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
INSTANCE_LABEL = "app.kubernetes.io/instance"
REPLICAS_ANNOTATION = "portal.azure.com/replicas-before-stop"
QUOTA_NAME, LIMIT_RANGE_NAME = "portal-quota", "portal-defaults"
ROLE_BINDING_NAME, NETWORK_POLICY_NAME = "team-edit", "deny-other-namespaces"
GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
JUPYTER_PORT = 8888
AGENT_TOKEN_ENV = "PORTAL_AGENT_TOKEN"
AGENT_DIR = "/opt/gpu-portal-agent"  # The ConfigMap's mount: the agent's program, read-only.
AGENT_FILE = "gpu_portal_agent.py"
AGENT_LIB_DIR = "/tmp/gpu-portal-agent-lib"  # pip --target: writable whatever the image's user.
AGENT_EXIT_GONE = 3  # The agent's exit status after a 410: the workspace is gone, no restart.
AGENT_RESTART_SECONDS = 10
DEFAULT_START_COMMAND = ("start-notebook.py",)  # The Jupyter Docker Stacks images' CMD.
TOKEN_MARGIN = 300  # Seconds before expiry an Entra ID token is replaced.
RETRY_STATUSES = (429, 500, 502, 503, 504)
MIG_PROFILE = re.compile(r"^[1-7]g\.[0-9]+gb$")
# Defaults a container without requests gets in a team namespace (the quota counts requests).
DEFAULT_REQUEST = {"cpu": "500m", "memory": "1Gi"}
DEFAULT_LIMIT = {"cpu": "4", "memory": "16Gi"}


class _TokenHook:
    """Configuration.refresh_api_key_hook: an Entra ID token for the AKS server app, fetched
    again TOKEN_MARGIN seconds before it expires."""

    def __init__(self, credential: Any):
        self._credential, self._token, self._lock = credential, None, threading.Lock()

    def __call__(self, config: client.Configuration) -> None:
        with self._lock:
            token = self._token
            if token is None or token.expires_on - TOKEN_MARGIN <= time.time():
                with _errors():
                    token = self._token = self._credential.get_token(AKS_SERVER_SCOPE)
            config.api_key["BearerToken"] = token.token


def _ca_file(ca_data: str) -> str:
    """A file holding the kubeconfig's base64 certificate-authority-data (urllib3 wants a
    path), named by its content so every client of one cluster shares it."""
    pem = base64.b64decode(ca_data)
    path = os.path.join(tempfile.gettempdir(), f"portal-aks-ca-{hashlib.sha256(pem).hexdigest()}")
    if not os.path.exists(path):
        with tempfile.NamedTemporaryFile(dir=os.path.dirname(path), delete=False) as handle:
            handle.write(pem)
        os.replace(handle.name, path)
    return path


# What kube_api returns, as the apps name it (only cloud/ imports the Kubernetes SDK).
KubeApi = ApiClient


@functools.lru_cache(maxsize=32)
def kube_api(settings: AzureSettings, server: str, ca_data: str | None) -> ApiClient:
    """The cached ApiClient of one AKS API server.

    server: the kubeconfig's cluster server URL; ca_data: its certificate-authority-data
    (base64 PEM) or None. The bearer token is "emulator" with the emulator credential (loopback
    servers only, as cloud.clients enforces for ARM), else DefaultAzureCredential's token for
    AKS_SERVER_SCOPE, refreshed before expiry. 429 and 5xx answers to reads are retried
    (settings.retry_total, retry_backoff, Retry-After honoured). Raises ValueError for an
    unknown credential mode or the emulator credential on a non-loopback server."""
    config = client.Configuration(host=server.rstrip("/"))
    config.api_key_prefix = {"BearerToken": "Bearer"}
    if settings.credential == "emulator":
        if urlsplit(server).hostname not in LOOPBACK_HOSTS:
            raise ValueError(
                f"credential 'emulator' is only allowed for loopback servers, not {server!r}"
            )
        config.api_key = {"BearerToken": "emulator"}
    elif settings.credential == "default":
        config.api_key = {"BearerToken": ""}
        config.refresh_api_key_hook = _TokenHook(_default_credential())
    else:
        raise ValueError(f"unknown credential mode {settings.credential!r}")
    if ca_data:
        config.ssl_ca_cert = _ca_file(ca_data)
    config.retries = urllib3.Retry(
        total=settings.retry_total,
        backoff_factor=settings.retry_backoff,
        status_forcelist=RETRY_STATUSES,
        respect_retry_after_header=True,
        raise_on_status=False,  # The last answer reaches the caller as an ApiException.
    )
    api = _CountedApiClient(config)
    # Per attempt, as for ARM (urllib3's default is to wait for ever).
    api.timeouts = (settings.connection_timeout, settings.read_timeout)
    return api


class _CountedApiClient(ApiClient):
    """An ApiClient whose every request is counted by cloud.metrics (operation, outcome) and
    has ``timeouts`` (connect, read seconds) unless the call gives its own."""

    timeouts: tuple[float, float] | None = None

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("_request_timeout") is None and self.timeouts is not None:
            kwargs["_request_timeout"] = self.timeouts
        parent = super().request
        return kube_recorded(method, url, lambda: parent(method, url, *args, **kwargs))


def from_kube(exc: ApiException) -> CloudError:
    """CloudError from an ApiException: the Status body's reason and message."""
    status = exc.status or None
    reason, message = exc.reason or "ApiException", str(exc.reason or "")
    try:
        body = json.loads(exc.body or b"{}")
        reason, message = body.get("reason") or reason, body.get("message") or message
    except (ValueError, TypeError, AttributeError):
        pass  # Not a Status body (a proxy's page): the HTTP reason phrase is what there is.
    headers = exc.headers or {}
    retry_after = headers.get("Retry-After")
    transient = status is None or status == 429 or status >= 500
    return CloudError(
        reason,
        message,
        status=status,
        transient=transient,
        retry_after=float(retry_after) if retry_after and retry_after.isdigit() else None,
    )


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except ApiException as exc:
        raise from_kube(exc) from exc
    except urllib3.exceptions.HTTPError as exc:
        raise CloudError(type(exc).__name__, str(exc), transient=True) from exc
    except AzureError as exc:
        raise from_azure(exc) from exc


def _missing(read: Callable[[], Any]) -> bool:
    """True when read() answers 404."""
    try:
        read()
    except ApiException as exc:
        if exc.status == 404:
            return True
        raise
    return False


def _quietly(call: Callable[[], Any]) -> Any:
    """call(), or None when it answers 404."""
    try:
        return call()
    except ApiException as exc:
        if exc.status != 404:
            raise
        return None


def _ensure(
    kind: str,
    name: str,
    create: Callable[[], Any],
    read: Callable[[], Any],
    owned: Callable[[Any], bool],
) -> Any:
    """Create; on 409 AlreadyExists accept the existing object if owned(its labels) and
    return it (None when created)."""
    try:
        create()
        return None
    except ApiException as exc:
        if exc.status != 409:
            raise
    found = read()
    labels = found.metadata.labels or {}
    if owned(labels):
        return found
    workspace = labels.get(WORKSPACE_LABEL)
    owner = f"workspace {workspace}" if workspace else "someone outside the portal"
    message = f"{kind} {name} already exists and belongs to {owner}"
    raise CloudError("AlreadyExists", message, status=409)


def _meta(name: str, labels: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    meta = {"name": name, "labels": labels}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _labels(workspace_id: str, extra: tuple[tuple[str, str], ...]) -> dict[str, str]:
    return {**dict(extra), MANAGED_BY_LABEL: MANAGED_BY, WORKSPACE_LABEL: workspace_id}


def _gpu_requests(pod: Any) -> dict[str, int]:
    """GPU and MIG resources a pod asks for ({resource: count}), from requests or limits."""
    found: dict[str, int] = {}
    for container in pod.spec.containers or []:
        resources = container.resources
        wanted = {
            **((resources and resources.limits) or {}),
            **((resources and resources.requests) or {}),
        }
        for key, value in wanted.items():
            if key == GPU or key.startswith(MIG_PREFIX):
                found[key] = found.get(key, 0) + _count(value)
    return found


def _count(value: Any) -> int:
    try:
        return int(Decimal(str(value)))
    except (InvalidOperation, ValueError):
        return 0  # Extended resources are whole numbers; anything else is none of ours.


@dataclass(frozen=True)
class PoolCapacity:
    """GPU capacity of one node pool: resource "nvidia.com/gpu" or "nvidia.com/mig-1g.10gb";
    total: allocatable over the pool's nodes; used: requested by pods bound to them."""

    pool: str
    resource: str
    total: int
    used: int


def pool_capacity(api: ApiClient) -> list[PoolCapacity]:
    """GPU and MIG capacity per node pool (label agentpool), sorted by pool and resource, from
    one list of nodes and one of live bound pods. Raises CloudError."""
    core = client.CoreV1Api(api)
    live = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
    with _errors():
        nodes = core.list_node().items
        pods = core.list_pod_for_all_namespaces(field_selector=live).items
    pool_of = {n.metadata.name: (n.metadata.labels or {}).get("agentpool", "") for n in nodes}
    totals: dict[tuple[str, str], list[int]] = {}
    for node in nodes:
        for key, value in (node.status.allocatable or {}).items():
            if key == GPU or key.startswith(MIG_PREFIX):
                totals.setdefault((pool_of[node.metadata.name], key), [0, 0])[0] += _count(value)
    for pod in pods:
        for key, count in _gpu_requests(pod).items():
            pool = pool_of.get(pod.spec.node_name)
            if pool is not None and (pool, key) in totals:
                totals[(pool, key)][1] += count
    return [PoolCapacity(p, r, t, u) for (p, r), (t, u) in sorted(totals.items())]


def dns_label(text: str, *, max_len: int = 63) -> str:
    """A DNS-1123 label from free text: accents folded to ASCII, lower case, runs of anything
    but [a-z0-9] turned into one "-", trimmed to max_len (1..63), starting and ending with a
    letter or digit. "Vision Lab (É)" -> "vision-lab-e". ValueError when nothing is left."""
    if not 1 <= max_len <= 63:
        raise ValueError("max_len must be between 1 and 63")
    ascii_text = unicodedata.normalize("NFKD", text or "").encode("ascii", "ignore").decode()
    label = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    label = label[:max_len].rstrip("-")
    if not label:
        raise ValueError(f"{text!r} has no letters or digits to make a Kubernetes name from")
    return label
