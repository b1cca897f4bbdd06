"""``GET /sizing/estimate``: the GPU memory estimate and the sizes that hold it.

One function answers three ways: JSON (the API; the default for ``Accept: */*`` and
``application/json``), the htmx panel's partial (``request.htmx``, on the request form) and the
full page (a browser asking for text/html). Views only parse, call and render: the estimate is
workspaces.sizing.estimate, the fits list workspaces.sizing.fits.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, cast
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from teams.models import Team
from teams.selectors import team_list_for_requests
from workspaces.backends import request_path
from workspaces.gpus import format_gpus
from workspaces.sizing import fits
from workspaces.sizing.estimate import (
    PRECISION_LABELS,
    PRESETS,
    WORKLOAD_LABELS,
    Estimate,
    EstimateError,
    Precision,
    Workload,
    gpu_memory_estimate,
)
from workspaces.sizing.forms import EstimateForm

JSON, PARTIAL, PAGE = "json", "partial", "page"


def _answer_as(request: HttpRequest) -> str:
    if getattr(request, "htmx", False):
        return PARTIAL
    preferred = request.get_preferred_type(["application/json", "text/html"])
    return PAGE if preferred == "text/html" else JSON


@login_required
@require_GET
def sizing_estimate(request: HttpRequest) -> HttpResponse:
    """The estimate of the query string (see EstimateForm): 200 with the estimate and the
    ``fits`` list; 400 with ``{"errors": {field: [{"message", "code"}]}}`` for bad input; 404
    for a ``team`` the user is not a member of (whether or not it exists)."""
    answer = _answer_as(request)
    form = EstimateForm(request.GET, auto_id="est-%s")
    if answer == PAGE and not request.GET:
        form = EstimateForm(auto_id="est-%s")
        return render(request, "workspaces/estimate.html", {"form": form})
    estimate = estimate_of_form(form) if form.is_valid() else None
    if estimate is None:
        return _invalid(request, form, answer)
    try:
        team = estimate_team(user=request.user, asked=form.cleaned_data["team"])
    except Team.DoesNotExist:
        if answer == JSON:
            return JsonResponse({"error": "No such team among yours."}, status=404)
        raise Http404("No such team among yours.") from None
    fit_list = fits.sizing_fit_list(
        need_gib=estimate.total_gib,
        team=team,
        user=cast(User, request.user),  # login_required: never anonymous here
        now=timezone.now(),
        region=form.cleaned_data["region"],
        per_region=form.cleaned_data["per_region"],
    )
    preset = PRESETS.get(form.cleaned_data["preset"])
    if answer == JSON:
        document = estimate_document(estimate, fit_list, team)
        document["preset"] = {"name": preset.name, "config": preset.source} if preset else None
        return JsonResponse(document)
    context = estimate_context(form, estimate, fit_list, team)
    template = "workspaces/_estimate.html" if answer == PARTIAL else "workspaces/estimate.html"
    return render(request, template, context)


# The estimate's fields a suggested size's link carries to the request form, so the form opens
# with the estimate it came from (issue 29).
CARRIED = (
    "preset", "parameters_b", "precision", "workload", "context_length", "batch", "layers",
    "hidden_size", "attention_heads", "kv_heads", "trainable_percent", "checkpointing",
)  # fmt: skip


def estimate_context(
    form: EstimateForm, estimate: Estimate, fit_list: list[fits.Fit], team: Team | None
) -> dict[str, Any]:
    """What the panel's result (workspaces/_estimate.html) shows, for the sizing page and the
    request form alike."""
    preset = PRESETS.get(form.cleaned_data["preset"])
    context = {"form": form, "estimate": estimate, "fits": fit_list, "team": team}
    context["preset"] = preset
    context["checkpointing_saves"] = checkpointing_saves(form, estimate)
    context.update(_display(estimate, fit_list, _carried(form)))
    return context


def estimate_on_request_page(request: HttpRequest) -> dict[str, Any]:
    """The request form's estimate panel: its inputs from the query string a suggested size's
    link carried (``estimate_form``), and the result they give (as estimate_context, its form
    under ``estimate_form``); just an empty ``estimate_form`` without them or when they are
    not valid, or name a team that is not the user's."""
    if not any(request.GET.get(name) for name in ("preset", "parameters_b")):
        return {"estimate_form": EstimateForm(auto_id="est-%s")}
    form = EstimateForm(request.GET, auto_id="est-%s")
    estimate = estimate_of_form(form) if form.is_valid() else None
    if estimate is None:
        return {"estimate_form": form}
    try:
        team = estimate_team(user=request.user, asked=request.GET.get("team", ""))
    except Team.DoesNotExist:
        return {"estimate_form": EstimateForm(auto_id="est-%s")}
    fit_list = fits.sizing_fit_list(
        need_gib=estimate.total_gib,
        team=team,
        user=cast(User, request.user),
        now=timezone.now(),
        region=form.cleaned_data["region"],
        per_region=form.cleaned_data["per_region"],
    )
    context = estimate_context(form, estimate, fit_list, team)
    context["estimate_form"] = context.pop("form")
    context.pop("team")  # the request form's own team choice stays as it is
    return context


