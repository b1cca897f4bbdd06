"""Team namespaces on AKS: a namespace per workspace with its ResourceQuota and LimitRange and
the team group's RoleBinding; stop (scale workloads to 0, remembering replicas), start,
delete, and read its phase and GPU pods.

Errors raised: CloudError (cloud.kube_core.from_kube).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client import ApiClient

from .kube_core import (
    DEFAULT_LIMIT,
    DEFAULT_REQUEST,
    GPU,
    LIMIT_RANGE_NAME,
    MIG_PREFIX,
    NETWORK_POLICY_NAME,
    QUOTA_NAME,
    REPLICAS_ANNOTATION,
    ROLE_BINDING_NAME,
    WORKSPACE_LABEL,
    _errors,
    _gpu_requests,
    _labels,
    _meta,
    _missing,
    _quietly,
    dns_label,
)
from .kube_ensure import Namespaced, namespace_create, objects_create, owned_by
from .kube_lab import LabSpec, lab_objects
from .kube_nfs import NfsVolume, nfs_ensure, nfs_release


@dataclass(frozen=True)
class NamespaceSpec:
    """A team namespace workspace. name: a DNS-1123 label (see dns_label); group_object_id: the
    team's Entra ID group (RoleBinding subject, kind Group); gpus: requests.nvidia.com/gpu;
    mig: (("1g.10gb", 7),) -> requests.nvidia.com/mig-1g.10gb: 7; cpu, memory: requests.cpu
    and requests.memory quota as Kubernetes quantities."""

    workspace_id: str
    name: str
    group_object_id: str
    gpus: int
    mig: tuple[tuple[str, int], ...] = ()
    cpu: str = "32"
    memory: str = "256Gi"
    labels: tuple[tuple[str, str], ...] = ()
    # The team's shares and the owner's home as claims "nfs-<share>" its pods mount
    # (cloud.kube_nfs); read-only ones are read-only on the volume itself, since the team may
    # write any pod spec in its namespace.
    nfs: tuple[NfsVolume, ...] = ()
    # Its JupyterLab (cloud.kube_lab), which the portal's app proxy opens; None: none.
    lab: LabSpec | None = None


def _hard(spec: NamespaceSpec) -> dict[str, str]:
    hard = {f"requests.{GPU}": str(spec.gpus)}
    hard.update({f"requests.{MIG_PREFIX}{profile}": str(n) for profile, n in spec.mig})
    hard.update({"requests.cpu": spec.cpu, "requests.memory": spec.memory})
    return hard


def _namespace_objects(spec: NamespaceSpec, labels: dict[str, Any]) -> list[Namespaced]:
    ns = spec.name
    quota = {"metadata": _meta(QUOTA_NAME, labels, ns), "spec": {"hard": _hard(spec)}}
    limits = [{"type": "Container", "default": DEFAULT_LIMIT, "defaultRequest": DEFAULT_REQUEST}]
    limit_range = {"metadata": _meta(LIMIT_RANGE_NAME, labels, ns), "spec": {"limits": limits}}
    binding = {
        "metadata": _meta(ROLE_BINDING_NAME, labels, ns),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [
            {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": spec.group_object_id}
        ],
    }
    policy_spec = {
        "podSelector": {},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {}}]}],
    }
    policy = {"metadata": _meta(NETWORK_POLICY_NAME, labels, ns), "spec": policy_spec}
    return [
        ("ResourceQuota", "CoreV1Api", "resource_quota", quota),
        ("LimitRange", "CoreV1Api", "limit_range", limit_range),
        ("RoleBinding", "RbacAuthorizationV1Api", "role_binding", binding),
        ("NetworkPolicy", "NetworkingV1Api", "network_policy", policy),
    ]


def namespace_ensure(api: ApiClient, spec: NamespaceSpec) -> None:
    """Create what is missing of: the namespace, ResourceQuota "portal-quota", LimitRange
    "portal-defaults", RoleBinding "team-edit" (ClusterRole edit to the team's group),
    NetworkPolicy "deny-other-namespaces" (ingress only from pods of this namespace), the
    share claims, and with ``spec.lab`` its JupyterLab (cloud.kube_lab.lab_objects, after the
    claims it mounts; its requests count in the quota).
    Raises ValueError for a bad name, CloudError("AlreadyExists") for a name someone else
    holds, other CloudErrors as refused."""
    if dns_label(spec.name) != spec.name:
        raise ValueError(f"namespace {spec.name!r} is not a DNS-1123 label")
    labels, owned = _labels(spec.workspace_id, spec.labels), owned_by(spec.workspace_id)
    namespace_create(api, spec.name, labels, owned)
    objects_create(api, spec.name, _namespace_objects(spec, labels), owned)
    nfs_ensure(api, spec.name, spec.nfs, enforce_read_only=True)
    if spec.lab is not None:
        objects_create(api, spec.name, lab_objects(spec.lab, labels, spec.name, spec.nfs), owned)


def _workloads(api: ApiClient, namespace: str) -> Iterator[tuple[Callable[..., Any], Any]]:
    """(patch function, object) of every Deployment and StatefulSet in the namespace."""
    apps = client.AppsV1Api(api)
    for obj in apps.list_namespaced_deployment(namespace).items:
        yield apps.patch_namespaced_deployment, obj
    for obj in apps.list_namespaced_stateful_set(namespace).items:
        yield apps.patch_namespaced_stateful_set, obj


def namespace_stop(api: ApiClient, *, name: str) -> None:
    """GPU and MIG quota to 0; every Deployment and StatefulSet scaled to 0, its replicas kept
    in annotation REPLICAS_ANNOTATION (a second run changes nothing). Raises CloudError."""
    core = client.CoreV1Api(api)
    with _errors():
        quota = _quietly(lambda: core.read_namespaced_resource_quota(QUOTA_NAME, name))
        if quota is not None:
            hard = quota.spec.hard or {}
            zero = {
                k: "0"
                for k in hard
                if k == f"requests.{GPU}" or k.startswith(f"requests.{MIG_PREFIX}")
            }
            core.patch_namespaced_resource_quota(QUOTA_NAME, name, {"spec": {"hard": zero}})
        for patch, obj in _workloads(api, name):
            replicas = 1 if obj.spec.replicas is None else obj.spec.replicas
            if replicas > 0:
                annotations = {REPLICAS_ANNOTATION: str(replicas)}
                body = {"metadata": {"annotations": annotations}, "spec": {"replicas": 0}}
                patch(obj.metadata.name, name, body)


def namespace_start(api: ApiClient, spec: NamespaceSpec) -> None:
    """namespace_ensure, the quota back to the spec's, and each stopped workload back to the
    replicas its annotation remembers. Raises as namespace_ensure."""
    namespace_ensure(api, spec)
    core = client.CoreV1Api(api)
    with _errors():
        current = core.read_namespaced_resource_quota(QUOTA_NAME, spec.name).spec.hard or {}
        hard: dict[str, str | None] = {k: None for k in current}
        hard.update(_hard(spec))
        core.patch_namespaced_resource_quota(QUOTA_NAME, spec.name, {"spec": {"hard": hard}})
        for patch, obj in _workloads(api, spec.name):
            remembered = (obj.metadata.annotations or {}).get(REPLICAS_ANNOTATION)
            if remembered is not None and remembered.isdigit():
                annotations = {REPLICAS_ANNOTATION: None}
                body = {
                    "metadata": {"annotations": annotations},
                    "spec": {"replicas": int(remembered)},
                }
                patch(obj.metadata.name, spec.name, body)


def namespace_delete(api: ApiClient, *, name: str, workspace_id: str) -> bool:
    """Delete the namespace if it is the workspace's (its WORKSPACE_LABEL; everything in it goes
    with it), then the PersistentVolumes of its shares' claims (kube_nfs.nfs_release; never a
    share). True once it is gone or is not the workspace's (someone else's is never touched),
    False while it is Terminating. Raises CloudError."""
    core = client.CoreV1Api(api)
    with _errors():
        found = _quietly(lambda: core.read_namespace(name))
        if found is not None:
            if (found.metadata.labels or {}).get(WORKSPACE_LABEL) != workspace_id:
                return True
            _quietly(lambda: core.delete_namespace(name))
            if not _missing(lambda: core.read_namespace(name)):
                return False
    # Gone (now, or by an earlier call of a delete tried again): its volumes go too.
    nfs_release(api, namespace=name)
    return True


def namespace_phase(api: ApiClient, *, name: str) -> str:
    """ "Active", "Terminating" or "Absent". Raises CloudError."""
    with _errors():
        found = _quietly(lambda: client.CoreV1Api(api).read_namespace(name))
    return "Absent" if found is None else (found.status.phase or "Active")


def namespace_gpu_pods(api: ApiClient, *, name: str) -> int:
    """Running pods in the namespace that request nvidia.com/gpu or nvidia.com/mig-*
    (what idle detection counts). Raises CloudError."""
    with _errors():
        pods = client.CoreV1Api(api).list_namespaced_pod(
            name, field_selector="status.phase=Running"
        )
    return sum(1 for pod in pods.items if any(_gpu_requests(pod).values()))
