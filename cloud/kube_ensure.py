"""Creating a workspace's Kubernetes objects so that a retry is harmless, shared by MIG slices
(cloud.kube_mig) and team namespaces (cloud.kube_namespace): its namespace, then its
namespaced objects, each created if missing and kept if it carries the workspace's
WORKSPACE_LABEL (cloud.kube_core._ensure).

Errors raised: CloudError("AlreadyExists") for an object someone else holds; other
CloudErrors as the API server refused (cloud.kube_core.from_kube).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from kubernetes import client
from kubernetes.client import ApiClient

from .kube_core import WORKSPACE_LABEL, _ensure, _errors, _meta

# One namespaced object: (kind, the kubernetes client API class, its method suffix, body),
# e.g. ("Secret", "CoreV1Api", "secret", {"metadata": {"name": "ws-1-agent", ...}, ...}); the
# body's metadata.name is its name.
Namespaced = tuple[str, str, str, dict[str, Any]]


def owned_by(workspace_id: str) -> Callable[[dict[str, Any]], bool]:
    """The test an existing object's labels pass when it is this workspace's."""
    return lambda labels: labels.get(WORKSPACE_LABEL) == workspace_id


def namespace_create(
    api: ApiClient, name: str, labels: dict[str, Any], owned: Callable[[dict[str, Any]], bool]
) -> None:
    """Create namespace ``name`` with ``labels``, or accept one whose labels pass ``owned``.
    Raises CloudError."""
    core = client.CoreV1Api(api)
    with _errors():
        _ensure(
            "Namespace",
            name,
            lambda: core.create_namespace({"metadata": _meta(name, labels)}),
            lambda: core.read_namespace(name),
            owned,
        )


def objects_create(
    api: ApiClient,
    namespace: str,
    objects: Iterable[Namespaced],
    owned: Callable[[dict[str, Any]], bool],
) -> None:
    """Create each of ``objects`` in ``namespace``, in order, or accept one whose labels pass
    ``owned``. Raises CloudError."""
    with _errors():
        for kind, api_class, attr, body in objects:
            typed = getattr(client, api_class)(api)
            create = getattr(typed, f"create_namespaced_{attr}")
            read = getattr(typed, f"read_namespaced_{attr}")
            name = body["metadata"]["name"]
            _ensure(
                kind, name, partial(create, namespace, body), partial(read, name, namespace), owned
            )
