"""/api/v1/kinds, /offerings, /sizing/estimate and /recommendations: the workspace kinds one
may request and their fields, the sizes offered with their prices, the GPU memory estimate of
the request page, and a team's right-sizing advice (the savings page's), each from the
registry, selector or form its page uses."""

from decimal import Decimal
from typing import Any

from django.http import Http404, HttpRequest
from django.utils import timezone
from ninja import Field, Query, Router, Schema
from pydantic import ConfigDict

from api.errors import FieldErrors, form_errors
from api.schemas import Printable, caller, money, utc
from billing.savings import team_savings_list
from common.permissions import access_require
from teams.models import Team
from teams.selectors import team_get
from workspaces import selectors
from workspaces.backends import backends
from workspaces.sizing import fits
from workspaces.sizing.estimate import PRECISION_LABELS, WORKLOAD_LABELS
from workspaces.sizing.forms import (
    MAX_BATCH,
    MAX_CONTEXT,
    MAX_HEADS,
    MAX_HIDDEN,
    MAX_LAYERS,
    EstimateForm,
)
from workspaces.sizing.presets import PRESETS
from workspaces.sizing.views import estimate_document, estimate_of_form, estimate_team

router = Router(tags=["catalog"])

# The JSON Schema type of each Python type a kind's API field may have (ApiField.type).
_JSON_TYPES = {str: "string", int: "integer", bool: "boolean", Decimal: "number"}


class KindFieldOut(Schema):
    name: str
    type: str = Field(description='"string", "integer", "boolean" or "number"')
    required: bool


class KindOut(Schema):
    kind: str
    label: str
    fields: list[KindFieldOut]


class KindsOut(Schema):
    items: list[KindOut]


@router.get("/kinds", response=KindsOut, summary="The workspace kinds one may request")
def kind_list(request: HttpRequest) -> Any:
    """Every registered kind (workspaces.backends), in the request pages' order, with the
    fields of its own that POST /workspaces takes besides kind, team, name and
    justification (docs/api.md). No query."""
    items = [
        {
            "kind": backend.kind,
            "label": backend.label,
            "fields": [
                {"name": f.name, "type": _JSON_TYPES.get(f.type, "string"), "required": f.required}
                for f in backend.form.api_fields
            ],
        }
        for backend in backends()
    ]
    return {"items": items}


class OfferingsQuery(Schema):
    region: Printable = Field("", max_length=32)
    gpu_model: Printable = Field("", max_length=16)


class OfferingOut(Schema):
    vm_size: str
    region: str
    gpu_model: str
    gpu_count: int
    gpu_memory_gib: int
    vcpus: int
    memory_gib: float
    price_per_hour: str
    spot_price_per_hour: str | None


class OfferingsOut(Schema):
    items: list[OfferingOut]


@router.get("/offerings", response=OfferingsOut, summary="Sizes offered, with USD/hour")
def offering_list(request: HttpRequest, filters: Query[OfferingsQuery]) -> Any:
    """The request page's catalog (selectors.offering_list with the Spot price now), cheapest
    GPU first per region. One query."""
    rows = selectors.offering_list(region=filters.region or None, now=timezone.now())
    if filters.gpu_model:
        rows = rows.filter(gpu_model=filters.gpu_model)
    items = [
        {
            "vm_size": o.vm_size,
            "region": o.region,
            "gpu_model": o.gpu_model,
            "gpu_count": o.gpu_count,
            "gpu_memory_gib": o.gpu_memory_gib,
            "vcpus": o.vcpus,
            "memory_gib": float(o.memory_gib),
            "price_per_hour": money(o.price_per_hour),
            "spot_price_per_hour": money(getattr(o, "spot_hourly", None)),
        }
        for o in rows
    ]
    return {"items": items}


