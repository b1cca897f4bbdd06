"""What the API server does to an object before storing it: validation, defaulting,
LimitRange defaults and ResourceQuota admission.

Messages follow k8s.io/apimachinery's validation (RFC 1123 names, label values) and
plugin/pkg/admission/resourcequota (``exceeded quota: <name>, requested: ..., used: ...,
limited: ...``, quantities sorted by resource name and joined with ",").
"""

import base64
import re
from fractions import Fraction

from . import quantity
from .store import RESOURCES, Store, forbidden, invalid

LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_RULE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_RULE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
LABEL_NAMED = frozenset({"namespaces", "services"})  # Names that must be DNS labels.
# RBAC objects are named by path segments ("system:basic-user"): apimachinery's
# path.IsValidPathSegmentName.
SEGMENT_NAMED = frozenset({"roles", "rolebindings", "clusterroles", "clusterrolebindings"})
COMPUTE = ("cpu", "memory", "ephemeral-storage")
TERMINAL = frozenset({"Succeeded", "Failed"})


def validate_meta(plural: str, obj: dict) -> None:
    """422 Invalid for a bad name or label value."""
    res, meta = RESOURCES[plural], obj["metadata"]
    name = meta["name"]
    label = plural in LABEL_NAMED
    pattern, rule, limit = (LABEL, LABEL_RULE, 63) if label else (SUBDOMAIN, SUBDOMAIN_RULE, 253)
    if plural in SEGMENT_NAMED:
        why = _segment_error(name)
        if why:
            raise invalid(res, name, "metadata.name", f'Invalid value: "{name}": {why}')
    elif len(name) > limit or not pattern.match(name):
        raise invalid(res, name, "metadata.name", f'Invalid value: "{name}": {rule}')
    for key, value in (meta.get("labels") or {}).items():
        if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.match(value):
            why = f'Invalid value: "{value}": {LABEL_VALUE_RULE}'
            raise invalid(res, name, f"metadata.labels[{key}]", why)


def _segment_error(name: str) -> str:
    if name in (".", ".."):
        return f"may not be '{name}'"
    bad = next((c for c in "/%" if c in name), "")
    return f"may not contain '{bad}'" if bad else ""


def check_role_ref(plural: str, obj: dict) -> None:
    """422 Invalid for a binding whose roleRef names no Role or ClusterRole (a
    ClusterRoleBinding may only name a ClusterRole)."""
    res, name = RESOURCES[plural], obj["metadata"]["name"]
    ref = obj.get("roleRef") if isinstance(obj.get("roleRef"), dict) else {}
    kinds = ["ClusterRole"] if plural == "clusterrolebindings" else ["Role", "ClusterRole"]
    if ref.get("kind") not in kinds:
        values = ", ".join(f'"{k}"' for k in kinds)
        why = f'Unsupported value: "{ref.get("kind", "")}": supported values: {values}'
        raise invalid(res, name, "roleRef.kind", why)
    if not ref.get("name"):
        raise invalid(res, name, "roleRef.name", "Required value")
    ref.setdefault("apiGroup", "rbac.authorization.k8s.io")
    for index, subject in enumerate(obj.get("subjects") or []):
        if not isinstance(subject, dict) or subject.get("kind") not in (
            "User",
            "Group",
            "ServiceAccount",
        ):
            subject = subject if isinstance(subject, dict) else {}
            why = (
                f'Unsupported value: "{subject.get("kind", "")}": supported values: '
                '"ServiceAccount", "User", "Group"'
            )
            raise invalid(res, name, f"subjects[{index}].kind", why)


def _quantities(res, name: str, field: str, values) -> dict[str, Fraction]:
    try:
        return {key: quantity.parse(value) for key, value in (values or {}).items()}
    except ValueError as exc:
        raise invalid(res, name, field, str(exc)) from None


def container_resources(pod: dict) -> list[tuple[dict, dict]]:
    """(requests, limits) of each container as Fractions (the pod was validated on create)."""
    found = []
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        requests = {k: quantity.parse(v) for k, v in (resources.get("requests") or {}).items()}
        limits = {k: quantity.parse(v) for k, v in (resources.get("limits") or {}).items()}
        found.append((requests, limits))
    return found


def pod_requests(pod: dict) -> dict[str, Fraction]:
    """What the pod asks the scheduler for, summed over its containers, plus one "pods"."""
    total: dict[str, Fraction] = {"pods": Fraction(1)}
    for requests, _ in container_resources(pod):
        for key, value in requests.items():
            total[key] = total.get(key, Fraction(0)) + value
    return total


