"""The simulated API server enforces RBAC: the built-in roles, Roles and bindings to users and
groups, subresources and resourceNames, impersonation, the 403 Status and access reviews,
through the real kubernetes client."""

import http.client
import json
from urllib.parse import urlsplit

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from .conftest import kube_error

RBAC = "rbac.authorization.k8s.io"
TEAM = "6f1c2a7e-1111-4222-8333-944455556666"


def as_user(kube, user: str, *groups: str):
    """CoreV1Api acting as `user` in `groups`, by impersonation (the kubectl --as/--as-group
    headers) on the admin's token."""
    api = client.ApiClient(kube.api.configuration)
    api.set_default_header("Impersonate-User", user)
    if groups:
        api.set_default_header("Impersonate-Group", ", ".join(groups))
    return client.CoreV1Api(api)


def bind(
    kube, namespace: str, name: str, role: str, *subjects: tuple[str, str], kind="ClusterRole"
):
    body = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": RBAC, "kind": kind, "name": role},
        "subjects": [{"kind": k, "apiGroup": RBAC, "name": n} for k, n in subjects],
    }
    client.RbacAuthorizationV1Api(kube.api).create_namespaced_role_binding(namespace, body)


def team_namespace(kube, namespace="team-a") -> None:
    """A namespace with a running pod "p-0", a pod "p-1" and a Secret "tokens"."""
    kube.namespace(namespace)
    for name in ("p-0", "p-1"):
        kube.core.create_namespaced_pod(namespace, kube.pod(name))
    secret = {"metadata": {"name": "tokens"}, "stringData": {"token": "s3cret"}}
    kube.core.create_namespaced_secret(namespace, secret)


def refused(call) -> dict:
    with pytest.raises(ApiException) as caught:
        call()
    status, body = kube_error(caught.value)
    assert status == 403, body
    return body


def connect(call) -> str:
    """The message of an authorized exec/port-forward: the API server wants an upgrade."""
    with pytest.raises(ApiException) as caught:
        call()
    status, body = kube_error(caught.value)
    assert (status, body["reason"]) == (400, "BadRequest"), body
    return body["message"]


def test_the_built_in_roles_are_kubernetes_aggregated_ones(kube):
    rbac = client.RbacAuthorizationV1Api(kube.api)

    def rules(name):
        return [r.to_dict() for r in rbac.read_cluster_role(name).rules]

    def allows(name, verb, resource):
        return any(
            verb in r["verbs"] and "" in r["api_groups"] and resource in r["resources"]
            for r in rules(name)
        )

    assert allows("edit", "get", "secrets") and allows("edit", "create", "pods/exec")
    assert allows("edit", "create", "pods/portforward") and allows("edit", "get", "pods/log")
    assert not allows("view", "get", "secrets") and not allows("view", "create", "pods/exec")
    assert allows("view", "get", "pods/log") and allows("view", "list", "pods")
    assert all(r in rules("admin") for r in rules("edit"))
    assert all(r in rules("edit") for r in rules("view"))
    edit = rbac.read_cluster_role("edit")
    assert edit.aggregation_rule.cluster_role_selectors[0].match_labels == {
        f"{RBAC}/aggregate-to-edit": "true"
    }
    admins = rbac.read_cluster_role_binding("cluster-admin")
    assert [(s.kind, s.name) for s in admins.subjects] == [("Group", "system:masters")]


def test_a_user_without_a_binding_is_refused_with_the_api_servers_status(kube):
    team_namespace(kube)
    carol = as_user(kube, "carol@contoso.com", TEAM)
    body = refused(lambda: carol.read_namespaced_secret("tokens", "team-a"))
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'secrets "tokens" is forbidden: User "carol@contoso.com" cannot get resource '
        '"secrets" in API group "" in the namespace "team-a"',
        "reason": "Forbidden",
        "details": {"name": "tokens", "kind": "secrets"},
        "code": 403,
    }
    body = refused(lambda: carol.list_namespaced_secret("team-a"))
    assert body["message"] == (
        'secrets is forbidden: User "carol@contoso.com" cannot list resource "secrets" in API '
        'group "" in the namespace "team-a"'
    )
    assert body["details"] == {"kind": "secrets"}
    body = refused(lambda: client.AppsV1Api(carol.api_client).list_deployment_for_all_namespaces())
    assert body["message"] == (
        'deployments.apps is forbidden: User "carol@contoso.com" cannot list resource '
        '"deployments" in API group "apps" at the cluster scope'
    )


def test_edit_for_a_group_reads_secrets_and_execs_in_its_namespace_only(kube):
    team_namespace(kube)
    kube.namespace("elsewhere")
    bind(kube, "team-a", "team-edit", "edit", ("Group", TEAM))
    carol = as_user(kube, "carol@contoso.com", TEAM)
    assert carol.read_namespaced_secret("tokens", "team-a").data["token"]
    assert connect(
        lambda: carol.connect_post_namespaced_pod_exec("p-0", "team-a", command="env")
    ) == ("Upgrade request required")
    assert connect(
        lambda: carol.connect_post_namespaced_pod_portforward("p-1", "team-a", ports=8888)
    ) == ("Upgrade request required")
    refused(lambda: carol.list_namespaced_secret("elsewhere"))
    # Someone outside the group gets nothing.
    refused(lambda: as_user(kube, "bob@contoso.com").read_namespaced_pod("p-0", "team-a"))


