"""The Microsoft Graph v1.0 subset the portal calls, with Graph's paths and shapes.

POST /v1.0/users/{id}/getMemberObjects  {"securityEnabledOnly": bool}
     -> {"@odata.context": ".../$metadata#Collection(Edm.String)", "value": [group ids]}
GET  /v1.0/groups/{id}/members?$select=&$top=  -> {"@odata.context", "value": [{"@odata.type":
     "#microsoft.graph.user", ...}], "@odata.nextLink"?}
GET  /v1.0/users/{id | userPrincipalName}?$select=id,accountEnabled,userPrincipalName,displayName
GET  /v1.0/users?$select=&$top=  -> paged like members
GET  /v1.0/groups/{id}?$select=id,displayName,securityEnabled  -> the group, 404 unknown
Pages hold $top items (default 100, at most 999, as Graph); "@odata.nextLink" carries an opaque
$skiptoken and is absent on the last page. Every call needs a Graph token of this tenant
(401 InvalidAuthenticationToken otherwise). Faults: ops in FAULT_OPS, kinds in FAULT_KINDS
(replies.graph_fault: throttle is 429 TooManyRequests with Retry-After).
"""

import base64
import urllib.parse

import jwt

from ..protocol import Request, Response
from .directory import Directory
from .replies import graph_error, graph_fault
from .tokens import GRAPH_AUDIENCE

FAULT_OPS = frozenset(
    {
        "graph.users.get",
        "graph.users.list",
        "graph.groups.get",
        "graph.groups.members",
        "graph.memberObjects",
    }
)
FAULT_KINDS = frozenset({"throttle", "server_error", "unavailable"})
DEFAULT_TOP, MAX_TOP = 100, 999
USER_FIELDS = ("id", "displayName", "userPrincipalName", "mail")  # Graph's default $select.
GROUP_FIELDS = ("id", "displayName", "description", "groupTypes", "mailEnabled", "securityEnabled")


def _authorize(d: Directory, req: Request) -> None:
    auth = req.headers.get("authorization", "")
    if not auth.lower().startswith("bearer ") or not auth[7:].strip():
        raise graph_error(401, "InvalidAuthenticationToken", "Access token is empty.")
    try:
        claims = d.keys.verify(auth[7:].strip(), GRAPH_AUDIENCE)
    except jwt.InvalidTokenError as exc:
        raise graph_error(
            401, "InvalidAuthenticationToken", f"Access token validation failure. {exc}"
        ) from None
    if claims.get("tid") != d.tenant:
        raise graph_error(
            401, "InvalidAuthenticationToken", "Access token validation failure. Invalid tenant."
        )


def _not_found(key: str):
    return graph_error(
        404,
        "Request_ResourceNotFound",
        f"Resource '{key}' does not exist or one "
        "of its queried reference-property objects are not present.",
    )


def _select(req: Request, item: dict, fields=USER_FIELDS) -> dict:
    wanted = [f.strip() for f in req.query.get("$select", "").split(",") if f.strip()]
    keep = wanted or list(fields)
    return {k: v for k, v in item.items() if k in keep or k == "@odata.type"}


def _context(req: Request, entity: str, suffix: str = "") -> str:
    """Graph's "@odata.context", e.g. ".../v1.0/$metadata#users(id,displayName)/$entity"."""
    select = req.query.get("$select", "")
    return f"{req.base_url}/v1.0/$metadata#{entity}" + (f"({select})" if select else "") + suffix


def _page(req: Request, items: list[dict], entity: str) -> Response:
    try:
        top = int(req.query.get("$top", DEFAULT_TOP))
        start = int(base64.urlsafe_b64decode(req.query.get("$skiptoken", "") + "==") or 0)
    except ValueError:
        raise graph_error(400, "Request_BadRequest", "Invalid $top or $skiptoken.") from None
    if not 1 <= top <= MAX_TOP:
        raise graph_error(
            400,
            "Request_UnsupportedQuery",
            f"Invalid page size specified: '{top}'. Must be between 1 and {MAX_TOP} inclusive.",
        )
    body = {"@odata.context": _context(req, entity), "value": items[start : start + top]}
    if start + top < len(items):
        query = {k: v for k, v in req.query.items() if k != "$skiptoken"}
        query["$skiptoken"] = base64.urlsafe_b64encode(str(start + top).encode()).decode()
        body["@odata.nextLink"] = f"{req.base_url}{req.path}?{urllib.parse.urlencode(query)}"
    return Response(200, body)


def _fault(cloud, op: str) -> None:
    fault = cloud.take_fault(op, FAULT_KINDS)
    if fault is not None:
        raise graph_fault(fault.kind, fault.retry_after)


def _user(d: Directory, key: str):
    user = d.user(key)
    if user is None:
        raise _not_found(key)
    return user


def _list_users(d: Directory, req: Request, segs: list[str]) -> Response:
    return _page(req, [_select(req, u.graph()) for u in d.users.values()], "users")


def _get_user(d: Directory, req: Request, segs: list[str]) -> Response:
    body = _select(req, _user(d, segs[1]).graph())
    return Response(200, {"@odata.context": _context(req, "users", "/$entity"), **body})


def _member_objects(d: Directory, req: Request, segs: list[str]) -> Response:
    user = _user(d, segs[1])
    context = f"{req.base_url}/v1.0/$metadata#Collection(Edm.String)"
    return Response(200, {"@odata.context": context, "value": d.groups_of(user.id)})


def _get_group(d: Directory, req: Request, segs: list[str]) -> Response:
    group = d.groups.get(segs[1]) or d.groups.get(segs[1].lower())  # GUIDs: any case.
    if group is None:
        raise _not_found(segs[1])
    body = _select(req, group.graph(), GROUP_FIELDS)
    return Response(200, {"@odata.context": _context(req, "groups", "/$entity"), **body})


def _members(d: Directory, req: Request, segs: list[str]) -> Response:
    group = d.groups.get(segs[1])
    if group is None:
        raise _not_found(segs[1])
    items = [_select(req, d.users[m].graph()) for m in group.members if m in d.users]
    return _page(req, items, "directoryObjects")


# (method, first segment, segment count, third segment) -> (fault op, handler)
ROUTES = {
    ("GET", "users", 1, ""): ("graph.users.list", _list_users),
    ("GET", "users", 2, ""): ("graph.users.get", _get_user),
    ("POST", "users", 3, "getmemberobjects"): ("graph.memberObjects", _member_objects),
    ("GET", "groups", 2, ""): ("graph.groups.get", _get_group),
    ("GET", "groups", 3, "members"): ("graph.groups.members", _members),
}


def handle(cloud, req: Request, segs: list[str]) -> Response:
    """segs: the path after /v1.0/. The token is checked before any fault or lookup."""
    d: Directory = cloud.entra
    low = [s.lower() for s in segs]
    found = ROUTES.get((req.method, low[0] if low else "", len(segs), "/".join(low[2:3])))
    if found is None:
        first = segs[0] if segs else ""
        raise graph_error(400, "BadRequest", f"Resource not found for the segment '{first}'.")
    op, action = found
    _authorize(d, req)
    _fault(cloud, op)
    return action(d, req, segs)
