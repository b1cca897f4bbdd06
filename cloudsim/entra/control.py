"""/_sim/entra/...: drive the emulated tenant (JSON in and out).

POST /_sim/entra/directory  {"users": [{"name", "display_name"?, "id"?, "enabled"=true,
                            "roles"=[]}], "groups": [{"display_name", "id"?, "members": [user
                            id | UPN | name], "security_enabled"=true}]}   (bulk add; members
                            may name users added in the same call) -> {"users": [{"id",
                            "userPrincipalName"}], "groups": [{"id", "displayName"}]}
POST /_sim/entra/apps       {"display_name", "client_id"?, "client_secret"?, "object_id"?,
                            "roles"=[]}: register an app (a pipeline's service principal or
                            managed identity) holding ``roles`` on the portal's app -> 201
                            {"client_id", "client_secret", "object_id", "roles"}
POST /_sim/entra/users/disable   {"user": id | UPN, "enabled"=false}
POST /_sim/entra/members/remove  {"group": id, "user": id | UPN}
POST /_sim/entra/keys/rotate     {"drop_old"=false}  -> {"kid", "kids"}
POST /_sim/entra/keys/drop       {"kid"}             -> {"kids"}
POST /_sim/entra/settings        {"group_limit"?}   (groups in an ID token before the overage)
GET  /_sim/entra                 -> {"tenant", "client_id", "group_limit", "kids", "users",
                                     "groups": [{"id", "displayName", "members"}],
                                     "apps": [{"client_id", "object_id", "displayName", "roles"}]}
Faults: POST /_sim/faults with op entra.token or graph.* (graph.FAULT_OPS), kind throttle,
server_error or unavailable.
"""

from ..errors import ArmError
from ..protocol import Response
from . import graph
from .directory import DOMAIN, Directory
from .oidc import TOKEN_OP

FAULT_OPS = graph.FAULT_OPS | {TOKEN_OP}  # Each takes only FAULT_KINDS.
FAULT_KINDS = graph.FAULT_KINDS


def _bad(message: str) -> ArmError:
    return ArmError(400, "InvalidControlRequest", message)


def _user(d: Directory, key) -> str:
    if not isinstance(key, str):
        raise _bad("A user must be named by id, UPN or name.")
    user = d.user(key) or d.user(f"{key}@{DOMAIN}")
    if user is None:
        raise ArmError(404, "NotFound", f"No user '{key}'.")
    return user.id


def _list(body: dict, name: str) -> list:
    value = body.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise _bad(f"'{name}' must be a list of objects.")
    return value


def add_directory(d: Directory, body: dict) -> Response:
    users, groups = [], []
    for item in _list(body, "users"):
        if not isinstance(item.get("name"), str) or not item["name"]:
            raise _bad("Each user needs a 'name'.")
        if d.user(item["name"]) or d.user(f"{item['name']}@{DOMAIN}") or item.get("id") in d.users:
            raise ArmError(409, "Conflict", f"User '{item['name']}' exists.")
        user = d.add_user(
            item["name"],
            item.get("display_name"),
            item.get("id"),
            bool(item.get("enabled", True)),
            item.get("roles", []),
        )
        users.append({"id": user.id, "userPrincipalName": user.upn})
    for item in _list(body, "groups"):
        members = [_user(d, m) for m in item.get("members", [])]
        security = bool(item.get("security_enabled", True))
        group = d.add_group(item.get("id"), str(item.get("display_name", "")), security)
        group.members.extend(m for m in members if m not in group.members)
        groups.append({"id": group.id, "displayName": group.display_name})
    return Response(201, {"users": users, "groups": groups})


def add_app(d: Directory, body: dict) -> Response:
    roles = body.get("roles", [])
    if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
        raise _bad("'roles' must be a list of app role values.")
    given = {k: body.get(k) for k in ("display_name", "client_id", "client_secret", "object_id")}
    if not all(v is None or isinstance(v, str) for v in given.values()):
        raise _bad("'display_name', 'client_id', 'client_secret' and 'object_id' are strings.")
    if given["client_id"] in d.clients:
        raise ArmError(409, "Conflict", f"App '{given['client_id']}' exists.")
    app = d.add_app(
        given["display_name"], given["client_id"], given["client_secret"], roles, given["object_id"]
    )
    answer = {"client_id": app.client_id, "client_secret": d.clients[app.client_id]}
    return Response(201, answer | {"object_id": app.object_id, "roles": app.roles})


def disable_user(d: Directory, body: dict) -> Response:
    user = d.users[_user(d, body.get("user"))]
    user.enabled = bool(body.get("enabled", False))
    return Response(200, {"id": user.id, "accountEnabled": user.enabled})


def remove_member(d: Directory, body: dict) -> Response:
    group = d.groups.get(body.get("group"))
    if group is None:
        raise ArmError(404, "NotFound", f"No group '{body.get('group')}'.")
    user_id = _user(d, body.get("user"))
    if user_id in group.members:
        group.members.remove(user_id)
    return Response(200, {"group": group.id, "members": list(group.members)})


def rotate_keys(d: Directory, body: dict) -> Response:
    kid = d.keys.rotate(drop_old=bool(body.get("drop_old", False)))
    return Response(200, {"kid": kid, "kids": list(d.keys.keys)})


def drop_key(d: Directory, body: dict) -> Response:
    if not d.keys.drop(str(body.get("kid"))):
        raise _bad("'kid' must name a listed key other than the active one.")
    return Response(200, {"kids": list(d.keys.keys)})


def settings(d: Directory, body: dict) -> Response:
    limit = body.get("group_limit", d.group_limit)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise _bad("'group_limit' must be a whole number, 0 or more.")
    d.group_limit = limit
    return state(d, body)


def state(d: Directory, body: dict) -> Response:
    groups = [
        {"id": g.id, "displayName": g.display_name, "members": list(g.members)}
        for g in d.groups.values()
    ]
    users = [u.graph() | {"roles": u.roles} for u in d.users.values()]
    apps = [
        {"client_id": a.client_id, "object_id": a.object_id, "displayName": a.display_name}
        | {"roles": a.roles}
        for a in d.apps.values()
    ]
    answer = {"tenant": d.tenant, "client_id": next(iter(d.clients)), "group_limit": d.group_limit}
    answer |= {"kids": list(d.keys.keys), "users": users, "groups": groups, "apps": apps}
    return Response(200, answer)


ROUTES = {
    ("POST", "/_sim/entra/directory"): add_directory,
    ("POST", "/_sim/entra/apps"): add_app,
    ("POST", "/_sim/entra/users/disable"): disable_user,
    ("POST", "/_sim/entra/members/remove"): remove_member,
    ("POST", "/_sim/entra/keys/rotate"): rotate_keys,
    ("POST", "/_sim/entra/keys/drop"): drop_key,
    ("POST", "/_sim/entra/settings"): settings,
    ("GET", "/_sim/entra"): state,
}
