"""Who calls the simulated API server, and whether RBAC lets them.

Authentication: every bearer token is the cluster's admin, as the admin kubeconfig of AKS
(listClusterAdminCredential) is: user "masterclient" in group "system:masters", which the
built-in ClusterRoleBinding "cluster-admin" binds to ClusterRole "cluster-admin". The emulator
has no Entra ID, so a caller acts as a user with Kubernetes' impersonation headers
(https://kubernetes.io/docs/reference/access-authn-authz/authentication/#user-impersonation):
``Impersonate-User: <name>`` and ``Impersonate-Group: <group>`` (repeated lines, which the
emulator's server joins with ", ", or one comma-separated line; group names with commas are not
supported). On AKS with Entra ID the name is the user's UPN (their object id for guests) and the
groups are group object ids. The impersonated user also belongs to "system:authenticated".
Impersonating needs the "impersonate" verb on users and groups (cluster-admin has it).

Authorization is the RBAC authorizer's
(https://kubernetes.io/docs/reference/access-authn-authz/rbac/): ClusterRoleBindings apply
everywhere, RoleBindings in their namespace, to subjects of kind User, Group and
ServiceAccount; a rule allows a request when its verbs, apiGroups, resources ("pods/exec" for a
subresource, "*" and "*/<subresource>" as wildcards) and resourceNames (empty: any) match. A
refusal is the API server's 403 Status (``secrets "x" is forbidden: User "u" cannot get
resource "secrets" in API group "" in the namespace "ns"``). Not emulated: the escalation
check on writing roles and bindings, non-resource URLs (/version is open to everyone).
"""

import copy
from dataclasses import dataclass

from .store import KubeError, Store

ADMIN_USER = "masterclient"
MASTERS, AUTHENTICATED = "system:masters", "system:authenticated"
RBAC_GROUP = "rbac.authorization.k8s.io"
READ = ("get", "list", "watch")
WRITE = ("create", "delete", "deletecollection", "patch", "update")
ALL = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...]


ADMIN = UserInfo(ADMIN_USER, (MASTERS, AUTHENTICATED))


