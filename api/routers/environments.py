"""/api/v1/environments: what a team can choose for a kind (and a VM size), best first, with
the default; the same list the request page offers (environments.selectors). POST adds one:
to a team (its admins) or to the catalog (platform admins), checked and audited as
environments.services does."""

from typing import Any

from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest
from django.utils import timezone
from ninja import Field, Query, Router, Schema, Status

from api.auth import require_write
from api.errors import FieldErrors
from api.schemas import Printable, caller
from common.validation import SLUG_PATTERN
from environments.models import Environment
from environments.selectors import environment_choices
from environments.services import environment_create
from teams.models import Team
from teams.selectors import team_get

router = Router(tags=["environments"])


class EnvironmentsQuery(Schema):
    team: Printable = Field(min_length=1, max_length=50, pattern=SLUG_PATTERN)
    kind: Printable = Field(min_length=1, max_length=32, pattern=r"^[a-z][a-z0-9_-]*$")
    vm_size: Printable = Field("", max_length=64)
    gpu_family: Printable = Field("", max_length=16)


class EnvironmentOut(Schema):
    slug: str
    name: str
    description: str
    default: bool
    team: str | None = Field(description="The team's own; null for the catalog")
    contents: dict[str, Any]
    kinds: list[str]
    vm_image: str
    driver_method: str
    gpu_families: list[str]
    extension_settings: dict[str, Any]
    layer: dict[str, Any]
    container_image: str


class EnvironmentsOut(Schema):
    items: list[EnvironmentOut]


def _out(environment: Environment, default: bool) -> dict[str, Any]:
    return {
        "slug": environment.slug,
        "name": environment.name,
        "description": environment.description,
        "default": default,
        "team": environment.team.slug if environment.team else None,
        "contents": environment.contents,
        "kinds": environment.kinds,
        "vm_image": environment.vm_image,
        "driver_method": environment.driver_method,
        "gpu_families": environment.gpu_families,
        "extension_settings": environment.extension_settings,
        "layer": environment.layer,
        "container_image": environment.container_image,
    }


@router.get("/environments", response=EnvironmentsOut, summary="Environments a team can choose")
def environment_list(request: HttpRequest, filters: Query[EnvironmentsQuery]) -> Any:
    """The environments ``team`` can choose for a workspace of ``kind`` (and, for a VM,
    ``vm_size`` or ``gpu_family``: only those that drive it), best first; the first is the
    default. 404 for a team the caller is not a member of; 400 for a malformed query."""
    try:
        team = team_get(user=request.user, slug=filters.team)
    except Team.DoesNotExist:
        raise Http404("No such team among yours.") from None
    choices = environment_choices(
        team=team,
        kind=filters.kind,
        vm_size=filters.vm_size or None,
        gpu_family=filters.gpu_family or None,
    )
    return {"items": [_out(e, default=i == 0) for i, e in enumerate(choices)]}


class EnvironmentIn(Schema):
    """An environment's fields (docs/environments.md); ``team`` empty: the catalog."""

    team: Printable = Field("", max_length=50, pattern=r"^[-a-zA-Z0-9_]*$")
    name: Printable = Field(min_length=1, max_length=64)
    slug: Printable = Field(min_length=1, max_length=64, pattern=SLUG_PATTERN)
    description: str = Field("", max_length=2000)
    contents: dict[str, Any] = Field(default_factory=dict)
    kinds: list[str] = Field(min_length=1, max_length=8)
    vm_image: Printable = Field("", max_length=400)
    driver_method: Printable = Field("", max_length=16)
    gpu_families: list[str] = Field(default_factory=list, max_length=8)
    extension_settings: dict[str, Any] = Field(default_factory=dict)
    layer: dict[str, Any] = Field(default_factory=dict)
    container_image: Printable = Field("", max_length=300)
    rank: int = Field(100, ge=0, le=1000)


@router.post("/environments", response={201: EnvironmentOut}, summary="Add an environment (admins)")
def environment_add(request: HttpRequest, body: EnvironmentIn) -> Any:
    """201 with the new environment; 400 naming each wrong field; 403 unless the caller is
    the team's admin (or, for the catalog, a platform admin); 404 for a team not theirs."""
    require_write(request)
    team = None
    if body.team:
        try:
            team = team_get(user=request.user, slug=body.team)
        except Team.DoesNotExist:
            raise Http404("No such team among yours.") from None
    values = body.dict(exclude={"team", "rank"})
    try:
        environment = environment_create(
            actor=caller(request), team=team, values=values, now=timezone.now(), rank=body.rank
        )
    except ValidationError as err:
        errors = [
            {"loc": ["body", field], "msg": str(message)}
            for field, messages in err.message_dict.items()
            for message in messages
        ]
        raise FieldErrors(errors) from None
    return Status(201, _out(environment, default=False))
