"""The services' refusals as problem details, in one place (registered on the API in
api/main.py), so a route only calls the service and lets its exception travel:

- ``FieldErrors`` (a form or a service refused fields): 400 with ``errors``;
- workspaces' JustificationNeeded and CeilingTooLow: 400 naming their field
  (workspaces.requests.refusal_field, as the pages do);
- NameTaken, RequestKeyTaken, any other WorkspaceActionError on an existing workspace, and a
  decided approval (DecisionError): 409;
- ActionNotAllowed (a PermissionDenied): 403 with its reason (api/main.py);
- django's ValidationError: 400; CloudError (Azure refused): 502; CloudBusy (every slot for
  Azure calls in requests taken): 503 with Retry-After; CloudTimeout (Azure did not answer
  within the request's deadline): 504.
"""

from typing import Any

from django import forms
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI

from api.problems import problem
from cloud.bounded import CloudBusy, CloudTimeout
from cloud.errors import CloudError
from teams.quota_requests import DecisionError
from workspaces.requests import (
    CeilingTooLow,
    JustificationNeeded,
    MountRefused,
    SnapshotRefused,
    WorkspaceActionError,
    refusal_field,
)


class FieldErrors(Exception):
    """Input refused field by field: ``errors`` is [{"loc": [...], "msg": str}]."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__("The request is not valid.")
        self.errors = errors


class CreateRefused(Exception):
    """A create the service refused for a reason that is not a conflict (400)."""


def form_errors(form: forms.Form, names: dict[str, str] | None = None) -> FieldErrors:
    """A bound, invalid Django form's errors as FieldErrors; ``names`` maps the form's field
    names to the API's (``{"offering": "vm_size"}``); non-field errors get loc ["body"]."""
    names = names or {}
    errors: list[dict[str, Any]] = []
    for field, messages in form.errors.items():
        loc = ["body"] if field == "__all__" else ["body", names.get(field, field)]
        errors.extend({"loc": loc, "msg": str(m)} for m in messages)
    return FieldErrors(errors)


def register(api: NinjaAPI) -> None:
    """Add the handlers of the services' exceptions to ``api``."""

    @api.exception_handler(FieldErrors)
    def _fields(request: HttpRequest, exc: FieldErrors) -> HttpResponse:
        return problem(request, 400, "The request is not valid.", errors=exc.errors)

    @api.exception_handler(JustificationNeeded)
    @api.exception_handler(CeilingTooLow)
    @api.exception_handler(MountRefused)
    @api.exception_handler(SnapshotRefused)
    def _field(request: HttpRequest, exc: WorkspaceActionError) -> HttpResponse:
        errors = [{"loc": ["body", refusal_field(exc)], "msg": str(exc)}]
        return problem(request, 400, str(exc), errors=errors)

    @api.exception_handler(CreateRefused)
    def _refused(request: HttpRequest, exc: CreateRefused) -> HttpResponse:
        return problem(request, 400, str(exc))

    @api.exception_handler(WorkspaceActionError)
    def _conflict(request: HttpRequest, exc: WorkspaceActionError) -> HttpResponse:
        return problem(request, 409, str(exc))

    @api.exception_handler(DecisionError)
    def _decided(request: HttpRequest, exc: DecisionError) -> HttpResponse:
        return problem(request, 409, str(exc))

    @api.exception_handler(DjangoValidationError)
    def _invalid(request: HttpRequest, exc: DjangoValidationError) -> HttpResponse:
        return problem(request, 400, " ".join(exc.messages))

    @api.exception_handler(CloudError)
    def _cloud(request: HttpRequest, exc: CloudError) -> HttpResponse:
        return problem(request, 502, f"Azure refused: {exc.code}: {exc.message}")

    @api.exception_handler(CloudBusy)
    def _cloud_busy(request: HttpRequest, exc: CloudBusy) -> HttpResponse:
        retry = {"Retry-After": str(int(exc.retry_after or 5))}
        return problem(request, 503, exc.message, headers=retry)

    @api.exception_handler(CloudTimeout)
    def _cloud_timeout(request: HttpRequest, exc: CloudTimeout) -> HttpResponse:
        return problem(request, 504, exc.message)
