"""POST /api/v1/workspaces: ask for a VM, a MIG slice or a namespace, through the same form
and service as the kind's HTML page (workspaces.views / the kind's KindForm), so every rule
and message is the page's. The ``Idempotency-Key`` header is the form's request key: the same
key again returns the first workspace (200 instead of 201) if the caller may still see it."""

from decimal import Decimal
from typing import Annotated, Any, Literal
from uuid import UUID

from django import forms
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django.utils import timezone
from ninja import Field, Header, Schema, Status
from pydantic import ConfigDict, JsonValue

from api.auth import require_write
from api.errors import CreateRefused, FieldErrors, form_errors
from api.routers.workspaces import router as router
from api.schemas import Printable, PrintableLines, WorkspaceOut, caller, workspace_out
from teams.models import Team
from teams.selectors import team_list_for_requests
from workspaces import requests, selectors
from workspaces.backends import backend_for
from workspaces.forms import NAME_RE, WorkspaceRequestForm
from workspaces.models import Kind, Workspace

# What each kind's form needs besides kind, team and name (the document says so; the form
# checks it: a VM's size and region, a slice's profile, a namespace's GPUs and model).
KIND_NEEDS: dict[str, list[JsonValue]] = {
    "vm": ["vm_size", "region"],
    "mig": ["mig_profile"],
    "namespace": ["gpus", "gpu_model"],
}


class WorkspaceRequestIn(Schema):
    """What the request pages ask, per kind (docs/api.md); the kind's form checks the rest."""

    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                {
                    "if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]},
                    "then": {"required": needs},
                }
                for kind, needs in KIND_NEEDS.items()
            ]
        }
    )

    kind: Literal["vm", "mig", "namespace"]
    team: Printable = Field(max_length=50)
    name: Printable = Field(max_length=40, json_schema_extra={"pattern": NAME_RE.pattern})
    justification: PrintableLines = Field("", max_length=2000)
    # vm
    vm_size: Printable = Field("", max_length=64)
    region: Printable = Field("", max_length=32)
    spot: bool = False
    ssh_public_key: PrintableLines = Field("", max_length=16_000)
    accept_equivalents: bool = False
    max_price: Decimal | None = Field(default=None, ge=Decimal("0.01"), le=Decimal("1000"))
    # mig
    mig_profile: Printable = Field("", max_length=16)
    gpu_model: Printable = Field("", max_length=16)
    image: Printable = Field("", max_length=200)
    # namespace
    gpus: int | None = Field(default=None, ge=1, le=64)
    pool: Printable = Field("", max_length=12)


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
    submit = _submit_vm if body.kind == Kind.VM else _submit_kind
    with requests.inserts_recorded() as inserted:
        workspace = submit(request, body, team, key)
    return Status(
        201 if workspace.pk in inserted else 200, workspace_out(_visible(request, workspace.pk))
    )


def _visible(request: HttpRequest, workspace_id: UUID) -> Workspace:
    """The workspace with team and owner if the caller may see it now; Http404 otherwise (a
    repeat by someone who left the team learns nothing of it)."""
    visible = selectors.workspace_visible_to(user=request.user).select_related("team", "owner")
    return get_object_or_404(visible, pk=workspace_id)


def _common(body: WorkspaceRequestIn, team: Team | None, key: UUID) -> dict[str, Any]:
    return {
        "team": team.pk if team else "",
        "name": body.name,
        "justification": body.justification,
        "request_key": str(key),
    }


def _submit_vm(
    request: HttpRequest, body: WorkspaceRequestIn, team: Team | None, key: UUID
) -> Workspace:
    now = timezone.now()
    offerings = selectors.offering_list(now=now)
    offering = offerings.filter(vm_size=body.vm_size, region=body.region).first()
    data = _common(body, team, key) | {
        "region": body.region,
        "offering": offering.pk if offering else "",
        "spot": "on" if body.spot else "",
        "accept_equivalents": "on" if body.accept_equivalents else "",
        "max_price": "" if body.max_price is None else str(body.max_price),
        "ssh_public_key": body.ssh_public_key
        or selectors.user_ssh_key_last_used(user=caller(request)),
    }
    form = WorkspaceRequestForm(  # type: ignore[no-untyped-call]
        data,
        teams=team_list_for_requests(user=request.user),
        regions=selectors.offering_regions(),
        offerings=offerings,
    )
    _check(form, {"offering": "vm_size"})
    cleaned = form.cleaned_data
    try:
        return requests.workspace_request(
            user=caller(request),
            team=cleaned["team"],
            name=cleaned["name"],
            offering=cleaned["offering"],
            ssh_public_key=cleaned["ssh_public_key"],
            request_key=key,
            justification=cleaned["justification"],
            now=now,
            spot=cleaned["spot"],
            accept_equivalents=cleaned["accept_equivalents"],
            max_price=cleaned["max_price"],
        )
    except requests.WorkspaceActionError as exc:
        if _answered_as_is(exc):
            raise
        raise CreateRefused(str(exc)) from exc


def _answered_as_is(exc: requests.WorkspaceActionError) -> bool:
    """Whether a request service's refusal travels to its own handler in api.errors: one
    about a field (requests.refusal_field: 400 naming it, or 409 for a taken name) or about
    the key (409). Any other is answered as CreateRefused (400)."""
    return isinstance(exc, requests.RequestKeyTaken) or requests.refusal_field(exc) is not None


def _check(form: forms.Form, names: dict[str, str]) -> None:
    if not form.is_valid():
        raise form_errors(form, names)


def _kind_choice(body: WorkspaceRequestIn, form: Any) -> dict[str, str]:
    """The kind form's own field (a MIG ``profile``: "A100|1g.10gb"; a namespace's ``pool``:
    its id) picked from its choices by the API's names: mig_profile, gpu_model, pool."""
    if body.kind == Kind.MIG:
        found = [
            c
            for c in form.choices
            if c.profile == body.mig_profile and body.gpu_model in ("", c.gpu_model)
        ]
        model = body.gpu_model or (found[0].gpu_model if len(found) == 1 else "")
        return {"profile": f"{model}|{body.mig_profile}", "image": body.image}
    pools = [
        r.pool
        for r in form.pools
        if r.pool.gpu_model == body.gpu_model and body.pool in ("", r.pool.name)
    ]
    return {"pool": str(pools[0].pk) if len(pools) == 1 else "", "gpus": str(body.gpus or "")}


def _submit_kind(
    request: HttpRequest, body: WorkspaceRequestIn, team: Team | None, key: UUID
) -> Workspace:
    page = backend_for(body.kind).form
    assert page is not None  # The cluster kinds have their own request form.
    teams = team_list_for_requests(user=request.user)
    mine = teams.filter(pk=team.pk).first() if team else None
    data = _common(body, team, key)
    form = page.form_class(data, teams=teams, **page.choices(mine))
    form.data = data | _kind_choice(body, form)
    _check(form, {"profile": "mig_profile", "pool": "gpu_model"})
    cleaned = form.cleaned_data
    try:
        return page.request(
            user=request.user,
            team=cleaned["team"],
            name=cleaned["name"],
            request_key=key,
            justification=cleaned["justification"],
            now=timezone.now(),
            data=cleaned,
        )
    except requests.WorkspaceActionError as exc:
        if _answered_as_is(exc):
            raise
        raise CreateRefused(str(exc)) from exc
