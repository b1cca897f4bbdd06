"""One simulated API server's objects, resourceVersion counter, errors and events.

Objects are stored as the JSON the API returns (dicts with apiVersion, kind, metadata...).
Every write bumps the cluster's resourceVersion; writing an unchanged object is no write, so
polling a quiet cluster leaves its resourceVersion alone.
"""

import copy
import hashlib
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class Resource:
    """A served resource type: URL group/version/plural, kind, namespaced or not."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """The name errors use: "pods", "deployments.apps"."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCES = {
    r.plural: r
    for r in (
        Resource("", "v1", "namespaces", "Namespace", namespaced=False),
        Resource("", "v1", "nodes", "Node", namespaced=False),
        Resource("", "v1", "pods", "Pod"),
        Resource("", "v1", "services", "Service"),
        Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
        Resource("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False),
        Resource("", "v1", "secrets", "Secret"),
        Resource("", "v1", "configmaps", "ConfigMap"),
        Resource("", "v1", "resourcequotas", "ResourceQuota"),
        Resource("", "v1", "limitranges", "LimitRange"),
        Resource("", "v1", "events", "Event"),
        Resource("apps", "v1", "deployments", "Deployment"),
        Resource("apps", "v1", "statefulsets", "StatefulSet"),
        Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
        Resource("rbac.authorization.k8s.io", "v1", "roles", "Role"),
        Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
        Resource(
            "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
        ),
        Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy"),
    )
}
BY_KIND = {r.kind: r for r in RESOURCES.values()}
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class KubeError(Exception):
    """A refused request, answered as a Kubernetes Status body."""

    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def body(self) -> dict:
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def details(res: Resource, name: str, **extra) -> dict:
    """Status.details as the API server words it (group only for non-core resources)."""
    found = {"name": name, **({"group": res.group} if res.group else {}), "kind": res.plural}
    if not name:
        del found["name"]  # Go's StatusDetails: `json:"name,omitempty"`.
    return {**found, **extra}


def not_found(res: Resource, name: str) -> KubeError:
    return KubeError(404, "NotFound", f'{res.qualified} "{name}" not found', details(res, name))


def already_exists(res: Resource, name: str) -> KubeError:
    message = f'{res.qualified} "{name}" already exists'
    return KubeError(409, "AlreadyExists", message, details(res, name))


def conflict(res: Resource, name: str) -> KubeError:
    message = (
        f'Operation cannot be fulfilled on {res.qualified} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )
    return KubeError(409, "Conflict", message, details(res, name))


def forbidden(res: Resource, name: str, why: str, **extra) -> KubeError:
    message = f'{res.qualified} "{name}" is forbidden: {why}'
    return KubeError(403, "Forbidden", message, details(res, name, **extra))


def invalid(res: Resource, name: str, field: str, why: str) -> KubeError:
    """422 Invalid, e.g. `Pod "x" is invalid: spec.containers: Required value`."""
    kind = f"{res.kind}.{res.group}" if res.group else res.kind
    causes = [{"reason": "FieldValueInvalid", "message": why, "field": field}]
    message = f'{kind} "{name}" is invalid: {field}: {why}'
    return KubeError(422, "Invalid", message, details(res, name, causes=causes))


def bad_request(message: str) -> KubeError:
    return KubeError(400, "BadRequest", message)


def timestamp(now: float) -> str:
    """RFC 3339 seconds in UTC, as metadata timestamps are written."""
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def short_hash(text: str, size: int = 10) -> str:
    """A stable suffix from the pod-name alphabet of k8s.io/apimachinery/pkg/util/rand."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    number = int(hashlib.sha256(text.encode()).hexdigest(), 16)
    chars = []
    for _ in range(size):
        number, index = divmod(number, len(alphabet))
        chars.append(alphabet[index])
    return "".join(chars)


class Store:
    """Objects of one cluster by resource plural and (namespace, name)."""

    def __init__(self):
        self.rv = 0
        self.objects: dict[str, dict[tuple[str, str], dict]] = {p: {} for p in RESOURCES}

    def bump(self) -> str:
        self.rv += 1
        return str(self.rv)

    def get(self, plural: str, namespace: str, name: str) -> dict | None:
        return self.objects[plural].get((namespace or "", name))

    def items(self, plural: str, namespace: str | None = None) -> list[dict]:
        """Objects of a resource (of one namespace if given), oldest first."""
        found = [
            obj
            for (ns, _), obj in self.objects[plural].items()
            if namespace is None or ns == namespace
        ]
        return sorted(found, key=lambda o: int(o["metadata"]["resourceVersion"]))

    def insert(self, plural: str, obj: dict, now: float) -> dict:
        """Store a new object, giving it uid, resourceVersion and creationTimestamp."""
        res, meta = RESOURCES[plural], obj.setdefault("metadata", {})
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        meta.setdefault("uid", str(uuid.uuid4()))
        meta["creationTimestamp"] = timestamp(now)
        meta["resourceVersion"] = self.bump()
        self.objects[plural][(meta.get("namespace", ""), meta["name"])] = obj
        return obj

    def save(self, plural: str, obj: dict) -> bool:
        """Replace the stored object with `obj` if it differs; True when it was written."""
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        current = self.objects[plural].get(key)
        if current is not None and _same(current, obj):
            return False
        meta["resourceVersion"] = self.bump()
        self.objects[plural][key] = obj
        return True

    def remove(self, plural: str, namespace: str, name: str) -> dict | None:
        obj = self.objects[plural].pop((namespace or "", name), None)
        if obj is not None:
            self.bump()
        return obj


def _same(a: dict, b: dict) -> bool:
    def strip(obj: dict) -> dict:
        copied = copy.copy(obj)
        copied["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
        return copied

    return strip(a) == strip(b)