def test_view_reads_pods_and_logs_but_no_secrets_and_no_exec(kube):
    team_namespace(kube)
    bind(kube, "team-a", "team-view", "view", ("Group", TEAM))
    carol = as_user(kube, "carol@contoso.com", TEAM)
    assert {p.metadata.name for p in carol.list_namespaced_pod("team-a").items} == {"p-0", "p-1"}
    log = carol.read_namespaced_pod_log("p-0", "team-a", _preload_content=False)
    assert (log.status, log.headers["Content-Type"], log.data) == (200, "text/plain", b"")
    refused(lambda: carol.read_namespaced_secret("tokens", "team-a"))
    body = refused(lambda: carol.connect_get_namespaced_pod_exec("p-0", "team-a", command="sh"))
    assert body["message"] == (
        'pods "p-0" is forbidden: User "carol@contoso.com" cannot get resource "pods/exec" in '
        'API group "" in the namespace "team-a"'
    )
    body = refused(lambda: carol.connect_post_namespaced_pod_exec("p-0", "team-a", command="sh"))
    assert 'cannot create resource "pods/exec"' in body["message"]
    assert body["details"] == {"name": "p-0", "kind": "pods"}


def test_a_role_with_resource_names_grants_one_pod_only(kube):
    team_namespace(kube)
    rules = [
        {"apiGroups": [""], "resources": ["pods"], "resourceNames": ["p-0"], "verbs": ["get"]},
        {
            "apiGroups": [""],
            "resources": ["pods/portforward"],
            "resourceNames": ["p-0"],
            "verbs": ["get", "create"],
        },
    ]
    rbac = client.RbacAuthorizationV1Api(kube.api)
    rbac.create_namespaced_role("team-a", {"metadata": {"name": "p-0-owner"}, "rules": rules})
    bind(kube, "team-a", "p-0-owner", "p-0-owner", ("User", "alice-oid"), kind="Role")
    alice = as_user(kube, "alice-oid", TEAM)
    assert alice.read_namespaced_pod("p-0", "team-a").metadata.name == "p-0"
    assert connect(
        lambda: alice.connect_post_namespaced_pod_portforward("p-0", "team-a", ports=8888)
    ) == ("Upgrade request required")
    refused(lambda: alice.connect_post_namespaced_pod_portforward("p-1", "team-a", ports=8888))
    refused(lambda: alice.read_namespaced_pod("p-1", "team-a"))
    refused(lambda: alice.list_namespaced_pod("team-a"))  # A list has no name to match.
    refused(lambda: alice.connect_post_namespaced_pod_exec("p-0", "team-a", command="env"))
    refused(lambda: alice.read_namespaced_secret("tokens", "team-a"))
    # Another user of the same group: the Role is bound to alice alone.
    refused(lambda: as_user(kube, "carol-oid", TEAM).read_namespaced_pod("p-0", "team-a"))


def review(api, **attributes) -> dict:
    body = {"spec": {"resourceAttributes": attributes}}
    return client.AuthorizationV1Api(api).create_self_subject_access_review(body).status.to_dict()


def test_self_subject_access_review_says_whether_and_why(kube):
    team_namespace(kube)
    bind(kube, "team-a", "team-edit", "edit", ("Group", TEAM))
    carol = as_user(kube, "carol@contoso.com", TEAM).api_client
    exec_ = {"namespace": "team-a", "verb": "create", "resource": "pods", "subresource": "exec"}
    allowed = review(carol, **exec_)
    assert allowed["allowed"] is True
    assert allowed["reason"] == (
        f'RBAC: allowed by RoleBinding "team-edit/team-a" of ClusterRole "edit" to Group "{TEAM}"'
    )
    assert review(carol, **{**exec_, "namespace": "elsewhere"})["allowed"] is False
    admin = review(kube.api, verb="delete", resource="nodes")
    assert admin["reason"] == (
        'RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" to '
        'Group "system:masters"'
    )


def test_every_impersonate_group_line_counts(kube):
    team_namespace(kube)
    bind(kube, "team-a", "team-view", "view", ("Group", TEAM))
    url = urlsplit(kube.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
    conn.putrequest("GET", f"{url.path}/api/v1/namespaces/team-a/pods")
    for name, value in (
        ("Authorization", "Bearer t"),
        ("Impersonate-User", "carol@contoso.com"),
        ("Impersonate-Group", "another-group"),
        ("Impersonate-Group", TEAM),
    ):
        conn.putheader(name, value)
    conn.endheaders()
    reply = conn.getresponse()
    assert reply.status == 200 and json.loads(reply.read())["kind"] == "PodList"


def test_groups_without_a_user_are_an_error(kube):
    api = client.ApiClient(kube.api.configuration)
    api.set_default_header("Impersonate-Group", TEAM)
    with pytest.raises(ApiException) as caught:
        client.CoreV1Api(api).list_namespace()
    assert caught.value.status == 500


def test_bindings_name_a_role_kind_and_keep_it(kube):
    kube.namespace("team-a")
    rbac = client.RbacAuthorizationV1Api(kube.api)
    body = {
        "metadata": {"name": "bad"},
        "roleRef": {"apiGroup": RBAC, "kind": "Group", "name": "edit"},
        "subjects": [],
    }
    with pytest.raises(ApiException) as caught:
        rbac.create_namespaced_role_binding("team-a", body)
    assert kube_error(caught.value)[1]["message"].startswith(
        'RoleBinding.rbac.authorization.k8s.io "bad" is invalid: roleRef.kind: Unsupported value'
    )
    bind(kube, "team-a", "team-edit", "edit", ("Group", TEAM))
    with pytest.raises(ApiException) as caught:
        rbac.patch_namespaced_role_binding(
            "team-edit",
            "team-a",
            {"roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "admin"}},
        )
    assert kube_error(caught.value)[0] == 422
    subjects = [{"kind": "User", "apiGroup": RBAC, "name": "alice-oid"}]
    rbac.patch_namespaced_role_binding("team-edit", "team-a", {"subjects": subjects})
    assert rbac.read_namespaced_role_binding("team-edit", "team-a").subjects[0].name == "alice-oid"