def _carried(form: EstimateForm) -> dict[str, str]:
    return {name: str(form.data[name]) for name in CARRIED if form.data.get(name) not in (None, "")}


def checkpointing_saves(form: EstimateForm, estimate: Estimate) -> dict[str, Decimal] | None:
    """For LoRA/QLoRA (and full fine-tuning) with activations counted and checkpointing off:
    the activations and total with it on (GiB), and what it saves; None otherwise."""
    if estimate.workload == Workload.INFERENCE or form.cleaned_data["checkpointing"]:
        return None
    if not estimate.activations:
        return None
    data = form.cleaned_data
    with_it = gpu_memory_estimate(
        parameters_b=data["parameters_b"],
        precision=Precision(data["precision"]),
        workload=Workload(data["workload"]),
        shape=data["shape"],
        context_length=data["context_length"],
        batch=data["batch"],
        trainable_percent=data["trainable_percent"],
        checkpointing=True,
    )
    before, after = estimate.breakdown_gib(), with_it.breakdown_gib()
    return {
        "activations_now": before["activations"],
        "activations_with": after["activations"],
        "total_with": with_it.total_gib,
        "saved": estimate.total_gib - with_it.total_gib,
    }


def estimate_of_form(form: EstimateForm) -> Estimate | None:
    """The estimate of a valid form; None (with a form error) when it cannot be made."""
    data = form.cleaned_data
    try:
        return gpu_memory_estimate(
            parameters_b=data["parameters_b"],
            precision=Precision(data["precision"]),
            workload=Workload(data["workload"]),
            shape=data["shape"],
            context_length=data["context_length"],
            batch=data["batch"],
            trainable_percent=data["trainable_percent"],
            checkpointing=data["checkpointing"],
        )
    except EstimateError as exc:
        form.add_error("precision", str(exc))
        return None


def _invalid(request: HttpRequest, form: EstimateForm, answer: str) -> HttpResponse:
    if answer == JSON:
        return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
    template = "workspaces/_estimate.html" if answer == PARTIAL else "workspaces/estimate.html"
    # htmx swaps only 2xx answers: the panel shows the field errors in place.
    return render(request, template, {"form": form}, status=200 if answer == PARTIAL else 400)


def estimate_team(*, user: Any, asked: str) -> Team | None:
    """The team the quota and budget flags are for: ``asked`` (id or slug) among the user's
    teams (Team.DoesNotExist when it is not one of them), else the user's first team (None
    without one). The API's estimate uses it too."""
    teams = team_list_for_requests(user=user)
    if not asked:
        return teams.first()
    if asked.isdigit():
        return teams.get(pk=int(asked))
    return teams.get(slug=asked)


