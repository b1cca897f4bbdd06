"""The API's one NinjaAPI instance, version 1, mounted at /api/v1/ (portal/urls.py).

- OpenAPI 3 schema: /api/v1/openapi.json, with each operation's problem answers
  (api/openapi.py); docs page: /api/v1/docs (api/docs.py: Swagger UI from the portal's own
  static files).
- Errors: problem details (api/problems.py) for every exception the routes can raise, and a
  404 problem for a path under /api/v1/ that names no route (``unknown_route``).
"""

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, Throttled, ValidationError

from api import errors
from api.auth import api_auth
from api.docs import PortalSwagger
from api.openapi import add_problem_responses
from api.problems import problem
from api.routers import (
    approvals,
    bookings,
    catalog,
    environments,
    queue,
    schedules,
    storage,
    teams,
    workspace_requests,
    workspaces,
)


class PortalAPI(NinjaAPI):
    """NinjaAPI whose OpenAPI document also lists each operation's problem answers."""

    def get_openapi_schema(
        self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None
    ) -> Any:
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        prefix = path_prefix if path_prefix is not None else self.get_root_path(path_params or {})
        return add_problem_responses(schema, prefix)


api = PortalAPI(
    title="GPU workspace portal API",
    version="1",
    description="Request, watch and stop GPU workspaces; see quota, spend and approvals.",
    urls_namespace="api-v1",
    openapi_url="/openapi.json",
    docs_url="/docs",
    docs=PortalSwagger(),  # Swagger UI from static/vendor/swagger-ui, not a CDN
    auth=api_auth,
)


NO_CREDENTIALS = "Send a personal access token: Authorization: Bearer <token>."


def _errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": [str(part) for part in error.get("loc", ())], "msg": str(error.get("msg", ""))}
        for error in exc.errors
    ]


@api.exception_handler(ValidationError)
def _invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    return problem(request, 400, "The request is not valid.", errors=_errors(exc))


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    # ninja's own (no credentials at all) says "Unauthorized"; ours say why a token was refused.
    detail = str(exc) if str(exc) != "Unauthorized" else NO_CREDENTIALS
    return problem(request, 401, detail, headers={"WWW-Authenticate": 'Bearer realm="api"'})


@api.exception_handler(Throttled)
def _throttled(request: HttpRequest, exc: Throttled) -> HttpResponse:
    wait = str(getattr(exc, "wait", None) or 60)
    detail = f"This token made too many requests: wait {wait} seconds."
    return problem(request, 429, detail, headers={"Retry-After": wait})


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    return problem(request, exc.status_code, str(exc))


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return problem(request, 404, "Not found.")


@api.exception_handler(PermissionDenied)
def _denied(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
    return problem(request, 403, str(exc) or "You may not do this.")


@csrf_exempt  # any method: an unknown route is 404 before any token or CSRF check
def unknown_route(request: HttpRequest) -> HttpResponse:
    """What /api/v1/<anything the API does not route> answers (portal/urls.py, after the
    API's own routes): a 404 problem, as the API documents, not the HTML page."""
    return problem(request, 404, "No such route in the API: see /api/v1/docs.")


@api.get("/me", tags=["account"], summary="Who the token or session belongs to")
def me(request: HttpRequest) -> dict[str, Any]:
    user = request.auth  # type: ignore[attr-defined]
    return {
        "username": user.username,
        "display_name": user.get_full_name() or user.username,
        "scope": getattr(request, "api_scope", "read"),
    }


errors.register(api)
# workspace_requests adds POST /workspaces to the workspaces router; imported for that.
assert workspace_requests.router is workspaces.router
api.add_router("/workspaces", workspaces.router)
api.add_router("/teams", teams.router)
api.add_router("/approvals", approvals.router)
api.add_router("/", catalog.router)
api.add_router("/", environments.router)
api.add_router("/", bookings.router)
api.add_router("/", storage.router)
api.add_router("/", queue.router)
api.add_router("/", schedules.router)