@dataclass(frozen=True)
class Attributes:
    """What a request does, as the API server's request info resolver names it: verb ("get",
    "list", "watch", "create", "update", "patch", "delete", "deletecollection", "impersonate"),
    API group ("" for core), resource plural, subresource ("exec", "portforward", "log"...),
    namespace ("" at cluster scope) and object name ("" for a collection)."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""


def _rule(groups, resources, verbs, names=()) -> dict:
    rule = {"apiGroups": list(groups), "resources": list(resources), "verbs": list(verbs)}
    if names:
        rule["resourceNames"] = list(names)
    return rule


# The bootstrap policy's rules, as `kubectl get clusterrole -o yaml` shows them on 1.31
# (kubernetes/kubernetes plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata/
# cluster-roles.yaml; https://kubernetes.io/docs/reference/access-authn-authz/rbac/#user-facing-roles).
# admin, edit and view are aggregated from the system:aggregate-to-* roles by label: view
# carries aggregate-to-edit and edit aggregate-to-admin, so edit holds view's rules and admin
# edit's. edit reads secrets and may exec, attach and port-forward; view reads no secrets.
_POD_ACCESS = ("pods/attach", "pods/exec", "pods/portforward", "pods/proxy")
AGGREGATE_TO_VIEW = [
    _rule([""], ["configmaps", "endpoints", "persistentvolumeclaims",
                 "persistentvolumeclaims/status", "pods", "replicationcontrollers",
                 "replicationcontrollers/scale", "serviceaccounts", "services",
                 "services/status"], READ),
    _rule([""], ["bindings", "events", "limitranges", "namespaces/status", "pods/log",
                 "pods/status", "replicationcontrollers/status", "resourcequotas",
                 "resourcequotas/status"], READ),
    _rule([""], ["namespaces"], READ),
    _rule(["discovery.k8s.io"], ["endpointslices"], READ),
    _rule(["apps"], ["controllerrevisions", "daemonsets", "daemonsets/status", "deployments",
                     "deployments/scale", "deployments/status", "replicasets",
                     "replicasets/scale", "replicasets/status", "statefulsets",
                     "statefulsets/scale", "statefulsets/status"], READ),
    _rule(["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"], READ),
    _rule(["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"], READ),
    _rule(["extensions"], ["daemonsets", "daemonsets/status", "deployments", "deployments/scale",
                           "deployments/status", "ingresses", "ingresses/status",
                           "networkpolicies", "replicasets", "replicasets/scale",
                           "replicasets/status", "replicationcontrollers/scale"], READ),
    _rule(["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"], READ),
    _rule(["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"], READ),
]  # fmt: skip
AGGREGATE_TO_EDIT = [
    _rule([""], [*_POD_ACCESS, "secrets", "services/proxy"], READ),
    _rule([""], ["serviceaccounts"], ["impersonate"]),
    _rule([""], ["pods", *_POD_ACCESS], WRITE),
    _rule([""], ["pods/eviction"], ["create"]),
    _rule([""], ["configmaps", "events", "persistentvolumeclaims", "replicationcontrollers",
                 "replicationcontrollers/scale", "secrets", "serviceaccounts", "services",
                 "services/proxy"], WRITE),
    _rule([""], ["serviceaccounts/token"], ["create"]),
    _rule(["apps"], ["daemonsets", "deployments", "deployments/rollback", "deployments/scale",
                     "replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale"],
          WRITE),
    _rule(["autoscaling"], ["horizontalpodautoscalers"], WRITE),
    _rule(["batch"], ["cronjobs", "jobs"], WRITE),
    _rule(["extensions"], ["daemonsets", "deployments", "deployments/rollback",
                           "deployments/scale", "ingresses", "networkpolicies", "replicasets",
                           "replicasets/scale", "replicationcontrollers/scale"], WRITE),
    _rule(["policy"], ["poddisruptionbudgets"], WRITE),
    _rule(["networking.k8s.io"], ["ingresses", "networkpolicies"], WRITE),
    _rule(["coordination.k8s.io"], ["leases"], ALL),
]  # fmt: skip
AGGREGATE_TO_ADMIN = [
    _rule(["authorization.k8s.io"], ["localsubjectaccessreviews"], ["create"]),
    _rule([RBAC_GROUP], ["rolebindings", "roles"], ALL),
]  # fmt: skip
BASIC_USER = [
    _rule(["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
          ["create"]),
    _rule(["authentication.k8s.io"], ["selfsubjectreviews"], ["create"]),
]  # fmt: skip
CLUSTER_ADMIN = [_rule(["*"], ["*"], ["*"]), {"nonResourceURLs": ["*"], "verbs": ["*"]}]
AGGREGATE_LABEL = "rbac.authorization.k8s.io/aggregate-to-{}"


def _cluster_role(name: str, rules: list | None, labels=(), aggregate_from: str = "") -> dict:
    meta = {
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults", **dict(labels)},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    }
    role = {"metadata": meta, "rules": copy.deepcopy(rules) if rules is not None else []}
    if aggregate_from:
        selector = {"matchLabels": {AGGREGATE_LABEL.format(aggregate_from): "true"}}
        role["aggregationRule"] = {"clusterRoleSelectors": [selector]}
    return role


def _cluster_binding(name: str, group: str) -> dict:
    meta = {
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    }
    subject = {"kind": "Group", "apiGroup": RBAC_GROUP, "name": group}
    role_ref = {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name}
    return {"metadata": meta, "roleRef": role_ref, "subjects": [subject]}


def bootstrap() -> list[tuple[str, dict]]:
    """(plural, object) of the built-in ClusterRoles and ClusterRoleBindings a new cluster has."""
    to = AGGREGATE_LABEL.format
    roles = [
        _cluster_role("cluster-admin", CLUSTER_ADMIN),
        _cluster_role("admin", None, aggregate_from="admin"),
        _cluster_role("edit", None, {to("admin"): "true"}, aggregate_from="edit"),
        _cluster_role("view", None, {to("edit"): "true"}, aggregate_from="view"),
        _cluster_role("system:aggregate-to-admin", AGGREGATE_TO_ADMIN, {to("admin"): "true"}),
        _cluster_role("system:aggregate-to-edit", AGGREGATE_TO_EDIT, {to("edit"): "true"}),
        _cluster_role("system:aggregate-to-view", AGGREGATE_TO_VIEW, {to("view"): "true"}),
        _cluster_role("system:basic-user", BASIC_USER),
    ]
    bindings = [
        _cluster_binding("cluster-admin", MASTERS),
        _cluster_binding("system:basic-user", AUTHENTICATED),
    ]
    return [("clusterroles", r) for r in roles] + [("clusterrolebindings", b) for b in bindings]


def _selected(role: dict, selectors: list) -> bool:
    labels = role["metadata"].get("labels") or {}
    for selector in selectors:
        wanted = (selector or {}).get("matchLabels") or {}
        if wanted and all(labels.get(k) == v for k, v in wanted.items()):
            return True
    return False


def aggregate(store: Store) -> None:
    """The clusterrole-aggregation controller: a ClusterRole with an aggregationRule gets the
    rules of the ClusterRoles its selectors match, by name order, without duplicates; run until
    nothing changes, so edit holds view's rules and admin edit's."""
    for _ in range(5):
        changed = False
        roles = sorted(store.items("clusterroles"), key=lambda r: r["metadata"]["name"])
        for role in roles:
            selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors")
            if not selectors:
                continue
            rules: list = []
            for other in roles:
                if other is not role and _selected(other, selectors):
                    rules += [r for r in other.get("rules") or [] if r not in rules]
            if rules != role.get("rules"):
                changed |= store.save("clusterroles", {**role, "rules": rules})
        if not changed:
            return


# --- authorization --------------------------------------------------------------------------


def _subject_matches(subject: dict, user: UserInfo, binding_namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == user.name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return user.name == f"system:serviceaccount:{namespace}:{name}"
    return False


def _describe(subject: dict, binding_namespace: str) -> str:
    if subject.get("kind") == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return f'ServiceAccount "{subject.get("name")}/{namespace}"'
    return f'{subject.get("kind")} "{subject.get("name")}"'


def rule_allows(rule: dict, attrs: Attributes) -> bool:
    """Whether one PolicyRule allows a resource request (k8s.io/kubernetes
    pkg/apis/rbac/v1/evaluation_helpers.go: VerbMatches, APIGroupMatches, ResourceMatches,
    ResourceNameMatches)."""
    if "*" not in rule.get("verbs", []) and attrs.verb not in rule.get("verbs", []):
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and attrs.group not in groups:
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    resources = rule.get("resources") or []
    if not any(
        r in ("*", combined) or (attrs.subresource and r == f"*/{attrs.subresource}")
        for r in resources
    ):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _role_rules(store: Store, role_ref: dict, namespace: str) -> list:
    if role_ref.get("kind") == "ClusterRole":
        role = store.get("clusterroles", "", role_ref.get("name", ""))
    elif role_ref.get("kind") == "Role" and namespace:
        role = store.get("roles", namespace, role_ref.get("name", ""))
    else:
        role = None
    return (role or {}).get("rules") or []


def authorize(store: Store, user: UserInfo, attrs: Attributes) -> str | None:
    """The RBAC authorizer: ``RBAC: allowed by <binding>`` naming the first binding and rule
    that allow the request, or None (refused: Kubernetes has no deny rules)."""
    scopes = [("clusterrolebindings", "")]
    if attrs.namespace:
        scopes.append(("rolebindings", attrs.namespace))
    for plural, namespace in scopes:
        for binding in store.items(plural, namespace or None):
            role_ref, name = binding.get("roleRef") or {}, binding["metadata"]["name"]
            for subject in binding.get("subjects") or []:
                if not _subject_matches(subject, user, namespace):
                    continue
                if any(rule_allows(r, attrs) for r in _role_rules(store, role_ref, namespace)):
                    kind = "RoleBinding" if namespace else "ClusterRoleBinding"
                    where = f"{name}/{namespace}" if namespace else name
                    return (
                        f'RBAC: allowed by {kind} "{where}" of {role_ref.get("kind")} '
                        f'"{role_ref.get("name")}" to {_describe(subject, namespace)}'
                    )
    return None


def forbidden(user: UserInfo, attrs: Attributes) -> KubeError:
    """The API server's 403 (k8s.io/apiserver endpoints/handlers/responsewriters.Forbidden):
    the group-qualified resource and name, then who cannot do what where."""
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    why = (
        f'User "{user.name}" cannot {attrs.verb} resource "{resource}" in API group '
        f'"{attrs.group}" {where}'
    )
    qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    named = f' "{attrs.name}"' if attrs.name else ""
    details = {"name": attrs.name, "group": attrs.group, "kind": attrs.resource}
    details = {k: v for k, v in details.items() if v}
    return KubeError(403, "Forbidden", f"{qualified}{named} is forbidden: {why}", details)


def check(store: Store, user: UserInfo, attrs: Attributes) -> None:
    """Raise the 403 Status unless RBAC allows the request."""
    if authorize(store, user, attrs) is None:
        raise forbidden(user, attrs)


def caller(store: Store, headers: dict[str, str]) -> UserInfo:
    """Who the request acts as: the admin, or whom its Impersonate-* headers name, once the
    admin may impersonate them (else 403 naming the user or group refused)."""
    name = headers.get("impersonate-user", "").strip()
    groups = [g.strip() for g in headers.get("impersonate-group", "").split(",") if g.strip()]
    if not name:
        if groups:
            raise KubeError(
                500,
                "InternalError",
                f"Internal error occurred: requested groups {groups} without impersonating a user",
            )
        return ADMIN
    asked = [Attributes("impersonate", "", "users", name=name)]
    asked += [Attributes("impersonate", "", "groups", name=group) for group in groups]
    for attrs in asked:
        check(store, ADMIN, attrs)
    return UserInfo(name, (*groups, AUTHENTICATED))


VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def verb_of(method: str, named: bool, watch: bool) -> str:
    """The RBAC verb of an HTTP request (a GET of a connect subresource is "get", a POST
    "create", as the API server maps them)."""
    if method in ("GET", "HEAD"):
        return "watch" if watch else ("get" if named else "list")
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    return VERBS.get(method, method.lower())


def access_review(store: Store, user: UserInfo, body: dict) -> dict:
    """A SelfSubjectAccessReview answered for `user` (status.allowed, and the reason when
    allowed); only spec.resourceAttributes is supported. KeyError when it is missing."""
    asked = body["spec"]["resourceAttributes"]
    attrs = Attributes(
        verb=asked.get("verb", ""),
        group=asked.get("group", ""),
        resource=asked.get("resource", ""),
        subresource=asked.get("subresource", ""),
        namespace=asked.get("namespace", ""),
        name=asked.get("name", ""),
    )
    reason = authorize(store, user, attrs)
    status = {"allowed": reason is not None, **({"reason": reason} if reason else {})}
    return {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": body["spec"],
        "status": status,
    }