def default_pod(store: Store, pod: dict) -> None:
    """API defaulting (requests = limits where unset), then every LimitRange's defaults."""
    res, name = RESOURCES["pods"], pod["metadata"]["name"]
    spec = pod.setdefault("spec", {})
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise invalid(res, name, "spec.containers", "Required value")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    limit_items = [
        item
        for lr in store.items("limitranges", pod["metadata"]["namespace"])
        for item in (lr.get("spec") or {}).get("limits") or []
        if item.get("type") == "Container"
    ]
    for index, container in enumerate(containers):
        if (
            not isinstance(container, dict)
            or not container.get("name")
            or not container.get("image")
        ):
            raise invalid(res, name, f"spec.containers[{index}].image", "Required value")
        resources = container.setdefault("resources", {})
        requests = resources.setdefault("requests", {})
        limits = resources.setdefault("limits", {})
        field = f"spec.containers[{index}].resources"
        _quantities(res, name, field, requests | limits)
        for key, value in limits.items():
            requests.setdefault(key, value)
        for item in limit_items:
            for key, value in (item.get("default") or {}).items():
                limits.setdefault(key, value)
            for key, value in (item.get("defaultRequest") or {}).items():
                requests.setdefault(key, value)
        for key in [k for k in ("requests", "limits") if not resources[k]]:
            del resources[key]


def qos_class(pod: dict) -> str:
    pairs = container_resources(pod)
    if not any(requests or limits for requests, limits in pairs):
        return "BestEffort"
    guaranteed = all(
        all(limits.get(r) is not None and requests.get(r) == limits[r] for r in ("cpu", "memory"))
        for requests, limits in pairs
    )
    return "Guaranteed" if guaranteed else "Burstable"


def default_limit_range(obj: dict) -> None:
    """SetDefaults_LimitRangeItem: default from max, defaultRequest from default."""
    res, name = RESOURCES["limitranges"], obj["metadata"]["name"]
    for index, item in enumerate((obj.setdefault("spec", {})).get("limits") or []):
        for field in ("default", "defaultRequest", "max", "min"):
            _quantities(res, name, f"spec.limits[{index}].{field}", item.get(field))
        if item.get("type") != "Container":
            continue
        item["default"] = {**(item.get("max") or {}), **(item.get("default") or {})}
        item["defaultRequest"] = {**item["default"], **(item.get("defaultRequest") or {})}


def usage(plural: str, obj: dict) -> dict[str, Fraction]:
    """What an object counts against ResourceQuota, by quota resource name."""
    one = Fraction(1)
    if plural == "pods":
        phase = (obj.get("status") or {}).get("phase")
        if phase in TERMINAL or obj["metadata"].get("deletionTimestamp"):
            return {}
        found = {"pods": one, "count/pods": one}
        for requests, limits in container_resources(obj):
            for key, value in requests.items():
                names = [f"requests.{key}"] + ([key] if key in COMPUTE else [])
                for quota_name in names:
                    found[quota_name] = found.get(quota_name, Fraction(0)) + value
            for key in [k for k in limits if k in COMPUTE]:
                found[f"limits.{key}"] = found.get(f"limits.{key}", Fraction(0)) + limits[key]
        return found
    if plural == "persistentvolumeclaims":
        storage = ((obj.get("spec") or {}).get("resources") or {}).get("requests") or {}
        size = quantity.parse(storage.get("storage", 0))
        return {"persistentvolumeclaims": one, "requests.storage": size, "count/pvc": one}
    if plural in ("services", "secrets", "configmaps"):
        return {plural: one, f"count/{plural}": one}
    return {}


def namespace_usage(store: Store, namespace: str) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for plural in ("pods", "persistentvolumeclaims", "services", "secrets", "configmaps"):
        for obj in store.items(plural, namespace):
            for key, value in usage(plural, obj).items():
                total[key] = total.get(key, Fraction(0)) + value
    return total


def _pretty(values: dict[str, Fraction], keys: list[str]) -> str:
    return ",".join(f"{k}={quantity.render(values.get(k, Fraction(0)))}" for k in keys)


def admit_quota(store: Store, plural: str, obj: dict) -> None:
    """403 Forbidden when the new object would take a namespace over any quota's hard limit."""
    delta = usage(plural, obj)
    if not delta:
        return
    namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    used = namespace_usage(store, namespace)
    for quota in store.items("resourcequotas", namespace):
        hard = {
            k: quantity.parse(v) for k, v in ((quota.get("spec") or {}).get("hard") or {}).items()
        }
        exceeded = sorted(
            key
            for key, limit in hard.items()
            if delta.get(key, 0) > 0 and used.get(key, Fraction(0)) + delta[key] > limit
        )
        if exceeded:
            why = (
                f"exceeded quota: {quota['metadata']['name']}, "
                f"requested: {_pretty(delta, exceeded)}, used: {_pretty(used, exceeded)}, "
                f"limited: {_pretty(hard, exceeded)}"
            )
            raise forbidden(RESOURCES[plural], name, why)


def quota_status(store: Store, quota: dict) -> dict:
    """status.hard (as written in spec) and status.used for each hard resource."""
    hard = dict((quota.get("spec") or {}).get("hard") or {})
    used = namespace_usage(store, quota["metadata"]["namespace"])
    return {"hard": hard, "used": {k: quantity.render(used.get(k, Fraction(0))) for k in hard}}


def encode_string_data(secret: dict) -> None:
    """stringData is write-only: folded into data (base64) as the API server does."""
    strings = secret.pop("stringData", None) or {}
    data = dict(secret.get("data") or {})
    data.update({k: base64.b64encode(str(v).encode()).decode() for k, v in strings.items()})
    if data:
        secret["data"] = data
    secret.setdefault("type", "Opaque")
