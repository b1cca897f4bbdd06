"""POST /api/v1/workspaces: ask for a workspace of any registered kind (a VM, a MIG slice, a
namespace...), through the same form and service as the kind's HTML page (the kind's
backend's KindForm), so every rule and message is the page's; the body's kind fields are the
kind's (KindForm.api_fields) and an unknown kind is a 400 naming ``kind``. The
``Idempotency-Key`` header is the form's request key: the same key again returns the first
workspace (200 instead of 201) if the caller may still see it."""

import functools
import json
from typing import Annotated, Any
from uuid import UUID

from django import forms
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django.utils import timezone
from ninja import Field, Header, Schema, Status
from pydantic import BaseModel, ConfigDict, ValidationError, create_model, field_validator

from api.auth import require_write
from api.errors import CreateRefused, FieldErrors, form_errors
from api.routers.workspaces import router as router
from api.schemas import Printable, PrintableLines, WorkspaceOut, caller, workspace_out
from teams.models import Team
from teams.selectors import team_list_for_requests
from workspaces import requests, selectors
from workspaces.backends import ApiField, backend_for, backends
from workspaces.forms import NAME_RE, mount_choice
from workspaces.models import Workspace


class WorkspaceRequestIn(Schema):
    """What the request pages ask: the kind, team, name and justification, and the kind's own
    fields (its backend's KindForm.api_fields: the document lists every registered kind's
    and says which each kind requires); the kind's form checks the rest (docs/api.md)."""

    model_config = ConfigDict(extra="allow", json_schema_extra=lambda s, _: _document_kinds(s))

    kind: str = Field(max_length=16)
    team: Printable = Field(max_length=50)
    name: Printable = Field(max_length=40, json_schema_extra={"pattern": NAME_RE.pattern})
    justification: PrintableLines = Field("", max_length=2000)
    # What to mount (docs/storage.md): team share names (absent: every share the caller may
    # mount; [] none), and the caller's home.
    mounts: list[Printable] | None = Field(None, max_length=50)
    home: bool = True

    @field_validator("kind")
    @classmethod
    def _registered(cls, kind: str) -> str:
        known = [backend.kind for backend in backends()]
        if kind not in known:
            raise ValueError(f"Ask for one of the kinds {', '.join(known)}.")
        return kind


def _api_field(spec: ApiField) -> tuple[Any, Any]:
    """The pydantic (annotation, field) of one kind field: text printable (one line unless
    ``multiline``), numbers within their bounds; defaults "", False or None."""
    if spec.type is str:
        text = PrintableLines if spec.multiline else Printable
        return text, Field("", max_length=spec.max_length)
    if spec.type is bool:
        return bool, Field(False)
    return spec.type | None, Field(None, ge=spec.ge, le=spec.le)


def _kind_fields() -> type[BaseModel]:
    """One model of every registered kind's own fields (a field two kinds share is the first
    kind's), made again when the registry changes."""
    specs: dict[str, ApiField] = {}
    for backend in backends():
        for spec in backend.form.api_fields:
            specs.setdefault(spec.name, spec)
    return _fields_model(tuple(specs.values()))


@functools.lru_cache(maxsize=8)
def _fields_model(specs: tuple[ApiField, ...]) -> type[BaseModel]:
    fields: dict[str, Any] = {spec.name: _api_field(spec) for spec in specs}
    return create_model("KindFields", **fields)


def _document_kinds(schema: dict[str, Any]) -> None:
    """The document's body: the registered kinds as ``kind``'s values, every kind's fields,
    and (allOf, if/then) the fields each kind requires."""
    properties = schema.setdefault("properties", {})
    properties["kind"]["enum"] = [backend.kind for backend in backends()]
    properties.update(_kind_fields().model_json_schema()["properties"])
    schema["allOf"] = [
        {
            "if": {"properties": {"kind": {"const": backend.kind}}, "required": ["kind"]},
            "then": {"required": needs},
        }
        for backend in backends()
        if (needs := [f.name for f in backend.form.api_fields if f.required])
    ]


