"""Kubernetes rights on a MIG slice, its owner's alone: Role and RoleBinding ``<name>-owner``
let the owner's Entra ID identities (SliceAccess.users) get the pod ``<name>-0``, port-forward
to it and read its log, by resourceNames; the team's group gets nothing in the slices'
namespace (``edit`` there would read every member's Secret and exec into their pods).

Errors raised: CloudError (cloud.kube_core.from_kube).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client import ApiClient

from .kube_core import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    ROLE_BINDING_NAME,
    WORKSPACE_LABEL,
    _ensure,
    _errors,
    _labels,
    _meta,
    _quietly,
)


@dataclass(frozen=True)
class SliceAccess:
    """Who may reach a MIG workspace's pod: users are the owner's Kubernetes user names (on AKS
    with Entra ID, the UPN of a member of the tenant, the object id of a guest; both may be
    given), () for nobody yet; labels as MigSpec's."""

    workspace_id: str
    namespace: str
    name: str
    users: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()


def _owner_rules(pod: str) -> list[dict[str, Any]]:
    """What `kubectl port-forward pod/<pod>` and `kubectl logs <pod>` need, on that pod only
    (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources):
    get the pod, pods/portforward (create over SPDY; get over WebSocket, which kubectl uses
    from 1.30) and pods/log. No secrets, no exec or attach: the tokens stay out of reach."""
    one = {"apiGroups": [""], "resourceNames": [pod]}
    return [
        {**one, "resources": ["pods"], "verbs": ["get"]},
        {**one, "resources": ["pods/portforward"], "verbs": ["get", "create"]},
        {**one, "resources": ["pods/log"], "verbs": ["get"]},
    ]


def _owner_objects(access: SliceAccess) -> tuple[dict[str, Any], dict[str, Any]]:
    labels, name = _labels(access.workspace_id, access.labels), f"{access.name}-owner"
    role: dict[str, Any] = {"metadata": _meta(name, labels, access.namespace)}
    role["rules"] = _owner_rules(f"{access.name}-0")
    subjects = [
        {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}
        for user in dict.fromkeys(access.users)
    ]
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
    binding: dict[str, Any] = {"metadata": _meta(name, labels, access.namespace), "roleRef": ref}
    binding["subjects"] = subjects
    return role, binding


def _ensure_fields(
    api: ApiClient,
    kind: str,
    name: str,
    calls: tuple[Callable[[], Any], Callable[[], Any], Callable[[dict[str, Any]], Any]],
    mine: Callable[[Any], bool],
    fields: dict[str, Any],
) -> None:
    """_ensure, then `fields` (lists: rules, subjects) patched onto an existing object of ours
    where they differ. calls: (create, read, patch(body))."""
    create, read, patch = calls
    found = _ensure(kind, name, create, read, mine)
    current = api.sanitize_for_serialization(found) if found is not None else fields
    if any((current.get(key) or []) != value for key, value in fields.items()):
        patch(fields)


def _drop_team_edit(rbac: Any, namespace: str) -> None:
    """The team's edit binding that slices' namespaces had before issue 14 (the portal's, not
    a namespace workspace's): its group could read every member's Secret."""
    found = _quietly(lambda: rbac.read_namespaced_role_binding(ROLE_BINDING_NAME, namespace))
    labels = (found.metadata.labels or {}) if found is not None else {}
    if labels.get(MANAGED_BY_LABEL) == MANAGED_BY and WORKSPACE_LABEL not in labels:
        _quietly(lambda: rbac.delete_namespaced_role_binding(ROLE_BINDING_NAME, namespace))


def mig_access(api: ApiClient, access: SliceAccess) -> None:
    """Make Role and RoleBinding "<name>-owner" say what _owner_rules grants to access.users
    (subjects replaced when they changed; none is allowed), and drop the team's old edit
    binding in the namespace. The namespace must exist. Raises CloudError
    ("AlreadyExists" for a Role or RoleBinding of that name that is not this workspace's)."""
    rbac = client.RbacAuthorizationV1Api(api)
    ns, name = access.namespace, f"{access.name}-owner"
    role, binding = _owner_objects(access)
    mine = lambda found: found.get(WORKSPACE_LABEL) == access.workspace_id  # noqa: E731
    with _errors():
        _drop_team_edit(rbac, ns)
        role_calls = (
            lambda: rbac.create_namespaced_role(ns, role),
            lambda: rbac.read_namespaced_role(name, ns),
            lambda body: rbac.patch_namespaced_role(name, ns, body),
        )
        _ensure_fields(api, "Role", name, role_calls, mine, {"rules": role["rules"]})
        binding_calls = (
            lambda: rbac.create_namespaced_role_binding(ns, binding),
            lambda: rbac.read_namespaced_role_binding(name, ns),
            lambda body: rbac.patch_namespaced_role_binding(name, ns, body),
        )
        fields = {"subjects": binding["subjects"]}
        _ensure_fields(api, "RoleBinding", name, binding_calls, mine, fields)
