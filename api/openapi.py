"""The problem answers of each operation in the OpenAPI document (/api/v1/openapi.json).

django-ninja documents only what a route returns; the refusals (api/problems.py) come from
exception handlers, so they are added here, per operation, from what can refuse it:

- 401 (no or a refused token) and 429 (the token's rate limit): every operation;
- 400 (input refused): every operation that takes input (parameters, a body, or the list
  filters and paging the list routes read from the query string);
- 404 (not visible to the caller): every operation on one object (a path parameter), and the
  few that name a team in their input;
- 403: every write (a read-only token, or a role that may not), and the admins' reads;
- 409 (a state conflict): every write on a workspace or an approval;
- 502, 503, 504: the kubeconfig of ``connect`` (Azure refused, busy, or did not answer in
  time: cloud/bounded.py).

All are ``application/problem+json`` with the Problem schema (RFC 9457).
"""

from http import HTTPStatus
from typing import Any

PROBLEM: dict[str, Any] = {
    "title": "Problem",
    "description": "RFC 9457 problem details (docs/api.md, Errors).",
    "type": "object",
    "required": ["type", "title", "status", "detail", "instance"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "instance": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["loc", "msg"],
                "properties": {
                    "loc": {"type": "array", "items": {"type": "string"}},
                    "msg": {"type": "string"},
                },
            },
        },
    },
}
PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}

# Operations that read input the document cannot list (the list pages' filters and paging).
READS_QUERY = {("get", "/workspaces"), ("get", "/approvals")}
# Reads that only some roles may make (403), and posts that change nothing (no 403/409).
ADMIN_READS = {("get", "/approvals"), ("get", "/recommendations")}
READ_ONLY_POSTS = {("post", "/sizing/estimate")}
# Operations that name a team or a workspace in their input, not their path (404).
NAMES_IN_INPUT = {
    ("post", "/sizing/estimate"),
    ("get", "/environments"),
    ("post", "/environments"),
    ("get", "/recommendations"),
    ("post", "/workspaces"),
}
AZURE_IN_REQUEST = {("get", "/workspaces/{workspace_id}/connect")}


def problem_codes(method: str, path: str, operation: dict[str, Any]) -> set[int]:
    """The problem statuses ``operation`` (``method`` lower-case, ``path`` after /api/v1) may
    answer, by the rules of the module docstring."""
    key = (method, path)
    codes = {401, 429}
    if operation.get("parameters") or operation.get("requestBody") or key in READS_QUERY:
        codes.add(400)
    if "{" in path or key in NAMES_IN_INPUT:
        codes.add(404)
    writes = method != "get" and key not in READ_ONLY_POSTS
    if writes or key in ADMIN_READS:
        codes.add(403)
    if writes and path.startswith(("/workspaces", "/approvals")):
        codes.add(409)
    if key in AZURE_IN_REQUEST:
        codes |= {502, 503, 504}
    return codes


def add_problem_responses(schema: dict[str, Any], prefix: str) -> dict[str, Any]:
    """``schema`` (an OpenAPI document whose paths start with ``prefix``) with the Problem
    component and each operation's problem answers (problem_codes); returns it."""
    schema.setdefault("components", {}).setdefault("schemas", {})["Problem"] = PROBLEM
    for path, operations in schema.get("paths", {}).items():
        local = path.removeprefix(prefix.rstrip("/")) or "/"
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            for code in sorted(problem_codes(method, local, operation)):
                responses.setdefault(
                    code,
                    {
                        "description": HTTPStatus(code).phrase,
                        "content": {"application/problem+json": {"schema": PROBLEM_REF}},
                    },
                )
    return schema