def _kind_values(request: HttpRequest) -> dict[str, Any]:
    """The body's kind fields, checked by their types and bounds (missing ones at their
    defaults; others ignored). Read from the JSON body itself: ninja keeps only the fields
    WorkspaceRequestIn declares, and a kind's are the registry's. Raises FieldErrors naming
    each refused field."""
    sent = json.loads(request.body or b"{}")  # ninja has parsed it: an object
    try:
        values = _kind_fields().model_validate(sent if isinstance(sent, dict) else {})
    except ValidationError as exc:
        errors = [{"loc": ["body", *map(str, e["loc"])], "msg": e["msg"]} for e in exc.errors()]
        raise FieldErrors(errors) from None
    return values.model_dump()


def _key(raw: str | None) -> UUID:
    try:
        return UUID(str(raw or ""))
    except ValueError:
        raise FieldErrors(
            [{"loc": ["header", "Idempotency-Key"], "msg": "Send a UUID as the Idempotency-Key."}]
        ) from None


@router.post(
    "",
    response={200: WorkspaceOut, 201: WorkspaceOut},
    summary="Request a workspace (Idempotency-Key: a UUID)",
)
def workspace_create(
    request: HttpRequest,
    body: WorkspaceRequestIn,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> Any:
    """201 with the new workspace (requested, or pending_approval above quota with a
    justification); 200 with the first one for a key seen before, also when the first call is
    still under way (it holds the team row; the repeat waits for it); 400 for a refused field;
    404 when the caller may no longer see the workspace of their key (they left its team); 409
    for a taken name or another user's key."""
    require_write(request)
    key = _key(idempotency_key)
    twin = Workspace.objects.filter(request_key=key).select_related("team", "owner").first()
    if twin is not None:
        if twin.owner_id != request.user.pk:
            raise requests.RequestKeyTaken(requests.REQUEST_KEY_TAKEN)
        return Status(200, workspace_out(_visible(request, twin.pk)))
    team = Team.objects.filter(slug=body.team).first()
    with requests.inserts_recorded() as inserted:
        workspace = _submit(request, body, team, key)
    return Status(
        201 if workspace.pk in inserted else 200, workspace_out(_visible(request, workspace.pk))
    )


def _visible(request: HttpRequest, workspace_id: UUID) -> Workspace:
    """The workspace with team and owner if the caller may see it now; Http404 otherwise (a
    repeat by someone who left the team learns nothing of it)."""
    visible = selectors.workspace_visible_to(user=request.user).select_related("team", "owner")
    return get_object_or_404(visible, pk=workspace_id)


def _common(body: WorkspaceRequestIn, team: Team | None, key: UUID) -> dict[str, Any]:
    common: dict[str, Any] = {
        "team": team.pk if team else "",
        "name": body.name,
        "justification": body.justification,
        "request_key": str(key),
        "home": body.home,
    }
    if body.mounts is not None:
        common["mounts"] = list(body.mounts)
    return common


def _answered_as_is(exc: requests.WorkspaceActionError) -> bool:
    """Whether a request service's refusal travels to its own handler in api.errors: one
    about a field (requests.refusal_field: 400 naming it, or 409 for a taken name) or about
    the key (409). Any other is answered as CreateRefused (400)."""
    return isinstance(exc, requests.RequestKeyTaken) or requests.refusal_field(exc) is not None


def _check(form: forms.Form, names: dict[str, str]) -> None:
    if not form.is_valid():
        raise form_errors(form, names)


def _submit(
    request: HttpRequest, body: WorkspaceRequestIn, team: Team | None, key: UUID
) -> Workspace:
    """The kind's page's form, filled from the body by the kind (KindForm.api_form_data),
    and its service. Raises FieldErrors, CreateRefused, WorkspaceActionError."""
    page = backend_for(body.kind).form
    values = _kind_values(request)
    user = caller(request)
    teams = team_list_for_requests(user=user)
    mine = teams.filter(pk=team.pk).first() if team else None
    data = _common(body, team, key)
    form = page.form_class(data, teams=teams, user=user, **page.choices(mine))
    form.data = data | page.api_form_data(values, form, user)
    _check(form, dict(page.api_names))
    cleaned = form.cleaned_data
    try:
        return page.request(
            user=user,
            team=cleaned["team"],
            name=cleaned["name"],
            request_key=key,
            justification=cleaned["justification"],
            now=timezone.now(),
            data=cleaned,
            mounts=mount_choice(cleaned),
        )
    except requests.WorkspaceActionError as exc:
        if _answered_as_is(exc):
            raise
        raise CreateRefused(str(exc)) from exc