def _gib(value: Decimal) -> float:
    return float(value)


def fit_document(fit: fits.Fit) -> dict[str, Any]:
    """One ``fits`` entry of the JSON answer (USD as a string, GiB as numbers)."""
    o = fit.offer
    return {
        "kind": o.kind,
        "name": o.name,
        "vm_size": o.vm_size,
        "mig_profile": o.mig_profile or None,
        "region": o.region,
        "gpu_model": o.gpu_model,
        "gpus": o.gpus,
        "gpu_share": format_gpus(o.gpu_share),
        "gpu_memory_gib_per_gpu": _gib(o.gpu_memory_gib),
        "gpu_memory_gib_total": _gib(o.total_gpu_memory_gib),
        "usd_per_hour": str(o.price_per_hour),
        "suits": str(o.suits) or None,
        "quota_ok": fit.quota_ok,
        "budget_ok": fit.budget_ok,
        "over": fit.over,
        "request_url": request_path(o.kind),
    }


def estimate_document(
    estimate: Estimate, fit_list: list[fits.Fit], team: Team | None
) -> dict[str, Any]:
    """The JSON answer: ``gpu_memory_gib`` (the total), ``breakdown_gib``, the inputs as
    understood, ``formula``, ``source``, ``notes``, the fit margin, and ``fits`` (cheapest
    first)."""
    shape = estimate.shape
    return {
        "gpu_memory_gib": _gib(estimate.total_gib),
        "gpu_memory_bytes": estimate.total_bytes,
        "breakdown_gib": {k: _gib(v) for k, v in estimate.breakdown_gib().items()},
        "inputs": {
            "parameters_b": str(estimate.parameters_b),
            "precision": estimate.precision.value,
            "workload": estimate.workload.value,
            "context_length": estimate.context_length,
            "batch": estimate.batch,
            "layers": shape.layers if shape else None,
            "hidden_size": shape.hidden_size if shape else None,
            "attention_heads": shape.attention_heads if shape else None,
            "kv_heads": shape.kv_heads if shape else None,
        },
        "formula": list(estimate.formula),
        "source": list(estimate.source),
        "notes": list(estimate.notes),
        "fit_margin_percent": int(fits.FIT_MARGIN * 100),
        "team": team.slug if team else None,
        "fits": [fit_document(f) for f in fit_list],
    }


def _fit_url(fit: fits.Fit, carried: dict[str, str]) -> str:
    """The request form of the fit's kind, with it chosen (``size`` or ``profile``) in its
    region, and the estimate's fields to open the form's estimate as it was."""
    offer = fit.offer
    query = {"region": offer.region, **carried}
    if offer.mig_profile:
        query["profile"] = f"{offer.gpu_model}|{offer.mig_profile}"
    else:
        query["size"] = offer.vm_size
    return f"{request_path(offer.kind)}?{urlencode(query)}"


def _display(
    estimate: Estimate, fit_list: list[fits.Fit], carried: dict[str, str]
) -> dict[str, Any]:
    """The words of the panel: the parts' labels with GiB, and the labels of the inputs."""
    labels = {
        "weights": "Weights",
        "kv_cache": "KV cache",
        "gradients": "Gradients",
        "optimizer_states": "Optimizer states",
        "activations": "Activations",
        "overhead": "Overhead",
    }
    parts = [(labels[k], v) for k, v in estimate.breakdown_gib().items()]
    return {
        "parts": parts,
        "precision_label": PRECISION_LABELS[estimate.precision],
        "workload_label": WORKLOAD_LABELS[estimate.workload],
        "margin_percent": int(fits.FIT_MARGIN * 100),
        "usable_percent": 100 - int(fits.FIT_MARGIN * 100),
        "fit_rows": [(f, _fit_url(f, carried)) for f in fit_list],
    }