class EstimateIn(Schema):
    """The estimate page's fields (workspaces.sizing.forms.EstimateForm checks them). The
    document says what the form takes: a preset or parameters_b, a precision and a workload
    of theirs, layers and hidden_size both or neither."""

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [{"required": ["parameters_b"]}, {"required": ["preset"]}],
            "dependentRequired": {"layers": ["hidden_size"], "hidden_size": ["layers"]},
        }
    )

    preset: Printable = Field("", max_length=64, json_schema_extra={"enum": ["", *PRESETS]})
    parameters_b: Decimal | None = Field(default=None, gt=0, le=2000)
    precision: Printable = Field(
        max_length=16, json_schema_extra={"enum": [p.value for p in PRECISION_LABELS]}
    )
    workload: Printable = Field(
        max_length=16, json_schema_extra={"enum": [w.value for w in WORKLOAD_LABELS]}
    )
    context_length: int | None = Field(default=None, ge=1, le=MAX_CONTEXT)
    batch: int | None = Field(default=None, ge=1, le=MAX_BATCH)
    layers: int | None = Field(default=None, ge=1, le=MAX_LAYERS)
    hidden_size: int | None = Field(default=None, ge=1, le=MAX_HIDDEN)
    attention_heads: int | None = Field(default=None, ge=1, le=MAX_HEADS)
    kv_heads: int | None = Field(default=None, ge=1, le=MAX_HEADS)
    trainable_percent: Decimal | None = Field(default=None, gt=0, le=100)
    checkpointing: bool = False
    team: Printable = Field("", max_length=50, pattern=r"^[-a-zA-Z0-9_]*$")
    region: Printable = Field("", max_length=32)
    per_region: int | None = Field(default=None, ge=1, le=20)


@router.post("/sizing/estimate", summary="GPU memory estimate and the sizes that hold it")
def sizing_estimate(request: HttpRequest, body: EstimateIn) -> dict[str, Any]:
    """The estimate page's JSON answer (workspaces.sizing.views.estimate_document): 400 with
    the form's errors; 404 for a team the caller is not a member of."""
    data = {
        k: ("on" if v is True else v) for k, v in body.dict().items() if v not in (None, "", False)
    }
    form = EstimateForm(data)
    estimate = estimate_of_form(form) if form.is_valid() else None
    if estimate is None:
        raise form_errors(form)
    try:
        team = estimate_team(user=request.user, asked=form.cleaned_data["team"])
    except Team.DoesNotExist:
        raise Http404("No such team among yours.") from None
    fit_list = fits.sizing_fit_list(
        need_gib=estimate.total_gib,
        team=team,
        user=caller(request),
        now=timezone.now(),
        region=form.cleaned_data["region"],
        per_region=form.cleaned_data["per_region"],
    )
    return estimate_document(estimate, fit_list, team)


class RecommendationsQuery(Schema):
    team: Printable = Field(min_length=1, max_length=50)


@router.get("/recommendations", summary="A team's right-sizing advice (its admins)")
def recommendation_list(
    request: HttpRequest,
    filters: Query[RecommendationsQuery],
) -> dict[str, Any]:
    """The savings page's list (billing.savings.team_savings_list), largest saving first:
    404 for a team the caller does not see, 403 unless they are its admin or a platform
    admin, 400 without ``team``."""
    team = filters.team
    if not team:
        raise FieldErrors([{"loc": ["query", "team"], "msg": "Name the team (its slug)."}])
    try:
        found = team_get(user=request.user, slug=team)
    except Team.DoesNotExist:
        raise Http404("No such team.") from None
    access_require(
        user=request.user,
        perm="billing.view_team_savings",
        obj=found,
        message="Only the team's admins see its savings.",
    )
    items = [
        {
            "workspace": str(r.workspace_id),
            "workspace_name": r.workspace.name,
            "owner": r.workspace.owner.username,
            "advice": r.advice,
            "target": r.target,
            "target_kind": r.target_kind,
            "price_per_hour": money(r.price_per_hour),
            "target_price_per_hour": money(r.target_price_per_hour),
            "saving_usd_month": money(r.saving_usd_month, "0.01"),
            "reason": r.reason,
            "peak_mib": r.peak_mib,
            "p95_mib": r.p95_mib,
            "computed_at": utc(r.computed_at),
        }
        for r in team_savings_list(team=found)[:200]
    ]
    return {"items": items}
